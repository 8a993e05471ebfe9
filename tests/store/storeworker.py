"""A separate process for the store tests: diag writing while the test kills or races it.

    python -m tests.store.storeworker slow-walk DB SESSION_FILE   walk mini, sleep in the
                                                                  second probe step
    python -m tests.store.storeworker burst DB N TAG [START]      N recorded walks, printing
                                                                  each committed step
    python -m tests.store.storeworker hold DB SECONDS             hold a write connection
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from assistant.runbook import events as ev
from assistant.store import Store
from tests.store.storehelpers import (
    DRIFT,
    DRIFT_ANSWERS,
    XID,
    SlowProvider,
    record_walk,
)


def slow_walk(db: str, session_file: str) -> None:
    store = Store(db)
    provider = SlowProvider(DRIFT, slow_probe="versions", seconds=600)

    def announce(event: ev.Event) -> None:
        if isinstance(event, ev.StepFinished):
            print(f"step {event.index} {event.node}", flush=True)

    # The session id is written before the walk starts so the parent knows what to check.
    original = store.open_session

    def open_and_tell(*args: object, **kwargs: object) -> str:
        session = original(*args, **kwargs)  # type: ignore[arg-type]
        Path(session_file).write_text(session)
        return session

    store.open_session = open_and_tell  # type: ignore[method-assign]
    record_walk(store, DRIFT, DRIFT_ANSWERS, listeners=[announce], provider=provider)


def burst(db: str, count: int, tag: str, start: float | None) -> None:
    store = Store(db, busy_timeout=30.0)
    if start is not None:  # both workers begin at the same moment
        time.sleep(max(0.0, start - time.time()))

    def announce(event: ev.Event) -> None:
        # Listeners run in order: the Recorder before this one, so the step is committed.
        if isinstance(event, ev.StepFinished):
            print(f"committed {tag} {event.index}", flush=True)

    for i in range(count):
        recorded, answers = (XID, {}) if i % 2 else (DRIFT, DRIFT_ANSWERS)
        session, walk = record_walk(store, recorded, answers, listeners=[announce],
                                    symptom=f"{tag} walk {i}")
        print(f"done {tag} {session} {len(walk.steps)}", flush=True)


def hold(db: str, seconds: float) -> None:
    store = Store(db)

    def keep(con: object) -> None:
        print("holding", flush=True)
        time.sleep(seconds)

    store.write(keep)


if __name__ == "__main__":
    mode, db = sys.argv[1], sys.argv[2]
    if mode == "slow-walk":
        slow_walk(db, sys.argv[3])
    elif mode == "burst":
        burst(db, int(sys.argv[3]), sys.argv[4],
              float(sys.argv[5]) if len(sys.argv) > 5 else None)
    elif mode == "hold":
        hold(db, float(sys.argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode}")
