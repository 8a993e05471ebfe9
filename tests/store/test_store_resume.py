"""kill -9 loses no finished step, and the stored state resumes the walk to the same end."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from assistant.runbook.engine import Walk
from assistant.store import Recorder, Store
from tests.store.storehelpers import (
    DRIFT,
    DRIFT_ANSWERS,
    DRIFT_PATH,
    HOSTS,
    RawProvider,
    mini_runbook,
    one,
    record_walk,
    rows,
    worker,
)


def test_killed_mid_walk_then_resumed(tmp_path: Path) -> None:
    db, session_file = tmp_path / "diag.duckdb", tmp_path / "session"
    proc = worker("slow-walk", str(db), str(session_file))
    try:
        # The worker finishes check-gpu and ask-change, then sleeps inside check-versions.
        for expected in ("step 0 check-gpu", "step 1 ask-change"):
            line = proc.stdout.readline().strip() if proc.stdout else ""
            assert line == expected, (line, proc.stderr.read() if proc.stderr else "")
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
    store = Store(db)
    session = session_file.read_text()
    assert rows(store, "SELECT idx, node FROM steps WHERE session_id = ? ORDER BY seq",
                [session]) == [(0, "check-gpu"), (1, "ask-change")]
    assert one(store, "SELECT status FROM sessions WHERE id = ?", [session]) == "running"

    state = store.load_session_state(session)
    assert [s["node"] for s in state["steps"]] == ["check-gpu", "ask-change"]
    assert state["current"] == "check-versions"
    provider = RawProvider(DRIFT)
    walk = Walk.from_dict(state, mini_runbook(), provider,
                          listeners=[Recorder(store, session, raw=provider.raw)])
    assert walk.run() == "concluded"
    assert provider.calls == ["versions"]  # finished steps are not run again

    uninterrupted = Walk(mini_runbook(), HOSTS, sweep=False,
                         provider=RawProvider(DRIFT), answers=DRIFT_ANSWERS)
    uninterrupted.run()
    assert walk.path() == uninterrupted.path() == DRIFT_PATH
    assert rows(store, "SELECT idx, node, undone FROM steps WHERE session_id = ? ORDER BY seq",
                [session]) == [(i, n, False) for i, n in enumerate(DRIFT_PATH)]
    assert rows(store, "SELECT status, conclusion FROM sessions WHERE id = ?",
                [session]) == [("concluded", "drift")]


def test_kill_at_any_moment_loses_no_committed_step(tmp_path: Path) -> None:
    """A worker records walks as fast as it can and says after each step "committed";
    it is killed at an arbitrary moment: every step it announced must be in the file, and
    every session's stored state must match its step rows exactly."""
    db = tmp_path / "diag.duckdb"
    for stop_after in (3, 11, 18):
        proc = worker("burst", str(db), "50", f"k{stop_after}")
        announced: list[str] = []
        try:
            while len(announced) < stop_after:
                line = proc.stdout.readline() if proc.stdout else ""
                assert line, proc.stderr.read() if proc.stderr else "worker died"
                if line.startswith("committed"):
                    announced.append(line)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        store = Store(db)
        tag = f"k{stop_after} walk %"
        recorded = one(store, "SELECT count(*) FROM steps s JOIN sessions x ON x.id = "
                              "s.session_id JOIN incidents i ON i.id = x.incident_id "
                              "WHERE i.symptom LIKE ?", [tag])
        assert recorded >= stop_after
        for session, steps, records in rows(store, """
                SELECT s.id, (SELECT count(*) FROM steps t
                              WHERE t.session_id = s.id AND NOT t.undone),
                       (SELECT count(record) FROM steps t
                        WHERE t.session_id = s.id AND NOT t.undone)
                FROM sessions s JOIN incidents i ON i.id = s.incident_id
                WHERE i.symptom LIKE ?""", [tag]):
            state = store.load_session(session)["state"]
            stored = state["steps"] if state else []
            assert len(stored) == steps == records, session
            # The saved head says where the walk went after its last stored step.
            assert not stored or state["current"] == stored[-1]["goto"], session


def test_resume_after_a_question_continues_the_same_session(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    session, walk = record_walk(store, DRIFT, {})
    assert walk.status == "waiting"
    state = store.load_session_state(session)
    resumed = Walk.from_dict(state, mini_runbook(), RawProvider(DRIFT),
                             listeners=[Recorder(store, session)])
    assert resumed.run() == "waiting" and resumed.current == "ask-change"
    resumed.answer("ask-change", "yes")
    resumed.run()
    assert resumed.path() == DRIFT_PATH
    assert [r[0] for r in rows(store, "SELECT node FROM steps ORDER BY seq")] == DRIFT_PATH
    assert one(store, "SELECT count(*) FROM sessions") == 1
