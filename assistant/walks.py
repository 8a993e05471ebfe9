"""One seam for a recorded walk, shared by ``diag run``, the TUI and drills.

Every front end walks a runbook against a target and records the walk; this is the one place
where the host options become a target, a probe provider, a store session and a recorder. Two
copies of that assembly drifted once (the TUI recorded no target, no Slurm job and swallowed
store errors), so the front ends now only choose *how* to ask questions and confirmations, and
*whether* to record (a drill records its score, not an incident).

Nothing here touches a terminal or Textual; store I/O happens where the caller calls
:func:`record` (the TUI calls it on the walk's thread, never the UI's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from assistant.runbook import events as ev
from assistant.runbook.engine import ActionRunner, Confirmer, Walk
from assistant.runbook.model import Runbook
from assistant.target import Target, open_target

DEFAULT_CONCURRENCY = 64  # hosts at once (DESIGN.md's --concurrency default)
# The probes a job's logs feed (--logs): rank progress, the job log, NCCL's own lines.
LOG_PARAMS = (("ranks", "logs"), ("joblog", "log"), ("nccl", "log"))
# How the hosts were reached, recorded with the session so ``--resume`` reaches them again.
RECORDED_OPTIONS = ("scenario", "inventory", "hosts", "transport", "logs", "job")


@dataclass
class FleetOptions:
    """The host options of DESIGN.md's command line, for every front end.

    *thresholds* are already loaded (defaults merged with the operator's file); *params* are
    per-probe parameters (``--param``, a version baseline) applied over the target's own.
    """

    hosts: str | None = None
    inventory: str | None = None
    scenario: str | None = None
    job: str | None = None
    transport: str | None = None
    slurm_timeout: float | None = None
    accept_new_host_keys: bool = False
    connect_timeout: float = 5.0
    known_hosts: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    timeout: float | None = None
    deadline: float = 120.0
    thresholds: Mapping[str, Any] | None = None
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    logs: str | None = None

    def open(self) -> Target:
        """The hosts and the transport (raises ``TargetError`` with one clear line)."""
        return open_target(hosts=self.hosts, inventory=self.inventory, scenario=self.scenario,
                           transport=self.transport,
                           accept_new_host_keys=self.accept_new_host_keys,
                           connect_timeout=self.connect_timeout, known_hosts=self.known_hosts,
                           job=self.job, slurm_timeout=self.slurm_timeout)

    def probe_params(self, target: Target) -> dict[str, dict[str, Any]]:
        """The target's parameters (a scenario's, a job's), then --logs, then --param."""
        params = {probe: dict(values) for probe, values in target.params.items()}
        if self.logs:
            for probe, key in LOG_PARAMS:
                params.setdefault(probe, {})[key] = self.logs
        for probe, values in self.params.items():
            params.setdefault(probe, {}).update(values)
        return params

    def provider(self, target: Target, cancel: threading.Event | None = None) -> Any:
        """A ``FleetProvider`` over *target*; *cancel* ends its fan-outs early."""
        from assistant.runbook.provider import FleetProvider

        return FleetProvider(target.transport, attrs=target.attrs, thresholds=self.thresholds,
                             params=self.probe_params(target), concurrency=self.concurrency,
                             timeout=self.timeout, deadline=self.deadline, cancel=cancel)

    def record_of(self, target: Target) -> dict[str, Any]:
        """How the hosts were reached, as the session keeps it (and a Slurm job's context)."""
        record: dict[str, Any] = {key: getattr(self, key) or None for key in RECORDED_OPTIONS}
        return {**record, **target.context()}

    def resumed(self, recorded: Mapping[str, Any] | None) -> FleetOptions:
        """These options with what a recorded session used filled in where they are unset,
        so ``--resume`` reaches the same hosts unless the operator says otherwise."""
        unset = {f.name for f in fields(self) if getattr(self, f.name) in (None, [], "ssh")}
        changes = {key: value for key, value in (recorded or {}).items()
                   if key in RECORDED_OPTIONS and key in unset and value is not None}
        return replace(self, **changes)


@dataclass
class Recording:
    """Where a walk is recorded: the store's session and the listener writing to it."""

    session: str
    recorder: Any  # assistant.store.Recorder

    def flush(self) -> bool:
        """Retry writes the store refused; True when every step is written."""
        return bool(self.recorder.flush())

    def interrupted(self) -> None:
        """The walk was stopped (Ctrl-C, the TUI closed mid-step): say so in the session, so
        it does not read "running" for ever; ``--resume`` continues it from its last step."""
        from assistant.store import writes

        self.flush()
        self.recorder.store.write(
            lambda con: writes.set_status(con, self.session, "interrupted"))


def action_runner(target: Target) -> ActionRunner:
    """How confirmed actions run against *target*: through its transport, the same for the
    CLI and the TUI; a replayed incident only simulates them (and says so)."""
    from assistant.runbook.actions import simulated_runner, transport_runner

    if target.scenario is not None:
        return simulated_runner
    return transport_runner(target.transport)


def new_walk(runbook: Runbook, target: Target, provider: Any, *,
             answers: Mapping[str, str] | None = None,
             listeners: Iterable[ev.Listener] = (), confirm: Confirmer | None = None,
             run_action: ActionRunner | None = None,
             saved_state: Mapping[str, Any] | None = None) -> Walk:
    """A walk of *runbook* over the target's hosts, or the saved one resumed (new *answers*
    then go to the questions still ahead)."""
    kwargs: dict[str, Any] = {"listeners": listeners, "confirm": confirm,
                              "run_action": run_action}
    if saved_state is not None:
        walk = Walk.from_dict(saved_state, runbook, provider, **kwargs)
        walk.add_answers(answers or {})
        return walk
    return Walk(runbook, target.hosts, provider, answers=answers, **kwargs)


def record(walk: Walk, target: Target, options: FleetOptions, provider: Any, *,
           store: Any = None, symptom: str = "", session: str | None = None,
           on_error: Callable[[Exception], None] | None = None,
           simulated: bool | None = None) -> Recording:
    """Record *walk* in *store* (default: the operator's store) from now on.

    A new walk opens a session with its target, Slurm job and hosts' attributes; a resumed one
    (*session* given) goes on writing to its own. A replayed scenario (the demo,
    ``--scenario``; *simulated* None means "is the target one?") is marked simulated and kept
    out of the real history unless asked for (docs/store.md). The walk's state is saved at
    once, so a walk killed before its first step can be resumed. *on_error* hears of a store
    that refuses a write (busy, full): the step is kept and written when the store is free.
    """
    from assistant.store import Recorder, Store

    store = store if store is not None else Store()
    if simulated is None:
        simulated = target.scenario is not None
    if session is None:
        # The runbook's file too: a team's runbook given by path is found again on --resume.
        recorded = {**options.record_of(target),
                    "runbook_file": str(walk.runbook.path.resolve()) if walk.runbook.path
                    else None}
        session = store.open_session(walk.runbook.id, target.hosts, target.attrs,
                                     symptom=symptom, job=target.job_id, target=recorded,
                                     simulated=simulated)
    recorder = Recorder(store, session, raw=getattr(provider, "raw", None), on_error=on_error)
    recorder.follow(walk)
    return Recording(session, recorder)


def load_saved(store: Any, session: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A recorded session (id or unique prefix) and the walk state to resume it from
    (``StoreError`` when there is none, or it has concluded)."""
    saved = store.load_session(session)
    return saved, store.load_session_state(saved["id"])


def saved_runbook(saved: Mapping[str, Any], state: Mapping[str, Any]) -> Runbook:
    """The runbook a recorded walk used: the file it was loaded from when that is still there
    (a team's runbook given by path), else the runbook of that id on the search path
    (``KeyError`` / ``RunbookError`` when neither exists or it no longer validates)."""
    from pathlib import Path

    from assistant.runbook.library import get_runbook, load_runbook

    path = (saved.get("target") or {}).get("runbook_file")
    if path and Path(path).is_file():
        runbook = load_runbook(Path(path), named_by_file=False)
        if runbook.id == state["runbook"]:
            return runbook
    return get_runbook(str(state["runbook"]))
