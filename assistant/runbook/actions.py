"""Running a confirmed remediation: the one place diag changes a node.

The engine only calls this after its confirmer said yes, and records the decision and the
result in the step (and so in the incident store). Each host gets the command with ``$HOST``
replaced by its own name, quoted for where it stands (``hostsubst``), through the walk's
transport.
"""

from __future__ import annotations

from collections.abc import Callable

from assistant.fleet.fanout import fan_out
from assistant.fleet.transport import Transport

from .hostsubst import substitute_host


def commands_for(command: str, hosts: tuple[str, ...]) -> dict[str, str]:
    """The exact command each host would run: what a confirmation must show."""
    return {host: substitute_host(command, host) for host in hosts}


def transport_runner(transport: Transport, timeout: float = 60.0,
                     concurrency: int = 16) -> Callable[[str, tuple[str, ...]], str]:
    def run(command: str, hosts: tuple[str, ...]) -> str:
        per_host = commands_for(command, hosts)
        results = fan_out(transport, list(hosts), lambda host: per_host[host], label="action",
                          concurrency=concurrency, timeout=timeout, deadline=timeout * 2)
        parts = []
        for host, result in results.items():
            if result.state != "ok":
                parts.append(f"{host}: {result.state} ({result.reason})")
            elif result.exit_status:
                parts.append(f"{host}: exit {result.exit_status}: "
                             f"{(result.stderr or result.stdout).strip()[:200]}")
            else:
                parts.append(f"{host}: done")
        return "; ".join(parts)

    return run
