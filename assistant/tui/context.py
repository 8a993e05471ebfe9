"""What one TUI session works against: the fleet options, the opened target, the store hooks.

Kept apart from the App so screens get one plain object (easy to build in tests with a
scenario and no delay) and so nothing here imports Textual. The target is opened once and
shared by every walk of the session: SSH connections are reused across walks as across probes.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assistant.probeworker import ProbeWorker
from assistant.target import Target, TargetError
from assistant.walks import DEFAULT_CONCURRENCY as TUI_CONCURRENCY
from assistant.walks import RECORDED_OPTIONS, FleetOptions, Recording, action_runner, record

from . import hooks

__all__ = ["TUI_CONCURRENCY", "DiagContext", "FleetOptions"]

DEMO_SCENARIO = "demo"
# TUI_CONCURRENCY, the TUI's default fan-out width, is the CLI's: over SSH the probes run in
# a worker process (assistant.probeworker), so the fan-out's threads never hold the event
# loop's GIL.


class DiagContext:
    """The session's fleet, target and hooks. Build one per app; ``close()`` at exit."""

    def __init__(self, options: FleetOptions | None = None, *, demo: bool = False,
                 target: Target | None = None,
                 incidents: Callable[[], list[hooks.IncidentSummary]] | None = None,
                 record: bool = True,
                 session_id: Callable[[], str] | None = None,
                 export_dir: Path | None = None, drill: Any = None,
                 probe_worker: bool = True) -> None:
        """*drill*: a ``drill.Drill`` when this session is a drill (the app opens the drill
        screen instead of home). *record*: False records no walk (a drill keeps its score,
        not an incident). *probe_worker*: False runs even SSH probes in this process (the
        old way; ``bench/tui.py --in-process`` compares the two)."""
        self.options = options or FleetOptions()
        self.drill = drill
        if demo and not self.options.scenario and not target:
            self.options.scenario = DEMO_SCENARIO
        self.demo = demo
        # Over a replayed scenario the walks are simulated: list them (marked) with the rest.
        self.incidents = incidents or (lambda: hooks.recent_incidents(
            include_simulated=self.simulated))
        self.recording = record
        self._session_id = session_id or (lambda: uuid.uuid4().hex[:12])
        self.export_dir = export_dir or Path.cwd()
        self.target_error = ""
        # Where a walk's one-line notes go (the monitoring step's server trouble): the app
        # sets it to its notifications; until then they are dropped, never printed over the UI.
        self.notice: Callable[[str], None] = lambda line: None
        self._target = target
        self._lock = threading.Lock()
        self._worker: ProbeWorker | None = None
        self._pool: list[Any] = []  # the session's workers: the first is _worker
        self._worker_chosen = not probe_worker
        if target is None:
            try:
                self._target = self.options.open()
            except TargetError as exc:
                self.target_error = str(exc)
        self.worker()  # built (not started) before the app runs: see probeworker

    @property
    def target(self) -> Target | None:
        return self._target

    @property
    def scenario(self) -> Any:
        return self._target.scenario if self._target else None

    @property
    def simulated(self) -> bool:
        """Walks here replay a scenario: recorded as simulated, actions only simulated."""
        return self.scenario is not None or bool(self.options.scenario)

    def new_session_id(self) -> str:
        return self._session_id()

    def describe(self) -> str:
        """One line: what the walks will run against (plain text; host names are escaped by
        the caller)."""
        target = self._target
        if target is None:
            return "no hosts"
        if target.scenario is not None:
            return f"scenario {target.scenario.name} (replay, nothing runs on real hosts)"
        if self.options.inventory:
            return f"inventory {self.options.inventory} over {target.transport.name}"
        return f"hosts over {target.transport.name}"

    def demo_symptom(self) -> str:
        """The symptom a demo starts with: what the simulated user reported."""
        scenario = self.scenario
        return scenario.symptom if (self.demo and scenario is not None) else ""

    def provider(self, cancel: threading.Event) -> Any:
        """A probe provider for one walk, with its own cancel event: over SSH the session's
        probe worker process, else a FleetProvider. The worker starts with the walk's first
        step, on the walk's thread: it inherits that thread's lower CPU priority
        (``walk_driver.yield_to_the_ui``), so even its imports yield to the event loop."""
        target = self._target
        assert target is not None, "no target: walks are refused before this"
        worker = self.worker()
        if worker is None:
            return self.options.provider(target, cancel, say=self.notice)
        if len(self._pool) > 1:  # a big fleet: its hosts sharded over the session's pool
            from assistant.probeworker.shards import ShardedProvider

            sharded = ShardedProvider(self._pool, cancel, worker.provider_args["thresholds"],
                                      worker.provider_args["params"], target.attrs)
            return self.options.monitored(sharded, target, self.notice)
        return self.options.monitored(worker.provider(cancel), target, self.notice)

    def worker(self) -> ProbeWorker | None:
        """The session's probe worker (one process for every walk, so SSH connections are
        reused across walks), or None where probes run in-process (``FleetOptions.worker``)."""
        with self._lock:
            if not self._worker_chosen and self._target is not None:
                self._worker_chosen = True
                self._worker = self.options.worker(self._target)
                if self._worker is not None:  # the pool a big fleet's walks shard over
                    from assistant.probeworker.shards import pool_size

                    self._pool = [self._worker, *(
                        self.options.worker(self._target)
                        for _ in range(pool_size(self.options, len(self._target.hosts)) - 1))]
            return self._worker

    def for_session(self, saved: dict[str, Any]) -> DiagContext:
        """The context to resume a recorded walk in: this one when the walk reached the same
        hosts the same way, else a new one over the hosts it recorded (opens a target: call
        it off the UI thread). The caller closes a new one when the walk is left."""
        recorded = saved.get("target") or {}
        if self._target is not None:
            mine = self.options.record_of(self._target)
            if all(mine.get(k) == recorded.get(k) for k in RECORDED_OPTIONS):
                return self
        options = FleetOptions(concurrency=self.options.concurrency,
                               timeout=self.options.timeout, deadline=self.options.deadline,
                               thresholds=self.options.thresholds).resumed(recorded)
        ctx = DiagContext(options, export_dir=self.export_dir, incidents=self.incidents)
        if ctx.target is None:
            raise TargetError(ctx.target_error)
        return ctx

    def action_runner(self) -> Any:
        """How a confirmed action runs: the CLI's runner over this session's transport (a
        replayed scenario only simulates, and says so)."""
        target = self._target
        assert target is not None, "no target: walks are refused before this"
        worker = self.worker()
        return worker.run_action if worker is not None else action_runner(target)

    def record(self, walk: Any, provider: Any, *, symptom: str,
               on_error: Callable[[Exception], None] | None = None,
               session: str | None = None) -> Recording | None:
        """Record *walk* in the operator's store like ``diag run`` does (target, Slurm job,
        hosts' attributes); None when this session records nothing. Call it off the UI
        thread: a busy store file must not freeze the screen."""
        if not self.recording or self._target is None:
            return None
        return record(walk, self._target, self.options, provider, symptom=symptom,
                      on_error=on_error, session=session)

    def close(self) -> None:
        with self._lock:
            for worker in self._pool or [self._worker]:
                if worker is not None:
                    worker.close()
            if self._target is not None:
                self._target.close()
