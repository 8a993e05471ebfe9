"""The Recorder: a walk listener that writes every finished step to the store as it happens.

One StepFinished is one transaction — the step, its probe runs (with the provider's raw output,
redacted and bounded), its findings, its action and the walk state after it — committed before
the walk goes on, so ``kill -9`` at any moment loses no finished step and ``--resume`` picks up
exactly where the record ends.

A store that stays busy beyond its timeout (or a full disk) must not kill a 3 a.m. walk: the
write is kept in memory, reported through ``on_error``, and retried before the next event and
at ``flush()``; events are written in order, so the record never has holes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import duckdb

from assistant.runbook import events as ev

from . import writes
from .base import Connection, StoreError
from .db import Store, current_operator

Write = Callable[[Connection], Any]


class Recorder:
    """``Recorder(store, session_id, raw=provider.raw)`` — add it to a Walk's listeners (or
    call ``follow(walk)``, which also saves the starting state)."""

    def __init__(self, store: Store, session_id: str, *,
                 raw: Mapping[tuple[str, str], str] | None = None,
                 operator: str | None = None,
                 on_error: Callable[[Exception], None] | None = None) -> None:
        self.store = store
        self.session_id = session_id
        self.raw = raw
        self.operator = operator or current_operator()
        self.on_error = on_error
        self.pending: list[Write] = []  # writes that failed, oldest first

    def follow(self, walk: Any) -> None:
        """Listen to *walk* and save its state now: a walk killed before its first step
        finishes can still be resumed."""
        if self not in walk.listeners:
            walk.listeners.append(self)
        state = walk.to_dict()
        self._submit(lambda con: writes.update_state(con, self.session_id, state))

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.StepFinished):
            raw = dict(self.raw) if self.raw else None  # the provider overwrites it later
            self._submit(lambda con: writes.record_step(
                con, self.session_id, event.index, event.step, event.state, raw,
                self.operator))
        elif isinstance(event, ev.ConclusionReached):
            self._submit(lambda con: writes.record_conclusion(
                con, self.session_id, event.node, event.title, event.cause, event.severity))
        elif isinstance(event, ev.AnswerUndone):
            self._submit(lambda con: writes.record_undo(
                con, self.session_id, event.node, event.choice))
        elif isinstance(event, ev.SampleTaken):  # a soak's round, kept as it is taken
            self._submit(lambda con: writes.record_samples(
                con, self.session_id, event.probe, event.seq, event.ts, event.samples))
        elif isinstance(event, ev.QuestionAsked):
            self._submit(lambda con: writes.set_status(con, self.session_id, "waiting"))

    def flush(self) -> bool:
        """Retry writes that failed; True when nothing is left unwritten."""
        while self.pending:
            try:
                self.store.write(self.pending[0])
            except (StoreError, duckdb.Error, OSError) as exc:
                self._report(exc)
                return False
            self.pending.pop(0)
        return True

    def _submit(self, write: Write) -> None:
        self.pending.append(write)
        self.flush()

    def _report(self, exc: Exception) -> None:
        if self.on_error is not None:
            self.on_error(exc)
