"""The probe worker's side: the process ``ProbeWorker`` spawns (``serve`` is its main).

It opens the target, answers one request at a time on a thread of its own (a probe's fan-out,
parse and checks, with the store's rows prepared here; or a confirmed action), streams the
fan-out's events to the caller in batches, and turns the caller's "cancel" into the fan-out's
cancel event. Kept apart from the caller's side (``assistant.probeworker``) because the two run
in different processes and share only the pipe's messages.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from multiprocessing.connection import Connection
from typing import Any

from assistant.runbook import events as ev

BATCH_S = 0.02  # how often the worker sends the events gathered meanwhile (one pipe write each)
CLOSE_WAIT_S = 2.0  # a closing worker ends its fan-outs, then is terminated if still there
WORKER_NICENESS = 5  # the worker yields the CPU to the front end's event loop


class _Sender:
    """Events from the fan-out's threads, sent in batches; replies after the events before
    them (one lock: a Connection is not safe for concurrent writes)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.pending: list[ev.Event] = []
        threading.Thread(target=self._flusher, name="probeworker-events", daemon=True).start()

    def emit(self, event: ev.Event) -> None:
        with self.lock:
            self.pending.append(event)

    def send(self, message: tuple[Any, ...]) -> None:
        with self.lock:
            self._flush()
            self.conn.send(message)

    def _flush(self) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self.conn.send(("events", batch))

    def _flusher(self) -> None:
        while True:
            time.sleep(BATCH_S)
            try:
                with self.lock:
                    self._flush()
            except (OSError, ValueError):  # the caller went away: the main loop ends too
                return


def serve(conn: Connection, target_args: dict[str, Any],
          provider_args: dict[str, Any]) -> None:
    """The worker's main: open the target, then answer requests until told to close or the
    caller goes away. Top level, so ``spawn`` can import it. The main thread only reads the
    pipe (a "cancel" must be heard while a probe runs); each request runs on its own thread."""
    from assistant.target import TargetError, open_target

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the front end's to handle
    # Its stdout and stderr are the front end's terminal, which a TUI draws on: a stray
    # warning (paramiko logs to stderr without a handler) must not scribble over the screen.
    with contextlib.suppress(OSError):
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
    with contextlib.suppress(OSError):  # at least this nice (it inherits its starter's nice)
        now = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, max(now, WORKER_NICENESS))
    cancel = threading.Event()
    try:
        from assistant.runbook.provider import FleetProvider

        target = open_target(**target_args)
        provider = FleetProvider(target.transport, attrs=target.attrs, cancel=cancel,
                                 **provider_args)
    except TargetError as exc:
        conn.send(("failed", str(exc)))
        return
    except Exception as exc:  # said to the caller, who shows it; not a silent exit status
        conn.send(("failed", f"the probe worker could not start: {type(exc).__name__}: {exc}"))
        return
    sender = _Sender(conn)
    sender.send(("ready", os.getpid()))
    job: threading.Thread | None = None
    sent_keys = [0] * len(target.host_keys)

    def answer(request: tuple[Any, ...]) -> None:
        try:
            reply = _answer(request, target, provider, sender, sent_keys)
        except Exception as exc:  # a bug in a probe: the caller hears it, the worker lives
            reply = ("error", f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(OSError, ValueError):
            sender.send(reply)

    try:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                break
            if request[0] in ("cancel", "close"):
                cancel.set()  # the fan-out ends its hosts "cancelled", killing their commands
                if request[0] == "close":
                    break
                continue
            if job is not None:
                job.join()  # the caller sends one request at a time; this is the last one's
            cancel.clear()
            job = threading.Thread(target=answer, args=(request,), name="probeworker-job")
            job.start()
    finally:
        if job is not None:
            job.join(CLOSE_WAIT_S)
        target.close()


def _answer(request: tuple[Any, ...], target: Any, provider: Any, sender: _Sender,
            sent_keys: list[int]) -> tuple[Any, ...]:
    """One request's reply: a probe's outcome (with its raw outputs and the host keys
    accepted meanwhile), or a confirmed action's per-host results."""
    from assistant.runbook.actions import transport_runner

    if request[0] == "action":  # through the same connections as the probes
        _, command, hosts = request
        return ("done", transport_runner(target.transport)(command, tuple(hosts)))
    if request[0] == "retry":  # a sharded walk's end: its hosts that could not be reached
        return ("done", provider.retry_dead(request[1]))
    from assistant.store.prepared import prepare_outcome

    if request[0] == "sweep":  # the evidence sweep: several outcomes from one round trip
        _, components, hosts, params, provider.hosts_only = request
        outcomes = provider.run_sweep(components, hosts, params, sender.emit)
        raw = provider.raw.packed()  # sent as it is kept: compressed
        prepared = {}
        for one in outcomes:
            prepared.update(prepare_outcome(one, provider.raw))
        provider.raw.clear()
        send_parts(sender, outcomes, raw, prepared)
        return ("done", _keys(target, sent_keys))
    _, name, hosts, params, prior, provider.hosts_only = request
    provider.prior_samples = prior
    outcome = provider.run_probe(name, hosts, params, sender.emit)
    raw = provider.raw.packed(name)
    prepared = prepare_outcome(outcome, provider.raw)  # not on the caller's thread: its UI's GIL
    provider.raw.clear()  # sent: the caller keeps it
    send_parts(sender, [outcome], raw, prepared)
    return ("done", _keys(target, sent_keys))


PART_BYTES = 1024 * 1024  # a reply message's size at most (unless one item is larger)


def send_parts(sender: _Sender, outcomes: list[Any], raw: dict[Any, bytes],
               prepared: dict[Any, Any]) -> None:
    """A reply's outcomes, raw outputs and store rows as many small messages, each item
    pickled on its own (``Reply`` unpickles them one by one). The caller's unpickling holds
    its GIL for as long as one ``loads`` takes: the evidence sweep's whole reply over 1,000
    hosts (16 outcomes, every host's facts, outputs and rows) as one message froze the
    TUI's screen for 2.3 s (``bench/tuimem.py``), and even parts of 32 hosts' NVLink facts
    (144 links a host, 48 counters a link) or 256 store rows took 100-140 ms each; one item
    is a few milliseconds."""
    for index, outcome in enumerate(outcomes):
        sender.send(("outcome", index, outcome.probe))
        for part in _parts(outcome.hosts.items()):
            sender.send(("hosts", index, part))
        for part in _parts(outcome.findings):
            sender.send(("findings", index, part))
        if outcome.unfolded is not None:
            sender.send(("unfolded", index, []))  # judged per host there, even if nothing
            for part in _parts(outcome.unfolded):
                sender.send(("unfolded", index, part))
    for kind, mapping in (("raw", raw), ("prepared", prepared)):
        for part in _parts(mapping.items()):
            sender.send((kind, part))


def _parts(items: Iterable[Any]) -> Iterator[list[bytes]]:
    """Each of *items* pickled, gathered into lists of at most ``PART_BYTES``."""
    part: list[bytes] = []
    size = 0
    for item in items:
        blob = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        if part and size + len(blob) > PART_BYTES:
            yield part
            part, size = [], 0
        part.append(blob)
        size += len(blob)
    if part:
        yield part


def _keys(target: Any, sent_keys: list[int]) -> list[Any]:
    """The host keys each policy accepted since the last reply, and what it refused."""
    keys = []
    for index, policy in enumerate(target.host_keys):
        keys.append((policy.accepted[sent_keys[index]:], dict(policy.refused)))
        sent_keys[index] = len(policy.accepted)
    return keys
