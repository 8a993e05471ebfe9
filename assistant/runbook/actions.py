"""Running a confirmed remediation: the one place diag changes a node.

The engine only calls a runner after its confirmer said yes, and records the decision and
each host's result in the step (and so in the incident store). Each host gets the command
with ``$HOST`` replaced by its own name, quoted for where it stands (``hostsubst``), through
the walk's transport — the same runner for ``diag run`` and the TUI, so what a front end says
it did is what it did. A replayed incident has no node to change: its runner simulates, and
says so on every host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from assistant.fleet.fanout import fan_out
from assistant.fleet.transport import Transport
from probes.hostfold import fold_counted

from .hostsubst import substitute_host

# (command, hosts) -> {host: {"state": "done" | "failed" | "simulated", "detail": ...}}
Runner = Callable[[str, tuple[str, ...]], dict[str, dict[str, str]]]
DETAIL_LIMIT = 300  # characters of a failed command's output kept per host


def commands_for(command: str, hosts: tuple[str, ...]) -> dict[str, str]:
    """The exact command each host would run: what a confirmation must show."""
    return {host: substitute_host(command, host) for host in hosts}


def transport_runner(transport: Transport, timeout: float = 60.0,
                     concurrency: int = 16) -> Runner:
    """Run the command on each host through *transport*: ``done`` when it exits 0, else
    ``failed`` with why (the host's state, or the exit status and what the command printed)."""

    def run(command: str, hosts: tuple[str, ...]) -> dict[str, dict[str, str]]:
        per_host = commands_for(command, hosts)
        results = fan_out(transport, list(hosts), lambda host: per_host[host], label="action",
                          concurrency=concurrency, timeout=timeout, deadline=timeout * 2)
        out: dict[str, dict[str, str]] = {}
        for host, result in results.items():
            if result.state != "ok":
                out[host] = {"state": "failed", "detail": f"{result.state} ({result.reason})"}
            elif result.exit_status:
                text = " ".join((result.stderr or result.stdout).split())[:DETAIL_LIMIT]
                out[host] = {"state": "failed",
                             "detail": f"exit {result.exit_status}: {text}".rstrip(": ")}
            else:
                out[host] = {"state": "done", "detail": ""}
        return out

    return run


def simulated_runner(command: str, hosts: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """A replayed incident's runner: nothing runs anywhere, and every host says so."""
    return {host: {"state": "simulated", "detail": "replayed incident: nothing ran"}
            for host in hosts}


def action_outcome(per_host: Mapping[str, Mapping[str, str]]) -> tuple[str, str]:
    """(outcome, one-line result) of a confirmed action from each host's result: "done" on
    every host, "failed" on every host, "partly" done, or "simulated" (a replayed incident)."""
    by_state: dict[str, list[str]] = {}
    for host, result in per_host.items():
        by_state.setdefault(result["state"], []).append(host)
    if not by_state:
        outcome = "not-run"
    elif set(by_state) == {"simulated"}:
        outcome = "simulated"
    elif set(by_state) <= {"done"}:
        outcome = "done"
    elif "done" in by_state:
        outcome = "partly"
    else:
        outcome = "failed"
    parts = []
    for host, result in per_host.items():
        detail = f": {result['detail']}" if result["detail"] else ""
        parts.append(f"{host}: {result['state']}{detail}")
    if len(parts) <= 1:
        return outcome, parts[0] if parts else "nothing ran"
    summary = "; ".join(f"{state} on {fold_counted(hosts)}" for state, hosts in by_state.items())
    return outcome, f"{summary} — " + "; ".join(parts)
