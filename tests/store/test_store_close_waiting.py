"""Closing an incident ends its waiting walks (issue 29 item 9): marked closed-while-waiting,
neither open nor timed in time to conclusion, not resumable until the incident is reopened."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.store import Store, StoreError, incidents
from assistant.store.correlate import time_to_conclusion
from tests.store.storehelpers import DRIFT, one, record_walk

pytestmark = pytest.mark.store


def test_closing_ends_the_waiting_walks(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    session, _ = record_walk(store, DRIFT, {})  # stops at ask-change: waiting
    assert one(store, "SELECT status FROM sessions WHERE id = ?", [session]) == "waiting"
    concluded, _ = record_walk(store, DRIFT, {"ask-change": "yes"}, symptom="another")
    incident = one(store, "SELECT incident_id FROM sessions WHERE id = ?", [session])
    store.close_incident(incident, "driver drift on gpu003")
    assert one(store, "SELECT status FROM sessions WHERE id = ?", [session]) == \
        "closed-while-waiting"
    assert one(store, "SELECT ended FROM sessions WHERE id = ?", [session]) is not None
    rows = store.read(lambda con: time_to_conclusion(con, None))
    mini = next(r for r in rows if r["runbook"] == "mini")
    assert mini["closed_waiting"] == 1
    assert mini["concluded"] == mini["sessions"] - 1  # the other one concluded
    ended = one(store, "SELECT epoch(ended - started) FROM sessions WHERE id = ?", [concluded])
    assert mini["mean_s"] == pytest.approx(ended, abs=0.1)  # the closed walk is not timed
    with pytest.raises(StoreError, match=r"closed while it waited.*incident reopen"):
        store.load_session_state(session)
    store.write(lambda con: incidents.reopen(con, incident))
    assert one(store, "SELECT status FROM sessions WHERE id = ?", [session]) == "waiting"
    assert store.load_session_state(session)
