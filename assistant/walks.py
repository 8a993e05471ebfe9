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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from assistant.runbook import events as ev
from assistant.runbook.engine import ActionRunner, Confirmer, Walk
from assistant.runbook.model import Runbook
from assistant.target import Target, open_target

if TYPE_CHECKING:
    from assistant.probeworker import ProbeWorker
    from assistant.store import Recorder, Store

DEFAULT_CONCURRENCY = 64  # hosts at once (DESIGN.md's --concurrency default)
# The probes a job's logs feed (--logs): rank progress, the job log, NCCL's own lines.
LOG_PARAMS = (("ranks", "logs"), ("joblog", "log"), ("nccl", "log"), ("logs", "log"))
# How the hosts were reached, recorded with the session so ``--resume`` reaches them again.
RECORDED_OPTIONS = ("scenario", "inventory", "hosts", "transport", "logs", "job")
# The soak's plan (diag accept/watch --duration/--interval), recorded too: a resumed soak ends
# when the duration it was started with is over.
SOAK_PLAN = ("duration_s", "interval_s")


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
    # Worker processes the hosts are sharded over (assistant/probeworker/shards.py); None:
    # one per core when the fleet is big enough to use them, else the walk's own process.
    workers: int | None = 1
    timeout: float | None = None
    deadline: float = 120.0
    thresholds: Mapping[str, Any] | None = None
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    logs: str | None = None
    # The monitoring step's plan (assistant.monitoring.step.MonitoringPlan): the sweep also
    # reads the incident window from Prometheus (issue 26). None: hosts only.
    monitoring: Any = None

    def open(self) -> Target:
        """The hosts and the transport (raises ``TargetError`` with one clear line)."""
        return open_target(**self.target_args())

    def target_args(self) -> dict[str, Any]:
        """``open_target``'s arguments (plain data: a probe worker opens the same target)."""
        return {"hosts": self.hosts, "inventory": self.inventory, "scenario": self.scenario,
                "transport": self.transport, "accept_new_host_keys": self.accept_new_host_keys,
                "connect_timeout": self.connect_timeout, "known_hosts": self.known_hosts,
                "job": self.job, "slurm_timeout": self.slurm_timeout}

    def probe_params(self, target: Target) -> dict[str, dict[str, Any]]:
        """The target's parameters (a scenario's, a job's), then --logs, then --param."""
        params = {probe: dict(values) for probe, values in target.params.items()}
        if self.logs:
            for probe, key in LOG_PARAMS:
                params.setdefault(probe, {})[key] = self.logs
        for probe, values in self.params.items():
            params.setdefault(probe, {}).update(values)
        return params

    def provider(self, target: Target, cancel: threading.Event | None = None,
                 say: Callable[[str], None] | None = None) -> Any:
        """A ``FleetProvider`` over *target*; *cancel* ends its fan-outs early; *say* (a
        front end's own place for one-line notes) replaces the monitoring plan's."""
        from assistant.runbook.provider import FleetProvider

        provider = self.sharded(target, cancel) or FleetProvider(
            target.transport, attrs=target.attrs, thresholds=self.thresholds,
            params=self.probe_params(target), concurrency=self.concurrency,
            timeout=self.timeout, deadline=self.deadline, cancel=cancel)
        return self.monitored(provider, target, say)

    def sharded(self, target: Target, cancel: threading.Event | None = None) -> Any:
        """A ``ShardedProvider`` when the walk's hosts are sharded over worker processes
        (``--workers``; over SSH only, as ``worker`` below), else None."""
        from assistant.probeworker.shards import open_sharded

        return open_sharded(self, target, cancel) if self._over_ssh(target) else None

    def _over_ssh(self, target: Target) -> bool:
        return target.scenario is None and target.job is None and self.transport != "local"

    def monitored(self, provider: Any, target: Target,
                  say: Callable[[str], None] | None = None) -> Any:
        """*provider* with the walk's incident window read in its sweep: the monitoring plan's
        Prometheus, else a scenario's recorded window, else *provider* as it is."""
        plan = self.monitoring
        if plan is None:
            return self._recorded_window(provider, target, say)
        return (replace(plan, say=say) if say is not None else plan).wrap(provider, target)

    @staticmethod
    def _recorded_window(provider: Any, target: Target,
                         say: Callable[[str], None] | None) -> Any:
        """A scenario's recorded incident window, replayed in its walks' sweep (the demo and
        the drills show the timeline with no Prometheus); a file that cannot be read is said
        in one line and the walk is what it would be without it."""
        path = getattr(target.scenario, "monitoring", None)
        if path is None:
            return provider
        from assistant.monitoring.recorded import RecordedWindowError, load
        from assistant.monitoring.step import MonitoredProvider

        tell = say or (lambda line: None)
        try:
            window = load(path)
        except RecordedWindowError as exc:
            tell(f"monitoring: the scenario's recorded window is not used: {exc}")
            return provider
        return MonitoredProvider(provider, window, tell)

    def worker(self, target: Target) -> ProbeWorker | None:
        """A probe worker process for a front end whose own loop must stay responsive (the
        TUI): over SSH only. A replayed scenario costs next to nothing, a Slurm job's probes
        already fan out through one srun step, and --transport local reaches this machine
        alone, so those stay in-process (None)."""
        from assistant.probeworker import ProbeWorker

        if not self._over_ssh(target):
            return None
        return ProbeWorker(self.target_args(), {
            "thresholds": self.thresholds, "params": self.probe_params(target),
            "concurrency": self.concurrency, "timeout": self.timeout,
            "deadline": self.deadline}, target.host_keys)

    def record_of(self, target: Target) -> dict[str, Any]:
        """How the hosts were reached, as the session keeps it (and a Slurm job's context)."""
        record: dict[str, Any] = {key: getattr(self, key) or None for key in RECORDED_OPTIONS}
        plan = {k: v for k, v in self.params.get("soak", {}).items() if k in SOAK_PLAN and v}
        if plan:  # a resumed soak ends when *its* duration is over, not the default's
            record["soak"] = plan
        return {**record, **target.context()}

    def resumed(self, recorded: Mapping[str, Any] | None) -> FleetOptions:
        """These options with what a recorded session used filled in where they are unset,
        so ``--resume`` reaches the same hosts unless the operator says otherwise."""
        unset = {f.name for f in fields(self) if getattr(self, f.name) in (None, [], "ssh")}
        changes: dict[str, Any] = {key: value for key, value in (recorded or {}).items()
                                   if key in RECORDED_OPTIONS and key in unset
                                   and value is not None}
        plan = (recorded or {}).get("soak") or {}
        if plan:  # the soak's duration and interval as recorded, unless given again
            params = {probe: dict(values) for probe, values in self.params.items()}
            soak = params.setdefault("soak", {})
            for key in SOAK_PLAN:
                if plan.get(key) and not soak.get(key):
                    soak[key] = plan[key]
            changes["params"] = params
        return replace(self, **changes)


@dataclass
class Recording:
    """Where a walk is recorded: the store's session, the listener writing to it, and the
    incident it is part of (*joined*: why it joined an open one; None when it opened it)."""

    session: str
    recorder: Recorder
    incident: str = ""
    joined: str | None = None
    host_keys: Any = None  # assistant.store.hostkeys.HostKeyRecorder, with an SSH target

    def describe(self) -> str:
        """One line for the operator: which incident this walk is recorded in, and why."""
        if not self.incident:
            return (f"session {self.session}: the store refused it, recorded in the journal "
                    f"{self.recorder.journal.path} (the incident is chosen when it is imported)")
        if self.joined:
            return f"incident {self.incident}: joined ({self.joined})"
        return f"incident {self.incident}: new"

    def flush(self) -> bool:
        """Retry writes the store refused; True when every step is written."""
        done = bool(self.recorder.flush())
        if self.host_keys is not None:
            done = bool(self.host_keys.flush()) and done
        return done

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
    return build_walk(runbook, target.hosts, provider, answers=answers, listeners=listeners,
                      confirm=confirm, run_action=run_action, saved_state=saved_state)


def build_walk(runbook: Runbook, hosts: Sequence[str], provider: Any, *,
               answers: Mapping[str, str] | None = None,
               listeners: Iterable[ev.Listener] = (), confirm: Confirmer | None = None,
               run_action: ActionRunner | None = None,
               saved_state: Mapping[str, Any] | None = None) -> Walk:
    """``new_walk`` for front ends that hold the hosts rather than a target (the TUI's walk
    driver): one place where a walk is made or resumed, its earlier soak rounds counted."""
    kwargs: dict[str, Any] = {"listeners": listeners, "confirm": confirm,
                              "run_action": run_action}
    if saved_state is not None:
        resume_samples(provider, saved_state)
        walk = Walk.from_dict(saved_state, runbook, provider, **kwargs)
        walk.add_answers(answers or {})
        return walk
    return Walk(runbook, hosts, provider, answers=answers, **kwargs)


def record(walk: Walk, target: Target, options: FleetOptions, provider: Any, *,
           store: Store | None = None, symptom: str = "", session: str | None = None,
           on_error: Callable[[Exception], None] | None = None,
           incident: str | None = None, join: bool = True,
           join_window: Any = "default", simulated: bool | None = None) -> Recording:
    """Record *walk* in *store* (default: the operator's store) from now on.

    A new walk opens a session with its target, Slurm job and hosts' attributes, in the
    *incident* named, else in the open incident it plainly belongs to (the same Slurm job, or
    the same runbook on overlapping hosts within *join_window*, a timedelta; None never joins
    on hosts; "default" is $DIAG_JOIN_WINDOW or the store's default), else in a new one
    (always, with *join* False) — the Recording says which and why. A resumed walk (*session*
    given) goes on writing to its own. A replayed scenario (the demo, ``--scenario``;
    *simulated* None means "is the target one?") is marked simulated, joins only simulated
    incidents and is kept out of the real history unless asked for (docs/store.md). The
    walk's state is saved at once, so a walk killed before its first step can be resumed.
    *on_error* hears, once, of a store that refuses a write (locked beyond its busy timeout,
    full, corrupt): the walk goes on, its writes kept in a journal beside the store and imported
    at ``Recording.flush()`` or by ``diag store recover`` (the session's id is handed out then
    and kept; its incident is chosen on import).
    """
    import duckdb

    from assistant.store import Recorder, Store, StoreError
    from assistant.store.base import new_id
    from assistant.store.db import current_operator
    from assistant.store.incidents import join_window as default_window
    from assistant.store.journal import Journal
    from assistant.store.recorder import unwritable_reason

    store = store if store is not None else Store()
    journalled = False
    if simulated is None:
        simulated = target.scenario is not None
    if session is None:
        window = default_window() if join_window == "default" else join_window
        # the runbook's file too: a team's runbook given by path is found again on --resume
        recorded_target: dict[str, Any] = {
            **options.record_of(target),
            "runbook_file": str(walk.runbook.path.resolve()) if walk.runbook.path else None}
        start = {"op": "start", "runbook": walk.runbook.id, "hosts": list(target.hosts),
                 "attrs": {h: dict(a) for h, a in target.attrs.items()},
                 "incident": incident, "symptom": symptom, "job": target.job_id,
                 "target": recorded_target,
                 "join": join, "simulated": simulated,
                 "join_window_s": window.total_seconds() if window is not None else None,
                 "operator": current_operator()}
        try:
            started = store.start_session(walk.runbook.id, target.hosts, target.attrs,
                                          incident=incident, symptom=symptom,
                                          job=target.job_id, target=recorded_target,
                                          join=join, join_window=window,
                                          simulated=simulated)
            session, incident_id, joined = started.session, started.incident, started.joined
        except (StoreError, duckdb.Error, OSError) as exc:
            if incident is not None and not _unwritable(exc):
                raise  # --incident names one the store refuses (closed, unknown): say so
            session, incident_id, joined, journalled = new_id(), "", None, True
            book = Journal(store.path, session)
            book.append(start)  # an OSError here: neither the store nor its directory works
            if on_error is not None:
                on_error(StoreError(f"{unwritable_reason(exc)}; this walk is recorded in the "
                                    f"journal {book.path} and imported when the store can "
                                    "take it (`diag store recover`)"))
    else:
        saved = store.load_session(session)
        incident_id, joined = saved["incident_id"], f"resumed session {session}"
    recorder = Recorder(store, session, raw=getattr(provider, "raw", None),
                        prepared=getattr(provider, "prepared", None), on_error=on_error,
                        journalled=journalled)
    recorder.follow(walk)
    keys = None
    if target.host_keys:  # keys accepted with --accept-new-host-keys go into the record too
        from assistant.store.hostkeys import HostKeyRecorder

        keys = HostKeyRecorder(store, session, target.host_keys, on_error=on_error)
        walk.listeners.append(keys)
    return Recording(session, recorder, incident_id, joined, keys)


def _unwritable(exc: BaseException) -> bool:
    """A store that cannot be written at all (locked, full, unreadable), as opposed to one
    that refused this request (a plain StoreError: an unknown or closed incident)."""
    from assistant.store.base import StoreBusyError, StoreFullError, StoreVersionError

    plain = type(exc).__name__ == "StoreError"
    return not plain or isinstance(exc, (StoreBusyError, StoreFullError, StoreVersionError))


def load_saved(store: Store, session: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A recorded session (id or unique prefix) and the walk state to resume it from
    (``StoreError`` when there is none, or it has concluded). The state carries the rounds
    its soak recorded (``prior_samples``; :func:`resume_samples` hands them to the provider),
    so a walk interrupted during a 4-hour soak goes on where it stopped, not from zero."""
    saved = store.load_session(session)
    state = store.load_session_state(saved["id"])
    state["prior_samples"] = recorded_samples(store, saved["id"])
    return saved, state


def recorded_samples(store: Store, session_id: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The soak or watch rounds *session_id* recorded, as ``prior_samples`` (probe -> host ->
    samples in order)."""
    from assistant.store import writes

    return dict(store.read(lambda con: writes.session_samples(con, session_id)))


def resume_samples(provider: Any, state: Mapping[str, Any] | None) -> None:
    """Give *provider* the soak rounds a resumed walk recorded before (``load_saved``): the
    sampler counts them and takes only the rounds still due."""
    if state is not None and state.get("prior_samples"):
        provider.prior_samples = dict(state["prior_samples"])


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
