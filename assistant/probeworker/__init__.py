"""A walk's probes in a worker process: fan-out, parsing and checks off the caller's GIL.

Why: in one Python process the fan-out's threads (64 by default) run paramiko's protocol code
and the parsers under the one GIL, and a front end's event loop waits its turn behind them —
the TUI stalled ~200 ms at 64-way over 128 loopback hosts (``bench/tui.py``), so it fanned out
only 16 at a time. Here one long-lived worker process per front-end session owns the SSH
transport (connections are still reused across every step and walk of the session), runs each
probe — fan-out, parse, per-host and fleet checks, soak rounds — and streams the walk events to
the caller in small batches; the caller's ``WorkerProvider`` hands the engine the finished
``ProbeOutcome`` as ``FleetProvider`` would. The caller records (one process opens the store)
but only inserts: each run's rows are prepared here (``store.prepared``) and sent along.

What crosses the pipe is plain data (picklable dataclasses): a request (probe, hosts, params),
batches of events, then the outcome with each host's bounded raw output and the host keys the
worker's known_hosts policy accepted (mirrored into the caller's policy, so the store records
them as in-process). Cancel is a message the worker's reading thread turns into its fan-out's
cancel event, so a cancelled step ends its remote commands exactly as in-process. A worker
that dies mid-step (killed, out of memory) never hangs the caller: the step's unfinished hosts
are told why and ``WorkerDied`` ends the step untaken; the next request starts a new worker.

The ``spawn`` start method: the caller is threaded (a TUI), and forking a threaded process
can copy a held lock into the child.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import pickle
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Any

from assistant.runbook import events as ev
from assistant.runbook.outputs import Outputs
from probes.model import ProbeOutcome

from .serve import CLOSE_WAIT_S, serve

SPAWN = multiprocessing.get_context("spawn")
POLL_S = 0.05  # how often the caller looks at its cancel event while it waits
START_TIMEOUT_S = 120.0  # a worker that has not opened its target by then is not coming


class WorkerError(RuntimeError):
    """The worker could not do what was asked (its target did not open, a probe raised);
    the message is one line for the operator."""


class WorkerDied(WorkerError):
    """The worker process ended during a request; the step is not taken (``r`` retries it
    in a fresh worker). *how*: its pid and exit status or signal."""

    how = ""


def _tracker_running() -> None:
    """Start multiprocessing's resource tracker (``spawn`` needs it) with a real stderr: in a
    running Textual app ``sys.stderr`` is a capture whose ``fileno()`` is -1, which the
    tracker's launch refuses ("bad value(s) in fds_to_keep")."""
    from multiprocessing import resource_tracker

    stderr = sys.stderr
    try:
        usable = stderr is not None and stderr.fileno() >= 0
    except (AttributeError, OSError, ValueError):
        usable = False
    if not usable and sys.__stderr__ is not None:
        sys.stderr = sys.__stderr__
    try:
        resource_tracker.ensure_running()
    finally:
        sys.stderr = stderr


class ProbeWorker:
    """The caller's handle on one worker process: started on first use, one request at a
    time, restarted after a crash. *target_args* are ``open_target``'s keyword arguments,
    *provider_args* ``FleetProvider``'s (thresholds, params, concurrency, timeout, deadline);
    *host_keys* the caller's own known_hosts policies (``Target.host_keys``), which learn the
    keys the worker accepted."""

    # The worker process's main (top level, for ``spawn``): bench/tuimem.py puts one there
    # that opens an in-memory target, to drive the TUI with 10,000 hosts no sshd could serve.
    entry: Callable[[Connection, dict[str, Any], dict[str, Any]], None] = staticmethod(serve)

    def __init__(self, target_args: Mapping[str, Any], provider_args: Mapping[str, Any],
                 host_keys: Sequence[Any] = ()) -> None:
        self.target_args = dict(target_args)
        self.provider_args = dict(provider_args)
        self.host_keys = list(host_keys)
        self.pid: int | None = None  # the running worker's, once it said it is ready
        self._process: Any = None
        self._conn: Connection | None = None
        _tracker_running()
        self._lock = threading.Lock()  # one request at a time
        self._closed = False

    def start(self) -> None:
        """Start the worker now (it opens its target in the background); idempotent."""
        if self._process is not None and self._process.is_alive():
            return
        mine, theirs = SPAWN.Pipe()
        process = SPAWN.Process(target=self.entry, name="diag-probeworker", daemon=True,
                                args=(theirs, self.target_args, self.provider_args))
        process.start()
        theirs.close()
        self._process, self._conn, self.pid = process, mine, None

    def provider(self, cancel: threading.Event | None = None) -> WorkerProvider:
        """A provider for one walk; *cancel* ends its running step early."""
        return WorkerProvider(self, cancel or threading.Event(),
                              self.provider_args.get("thresholds"))

    def run_probe(self, name: str, hosts: Sequence[str], params: Mapping[str, Any],
                  emit: Callable[[ev.Event], None], cancel: threading.Event,
                  prior: Mapping[str, Any] | None = None, hosts_only: bool = False,
                  ) -> tuple[ProbeOutcome, dict[tuple[str, str], bytes], dict[Any, Any]]:
        """Run one probe in the worker: (outcome, raw outputs packed by ``Outputs``, their
        store rows by (probe, host)). Events reach *emit* on the calling thread as the worker
        sends them. *hosts_only*: the worker runs per-host checks only (one shard of a
        sharded walk, whose fleet checks the caller runs over every shard)."""
        finished: set[str] = set()

        def relay(event: ev.Event) -> None:
            if isinstance(event, ev.ProbeFinished):
                finished.add(event.host)
            emit(event)

        try:
            reply = self._request(("probe", name, list(hosts), dict(params), dict(prior or {}),
                                   hosts_only),
                                  relay, cancel)
        except WorkerDied as died:
            for host in hosts:  # each host shows why it has no answer
                if host not in finished:
                    emit(ev.ProbeFinished(name, host, "cancelled", str(died)))
            raise
        self._learn_keys(reply.keys)
        return reply.outcomes[0], reply.raw, reply.prepared

    def run_sweep(self, components: Sequence[str], hosts: Sequence[str],
                  params: Mapping[str, Mapping[str, Any]], emit: Callable[[ev.Event], None],
                  cancel: threading.Event, hosts_only: bool = False,
                  ) -> tuple[list[ProbeOutcome], dict[tuple[str, str], bytes], dict[Any, Any]]:
        """The evidence sweep in the worker: (outcomes, raw outputs packed, store rows)."""
        finished: set[str] = set()

        def relay(event: ev.Event) -> None:
            if isinstance(event, ev.ProbeFinished):
                finished.add(event.host)
            emit(event)

        try:
            reply = self._request(("sweep", list(components), list(hosts),
                                   {k: dict(v) for k, v in params.items()}, hosts_only),
                                  relay, cancel)
        except WorkerDied as died:
            for host in hosts:
                if host not in finished:
                    emit(ev.ProbeFinished("sweep", host, "cancelled", str(died)))
            raise
        self._learn_keys(reply.keys)
        return reply.outcomes, reply.raw, reply.prepared

    def _learn_keys(self, keys: Sequence[Any]) -> None:
        """The host keys the worker's policies accepted, mirrored into the caller's."""
        for policy, (accepted, refused) in zip(self.host_keys, keys, strict=False):
            policy.accepted.extend(accepted)
            policy.refused.update(refused)
            for key in accepted:
                if policy.on_accept is not None:
                    policy.on_accept(key)

    def run_action(self, command: str, hosts: tuple[str, ...]) -> Any:
        """A confirmed action's command on *hosts*, over the worker's connections."""
        return self._request(("action", command, list(hosts)), lambda _e: None,
                             threading.Event()).done[1]

    def retry_dead(self, timeout: float | None = None) -> list[str]:
        """The worker's walk provider tries its unreachable hosts once more; those back."""
        return list(self._request(("retry", timeout), lambda _e: None,
                                  threading.Event()).done[1])

    def close(self, wait: bool = False) -> None:
        """End the worker: its fan-outs are cancelled (their remote commands killed), then
        its connections closed. Returns at once unless *wait*: a UI thread closes it as its
        app exits, and the worker's goodbye takes up to a few seconds in a stuck step (a
        non-daemon thread, so the interpreter still waits for it before exiting)."""
        self._closed = True  # a running request sends the worker "cancel" within POLL_S
        if wait:
            self._shut()
        else:
            threading.Thread(target=self._shut, name="probeworker-close").start()

    def _shut(self) -> None:
        process, conn = self._process, self._conn
        if process is None or conn is None:
            return
        if self._lock.acquire(timeout=CLOSE_WAIT_S):  # else a request is stuck: terminate
            try:
                with contextlib.suppress(OSError, ValueError):
                    conn.send(("close",))
            finally:
                self._lock.release()
        process.join(CLOSE_WAIT_S)
        if process.is_alive():
            process.terminate()
            process.join(CLOSE_WAIT_S)
        with contextlib.suppress(OSError):
            conn.close()

    # --- internals ------------------------------------------------------------------------

    def _request(self, request: tuple[Any, ...], emit: Callable[[ev.Event], None],
                 cancel: threading.Event) -> Reply:
        reply = Reply()
        with self._lock:
            if self._closed:
                raise WorkerError("the probe worker is closed")
            self.start()
            conn = self._conn
            assert conn is not None
            if self.pid is None:
                self._await_ready(conn, cancel)
            try:
                conn.send(request)
            except (OSError, ValueError):
                raise self._died() from None
            cancelling = False
            while True:
                if (cancel.is_set() or self._closed) and not cancelling:
                    cancelling = True  # the worker's fan-out ends its hosts "cancelled"
                    with contextlib.suppress(OSError, ValueError):
                        conn.send(("cancel",))
                message = self._receive(conn)
                if message is None:
                    continue
                if message[0] == "events":
                    for event in message[1]:
                        emit(event)
                elif message[0] == "error":
                    raise WorkerError(f"the probe worker failed: {message[1]}")
                elif message[0] == "done":
                    reply.done = message
                    return reply
                else:
                    reply.add(message)

    def _await_ready(self, conn: Connection, cancel: threading.Event) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            message = self._receive(conn)
            if message is None:
                continue
            if message[0] == "ready":
                self.pid = message[1]
                return
            self._reap()
            raise WorkerError(str(message[1]))  # "failed": its target did not open
        self._process.terminate()
        self._reap()
        raise WorkerError(f"the probe worker did not start in {START_TIMEOUT_S:g} s")

    def _receive(self, conn: Connection) -> tuple[Any, ...] | None:
        """The next message, or None after POLL_S; ``WorkerDied`` when the worker is gone."""
        try:
            if conn.poll(POLL_S):
                return tuple(conn.recv())
        except (EOFError, OSError):
            raise self._died() from None
        if not self._process.is_alive():
            raise self._died()
        return None

    def _died(self) -> WorkerDied:
        process = self._process
        process.join(1.0)
        code = process.exitcode
        how = (f"killed by signal {-code}" if code is not None and code < 0 else
               f"exit status {code}")
        self._reap()
        died = WorkerDied(f"diag's probe worker (pid {process.pid}) stopped ({how}) before "
                          "this step's hosts all answered; the step was not taken: r runs it "
                          "again in a new worker")
        died.how = f"pid {process.pid}, {how}"
        return died

    def _reap(self) -> None:
        """Forget the worker; the next request starts a new one."""
        with contextlib.suppress(OSError):
            if self._conn is not None:
                self._conn.close()
        self._process, self._conn, self.pid = None, None, None


def _shared(result: Any) -> Any:
    """*result* (a HostResult) with its facts' keys and short strings interned: unpickled one
    host at a time, every host's facts held their own copy of the same few hundred names
    (0.93 against 0.78 MB per host resident at 1,000 hosts, bench/walkmem.py --workers 2)."""
    facts = getattr(result, "facts", None)
    if isinstance(facts, dict):
        result.facts = _interned(facts)
    return result


def _interned(value: Any) -> Any:
    if type(value) is dict:
        return {sys.intern(k) if type(k) is str else k: _interned(v) for k, v in value.items()}
    if type(value) is list:
        return [_interned(v) for v in value]
    if type(value) is str and len(value) <= 64:
        return sys.intern(value)
    return value


class Reply:
    """A request's reply as the worker sends it, in parts (``serve.send_parts``): the
    outcomes host by host, the raw outputs and the store rows, then ``done``."""

    def __init__(self) -> None:
        self.outcomes: list[ProbeOutcome] = []
        self.raw: dict[tuple[str, str], bytes] = {}
        self.prepared: dict[Any, Any] = {}
        self.done: tuple[Any, ...] = ()

    @property
    def keys(self) -> Any:
        return self.done[1]

    def add(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "outcome":
            self.outcomes.append(ProbeOutcome(message[2], {}, []))
            return
        items = (pickle.loads(blob) for blob in message[-1])  # one at a time: see send_parts
        if kind == "hosts":
            self.outcomes[message[1]].hosts.update((host, _shared(result))
                                                   for host, result in items)
        elif kind == "findings":
            self.outcomes[message[1]].findings.extend(items)
        elif kind == "unfolded":
            outcome = self.outcomes[message[1]]
            outcome.unfolded = [*(outcome.unfolded or []), *items]
        elif kind == "raw":
            self.raw.update(items)
        elif kind == "prepared":
            self.prepared.update(items)
        # What arrives lives as long as the walk: out of the cyclic collector's reach at
        # once (``gc.freeze`` only moves lists). Otherwise the sweep's 1,000 hosts' facts,
        # arriving, set off full collections over every one of them: a 3 KB item's
        # ``loads`` took 150 ms, and the TUI's screen stood still that long.
        gc.freeze()


class WorkerProvider:
    """The engine's probe provider for one walk, its probes run by a ``ProbeWorker``. Offers
    what callers read of a ``FleetProvider``: ``raw``, ``thresholds``, ``cancel``,
    ``prior_samples``, ``run_probe`` / ``run_probes``."""

    def __init__(self, worker: ProbeWorker, cancel: threading.Event,
                 thresholds: Mapping[str, Any] | None = None) -> None:
        from probes.base import load_thresholds

        self.worker = worker
        self.cancel = cancel
        self.thresholds = dict(thresholds or load_thresholds())
        self.raw = Outputs()
        self.prepared: dict[tuple[str, str], Any] = {}  # store rows; the recorder takes them
        self.prior_samples: dict[str, dict[str, list[dict[str, Any]]]] = {}

    def run_probes(self, probes: Sequence[str], hosts: Sequence[str],
                   params: Mapping[str, Mapping[str, Any]],
                   emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        from assistant.runbook.provider import run_in_order

        return run_in_order(self.run_probe, probes, hosts, params, emit)

    def run_sweep(self, components: Sequence[str], hosts: Sequence[str],
                  params: Mapping[str, Mapping[str, Any]],
                  emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        outcomes, raw, prepared = self.worker.run_sweep(components, hosts, params, emit,
                                                        self.cancel)
        self.raw.add_packed(raw)
        self.prepared.update(prepared)
        return outcomes

    def run_probe(self, name: str, hosts: Sequence[str], params: Mapping[str, Any],
                  emit: Callable[[ev.Event], None]) -> ProbeOutcome:
        prior = {name: self.prior_samples[name]} if name in self.prior_samples else {}
        outcome, raw, prepared = self.worker.run_probe(name, hosts, params, emit, self.cancel,
                                                       prior)
        self.raw.add_packed(raw)
        self.prepared.update(prepared)
        return outcome
