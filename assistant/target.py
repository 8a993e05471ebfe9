"""Which hosts a command reaches and how: the host options shared by run, probe and the TUI.

``--scenario`` replays a simulated incident; ``--hosts``/``--inventory`` reach real hosts over
SSH (or this machine with ``--transport local``). Everything here is UI-free so the CLI, the
TUI and drills open targets the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.fleet.transport import Transport


class TargetError(ValueError):
    """Bad host options: one clear line for the operator."""


@dataclass
class Target:
    hosts: list[str]
    attrs: dict[str, dict[str, Any]]
    transport: Transport
    scenario: Any = None  # assistant.fleet.scenario.Scenario when replaying
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    def close(self) -> None:
        self.transport.close()


def open_target(*, hosts: str | None = None, inventory: str | None = None,
                scenario: str | None = None, transport: str | None = None,
                accept_new_host_keys: bool = False, connect_timeout: float = 5.0,
                known_hosts: str | None = None) -> Target:
    from assistant.fleet.inventory import expand_hosts

    if scenario:
        from assistant.fleet.replay import ReplayTransport
        from assistant.fleet.scenario import ScenarioError, load_scenario

        if inventory:
            raise TargetError("--scenario replays its own fleet; it does not take --inventory")
        try:
            scn = load_scenario(scenario)
        except ScenarioError as exc:
            raise TargetError(str(exc)) from None
        names = _expand(hosts) if hosts else scn.hosts
        unknown = [h for h in names if h not in scn.hosts]
        if unknown:
            raise TargetError(f"host(s) not in scenario '{scn.name}': {', '.join(unknown)}")
        return Target(names, {h: scn.attrs.get(h, {}) for h in names}, ReplayTransport(scn),
                      scn, dict(scn.params))

    if transport == "local":
        from assistant.fleet.local import LocalTransport

        names = _expand(hosts) if hosts else ["localhost"]
        return Target(names, {h: {} for h in names}, LocalTransport())

    from assistant.fleet.inventory import InventoryError, load_inventory, resolve
    from assistant.fleet.ssh import SSHTransport

    try:
        inv = load_inventory(Path(inventory)) if inventory else None
        if hosts:
            names = expand_hosts(hosts)
        elif inv is not None:
            names = list(inv.hosts)
        else:
            raise TargetError("which hosts? give --hosts EXPR, --inventory FILE or --scenario NAME")
        specs = resolve(names, inventory=inv)
    except InventoryError as exc:
        raise TargetError(str(exc)) from None
    ssh = SSHTransport({s.name: s for s in specs}, connect_timeout=connect_timeout,
                       accept_new_host_keys=accept_new_host_keys,
                       known_hosts=known_hosts or (inv.known_hosts if inv else None))
    return Target(names, {s.name: dict(s.attrs) for s in specs}, ssh)


def _expand(expr: str) -> list[str]:
    from assistant.fleet.inventory import InventoryError, expand_hosts

    try:
        return expand_hosts(expr)
    except InventoryError as exc:
        raise TargetError(str(exc)) from None
