"""Which hosts a command reaches and how: the host options shared by run, probe and the TUI.

``--scenario`` replays a simulated incident; ``--hosts``/``--inventory`` reach real hosts over
SSH (or this machine with ``--transport local``); ``--job ID`` asks Slurm for the job's nodes
and reaches each over SSH where the inventory knows it, else inside the job with srun
(``--transport`` forces one way). Probes that read the scheduler itself run once on this
machine whatever the transport (``assistant.fleet.routing.ClientSideTransport``). Everything
here is UI-free so the CLI, the TUI and drills open targets the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.fleet.transport import Transport

TRANSPORTS = ("ssh", "slurm", "local")


class TargetError(ValueError):
    """Bad host options: one clear line for the operator."""


@dataclass
class Target:
    hosts: list[str]
    attrs: dict[str, dict[str, Any]]
    transport: Transport
    scenario: Any = None  # assistant.fleet.scenario.Scenario when replaying
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    job: Any = None  # assistant.fleet.slurmjob.JobInfo with --job
    # the SSH transport's known_hosts policy (assistant.fleet.hostkeys.KnownHosts), if any:
    # its warnings and the keys it accepts are for the front end and the store
    host_keys: list[Any] = field(default_factory=list)
    # what else ends with the target: a sharded walk's worker processes (their connections)
    on_close: list[Any] = field(default_factory=list)

    def close(self) -> None:
        for close in self.on_close:
            close()
        self.transport.close()

    @property
    def job_id(self) -> str | None:
        """The Slurm job id the hosts came from (recorded with the session), or None."""
        return self.job.id if self.job is not None else None

    def context(self) -> dict[str, Any]:
        """Incident context to record with the session: the job's state, partition, start
        time, GRES and node list when the hosts came from ``--job``; empty otherwise."""
        return {"slurm_job": self.job.context()} if self.job is not None else {}


def open_target(*, hosts: str | None = None, inventory: str | None = None,
                scenario: str | None = None, transport: str | None = None,
                accept_new_host_keys: bool = False, connect_timeout: float = 5.0,
                known_hosts: str | None = None, job: str | None = None,
                slurm_timeout: float | None = None) -> Target:
    """Hosts and a transport for the host options (see the module doc).

    *slurm_timeout* bounds each Slurm call made to resolve *job* (default a few seconds: a
    controller that does not answer must give a clear error, not a minute of silence).
    """
    from assistant.fleet.hostexpr import expand_hosts

    if transport is not None and transport not in TRANSPORTS:
        raise TargetError(f"--transport takes {', '.join(TRANSPORTS)}, not '{transport}'")
    if scenario:
        from assistant.fleet.replay import ReplayTransport
        from assistant.fleet.scenario import ScenarioError, load_scenario

        if inventory:
            raise TargetError("--scenario replays its own fleet; it does not take --inventory")
        if job:
            raise TargetError("--scenario replays its own fleet; it does not take --job")
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
    if job:
        return _open_job(job, hosts=hosts, inventory=inventory, transport=transport,
                         accept_new_host_keys=accept_new_host_keys,
                         connect_timeout=connect_timeout, known_hosts=known_hosts,
                         slurm_timeout=slurm_timeout)
    if transport == "slurm":
        raise TargetError("--transport slurm runs probes inside a job's allocation: give "
                          "--job ID")

    if transport == "local":
        from assistant.fleet.local import LocalTransport

        names = _expand(hosts) if hosts else ["localhost"]
        return Target(names, {h: {} for h in names}, _client_side(LocalTransport()))

    from assistant.fleet.hostexpr import InventoryError
    from assistant.fleet.inventory import load_inventory, resolve

    try:
        inv = load_inventory(Path(inventory)) if inventory else None
        if hosts:
            names = expand_hosts(hosts)
        elif inv is not None:
            names = list(inv.hosts)
        else:
            raise TargetError("which hosts? give --hosts EXPR, --inventory FILE, --job ID or "
                              "--scenario NAME")
        specs = resolve(names, inventory=inv)
    except InventoryError as exc:
        raise TargetError(str(exc)) from None
    ssh = _ssh(specs, inv, connect_timeout, accept_new_host_keys, known_hosts)
    return Target(names, {s.name: dict(s.attrs) for s in specs}, _client_side(ssh),
                  host_keys=[ssh.host_keys])


def _open_job(job: str, *, hosts: str | None, inventory: str | None, transport: str | None,
              accept_new_host_keys: bool, connect_timeout: float, known_hosts: str | None,
              slurm_timeout: float | None) -> Target:
    """--job ID: the job's nodes (optionally narrowed by --hosts), each reached over SSH when
    the inventory has it (or --transport ssh), else through srun inside the job."""
    from assistant.fleet.hostexpr import InventoryError
    from assistant.fleet.inventory import load_inventory, resolve
    from assistant.fleet.slurm import SlurmTransport
    from assistant.fleet.slurmjob import DEFAULT_LOOKUP_TIMEOUT, SlurmError, lookup_job

    try:
        info = lookup_job(job, timeout=slurm_timeout or DEFAULT_LOOKUP_TIMEOUT)
    except SlurmError as exc:
        raise TargetError(str(exc)) from None
    names = list(info.nodes)
    if hosts:
        wanted = _expand(hosts)
        outside = [h for h in wanted if h not in names]
        if outside:
            raise TargetError(f"host(s) not in job {info.id} ({info.nodelist or ', '.join(names)})"
                              f": {', '.join(outside)}")
        names = wanted
    try:
        inv = load_inventory(Path(inventory)) if inventory else None
    except InventoryError as exc:
        raise TargetError(str(exc)) from None
    params: dict[str, dict[str, Any]] = {"scheduler": {"job": info.id}}
    logs = info.logs_params()  # the batch step's output files, for the logs component
    if logs:
        params["logs"] = logs
    if "job_start_epoch" in logs:  # the --logs readers leave out an earlier run's files
        for probe in ("joblog", "nccl", "ranks"):
            params[probe] = {"job_start_epoch": logs["job_start_epoch"]}
    attrs: dict[str, dict[str, Any]] = {h: {} for h in names}

    if transport == "local":
        from assistant.fleet.local import LocalTransport

        return Target(names, attrs, _client_side(LocalTransport()), params=params, job=info)

    via_ssh = names if transport == "ssh" else [
        h for h in names if inv is not None and h in inv.hosts]
    routes: dict[str, Transport] = {}
    policies: list[Any] = []
    if via_ssh:
        try:
            specs = resolve(via_ssh, inventory=inv)
        except InventoryError as exc:
            raise TargetError(str(exc)) from None
        ssh = _ssh(specs, inv, connect_timeout, accept_new_host_keys, known_hosts)
        policies.append(ssh.host_keys)
        for spec in specs:
            routes[spec.name] = ssh
            attrs[spec.name] = dict(spec.attrs)
    if len(via_ssh) == len(names):
        default: Transport = next(iter(routes.values()))
    else:
        unavailable = None if info.running else (
            f"job {info.id} is {info.state}: no allocation for srun to run in; reach its "
            "nodes over SSH (--inventory, or --transport ssh)")
        default = SlurmTransport(info.id, info.nodes if info.running else None,
                                 unavailable=unavailable)
    if routes and len(via_ssh) < len(names):
        from assistant.fleet.routing import RoutingTransport

        default = RoutingTransport(routes, default)
    return Target(names, attrs, _client_side(default), params=params, job=info,
                  host_keys=policies)


def _ssh(specs: list[Any], inv: Any, connect_timeout: float, accept_new_host_keys: bool,
         known_hosts: str | None) -> Any:
    from assistant.fleet.ssh import SSHTransport

    return SSHTransport({s.name: s for s in specs}, connect_timeout=connect_timeout,
                        accept_new_host_keys=accept_new_host_keys,
                        known_hosts=known_hosts or (inv.known_hosts if inv else None))


def _client_side(transport: Transport) -> Transport:
    """Probes that read the scheduler run once, here, whatever reaches the nodes."""
    from assistant.fleet.routing import ClientSideTransport

    return ClientSideTransport(transport)


def _expand(expr: str) -> list[str]:
    from assistant.fleet.hostexpr import InventoryError, expand_hosts

    try:
        return expand_hosts(expr)
    except InventoryError as exc:
        raise TargetError(str(exc)) from None
