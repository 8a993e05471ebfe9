"""The Recorder: a walk listener that writes every finished step to the store as it happens.

One StepFinished is one transaction — the step, its probe runs (with the provider's raw output,
redacted and bounded), its findings, its action and where the walk is after it — committed before
the walk goes on, so ``kill -9`` at any moment loses no finished step and ``--resume`` picks up
exactly where the record ends.

A store that cannot take a write — locked beyond its busy timeout by a long query, on a full
disk, corrupt — must not stop a 3 a.m. walk, nor slow it by a busy timeout per step. The
first refused write is reported once through ``on_error`` and from then on every write of
this walk goes, in order, to the walk's journal beside the store (``journal``); ``flush()``
at the end of the walk imports the journal, and ``diag store recover`` does it later if the
store is still refusing. Writes are kept as data (``journal.apply`` does them), so the same
entry can go to the store or to the journal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import duckdb

from assistant.runbook import events as ev

from . import journal

if TYPE_CHECKING:
    from assistant.runbook.engine import Walk
from .base import Connection, StoreError
from .db import Store, current_operator
from .prepared import PreparedRun


class Recorder:
    """``Recorder(store, session_id, raw=provider.raw)`` — add it to a Walk's listeners (or
    call ``follow(walk)``, which also saves the starting state). *prepared*: the provider's
    ``prepared`` rows, when its probes run in the probe worker (taken with each step).

    *journalled* True starts in the journal (the store refused even to open the session:
    ``walks.record`` then journals the session's start first).
    """

    def __init__(self, store: Store, session_id: str, *,
                 raw: Mapping[tuple[str, str], str] | None = None,
                 prepared: MutableMapping[tuple[str, str], PreparedRun] | None = None,
                 operator: str | None = None,
                 on_error: Callable[[Exception], None] | None = None,
                 journalled: bool = False) -> None:
        self.store = store
        self.session_id = session_id
        self.raw = raw
        self.prepared = prepared
        self.operator = operator or current_operator()
        self.on_error = on_error
        self.journal = journal.Journal(store.path, session_id)
        self.journalled = journalled
        self.lost: list[journal.Entry] = []  # neither the store nor the journal took these
        # (probe, host) -> the counters of its last sample recorded: a round stores what changed
        self.last_counters: dict[tuple[str, str], dict[str, Any]] = {}

    def follow(self, walk: Walk) -> None:
        """Listen to *walk* and save its state now: a walk killed before its first step
        finishes can still be resumed."""
        if self not in walk.listeners:
            walk.listeners.append(self)
        self.submit({"op": "state", "state": walk.to_dict()})

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.StepFinished):
            # Only this step's outputs, and the state without its steps (each step is written
            # once, with its own row): an entry costs the step, not the walk so far.
            outputs = self.raw or {}
            raw = StepOutputs(outputs, [(probe, host)
                                        for outcome in event.step.get("outcomes") or []
                                        for probe in (outcome["probe"],)
                                        for host in outcome.get("hosts") or {}
                                        if (probe, host) in outputs])
            head = {key: value for key, value in event.state.items() if key != "steps"}
            entry = {"op": "step", "index": event.index, "step": event.step, "state": head,
                     "raw": raw, "operator": self.operator}
            if self.prepared:
                # The rows the probe worker prepared for this step's runs (the journal keeps
                # the raw outputs instead); a later step's runs bring their own.
                entry["prepared"] = dict(self.prepared)
                self.prepared.clear()
            self.submit(entry)
        elif isinstance(event, ev.ConclusionReached):
            self.submit({"op": "conclusion", "node": event.node, "title": event.title,
                         "cause": event.cause, "severity": event.severity})
        elif isinstance(event, ev.AnswerUndone):
            self.submit({"op": "undo", "node": event.node, "choice": event.choice})
        elif isinstance(event, ev.SampleTaken):  # a soak's round, kept as it is taken
            self.submit({"op": "samples", "probe": event.probe, "seq": event.seq,
                         "ts": event.ts, "samples": self._changed(event.probe, event.samples)})
        elif isinstance(event, ev.QuestionAsked):
            self.submit({"op": "status", "status": "waiting"})

    def _changed(self, probe: str, samples: Mapping[str, Mapping[str, Any]],
                 ) -> dict[str, dict[str, Any]]:
        """Each host's sample with only the counters that changed since its previous sample
        in this recording (None: a counter no longer read); the first has them all. A watch
        of 8 nodes with 8 HCAs each stored ~17 KB of the same numbers every round; this is
        what changed (a few bytes: TCP retransmits). ``writes.session_samples`` puts the
        rounds back together (a rise is still seen row to row: a counter that rose is there)."""
        out: dict[str, dict[str, Any]] = {}
        for host, sample in samples.items():
            counters = sample.get("counters")
            if isinstance(counters, dict):
                last = self.last_counters.get((probe, host))
                self.last_counters[(probe, host)] = dict(counters)
                if last is not None:
                    gone = {name: None for name in last if name not in counters}
                    counters = {**{name: value for name, value in counters.items()
                                   if name not in last or last[name] != value}, **gone}
            out[host] = {**sample, "counters": counters}
        return out

    def submit(self, entry: journal.Entry) -> None:
        """Write *entry* to the store, or — once the store has refused one — to the journal."""
        if not self.journalled:
            try:
                self.store.write(self._writer(entry))
                return
            except (StoreError, duckdb.Error, OSError) as exc:
                self.journalled = True
                self._report(StoreError(f"{unwritable_reason(exc)}; this walk's steps are kept in "
                                        f"{self.journal.path} and imported when the store can "
                                        "take them (`diag store recover`)"))
        try:
            self.journal.append(entry)
        except OSError as exc:
            self.lost.append(entry)
            if len(self.lost) == 1:
                self._report(StoreError(f"the journal {self.journal.path} cannot be written "
                                        f"either ({exc.strerror or exc}); steps are kept in "
                                        "memory only"))

    def flush(self) -> bool:
        """At the end of a walk: import the journal (and what only memory holds) into the
        store; True when every write of this walk is in the store."""
        if self.lost:  # the journal failed too: try the store directly, in order
            while self.lost:
                try:
                    self.store.write(self._writer(self.lost[0]))
                except (StoreError, duckdb.Error, OSError):
                    return False
                self.lost.pop(0)
        if not self.journalled:
            return True
        if not self.journal.exists():
            self.journalled = False
            return True
        result = journal.import_journal(self.store.write, self.journal.path, self.store.path)
        if result.error is not None:
            return False
        self.journalled = False
        return True

    def _writer(self, entry: journal.Entry) -> Callable[[Connection], Any]:
        return lambda con: journal.apply(con, self.session_id, entry, self.store.path)

    def _report(self, exc: Exception) -> None:
        if self.on_error is not None:
            self.on_error(exc)


class StepOutputs(Mapping[tuple[str, str], str]):
    """One step's raw outputs, each read from the walk's ``Outputs`` (which keeps them
    compressed) only when asked for. The step's entry used to carry every output as text:
    the evidence sweep over 1,000 hosts, 270 MB decompressed at once before the first row
    was written (``bench/walkmem.py --record``); the store now takes them one at a time, and
    not at all for the runs the probe worker prepared."""

    def __init__(self, outputs: Mapping[tuple[str, str], str],
                 keys: list[tuple[str, str]]) -> None:
        self._outputs = outputs
        self._keys = keys

    def __getitem__(self, key: tuple[str, str]) -> str:
        if key not in self._outputs:
            raise KeyError(key)
        return self._outputs[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def unwritable_reason(exc: BaseException) -> str:
    """Why the store refused, in the operator's terms: a full disk is not a lock."""
    from .base import StoreBusyError, StoreFullError, disk_full

    if isinstance(exc, StoreFullError) or disk_full(exc):
        return f"the store cannot be written: its disk is full ({exc})"
    if isinstance(exc, StoreBusyError):
        return f"the store is held by another process ({exc})"
    return f"the store cannot be written ({exc})"
