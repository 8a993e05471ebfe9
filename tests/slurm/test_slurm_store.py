"""A job's findings are linked to its id in the store: `diag history --job ID` finds them.

The walk is the queue-idle scenario replayed (no Slurm needed); the session is opened with the
job id and context exactly as ``diag run --job`` does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.runbook.engine import Walk
from assistant.runbook.library import get_runbook
from assistant.runbook.provider import FleetProvider
from assistant.store import Recorder, Store
from assistant.target import open_target

CONTEXT = {"slurm_job": {"id": "81234", "state": "PENDING", "partition": "h100",
                         "start_time": None, "gres": "gres:gpu:8", "nodelist": None}}


def record(store: Store, job: str | None) -> str:
    target = open_target(scenario="queue-idle-drained-healthcheck")
    provider = FleetProvider(target.transport, attrs=target.attrs, params=target.params)
    walk = Walk(get_runbook("queue-idle"), target.hosts, provider,
                answers={"ask-drain-reason": "health-check"})
    session = store.open_session("queue-idle", target.hosts, target.attrs, job=job,
                                 target={"job": job, **(CONTEXT if job else {})})
    recorder = Recorder(store, session, raw=provider.raw)
    recorder.follow(walk)
    walk.run()
    assert recorder.flush() and walk.status == "concluded"
    target.close()
    return session


@pytest.fixture()
def db(tmp_path: Path) -> str:
    store = Store(tmp_path / "diag.duckdb")
    record(store, "81234")
    record(store, None)
    record(store, "81300")
    return str(store.path)


def history(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["history", *argv])
    return code, capsys.readouterr().out


def test_history_by_job(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = history(capsys, "--job", "81234", "--db", db, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["counts"]["incidents"] == 1 and doc["filters"]["job"] == "81234"
    assert doc["incidents"][0]["job_id"] == "81234"
    assert {f["code"] for f in doc["findings"]} >= {"nodes-drained", "priority-wait"}
    code, out = history(capsys, "--job", "1", "--db", db, "--json")
    assert json.loads(out)["counts"]["incidents"] == 0
    code, out = history(capsys, "--db", db, "--json")
    assert json.loads(out)["counts"]["incidents"] == 3


def test_history_text_names_the_job(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = history(capsys, "--db", db)
    header = next(line for line in out.splitlines() if line.startswith("INCIDENT"))
    assert "JOB" in header.split()
    assert "81234" in out and "81300" in out
    _, out = history(capsys, "--job", "81300", "--db", db)
    assert out.startswith("1 incident(s)") and "job 81300" in out.splitlines()[0]


def test_the_job_context_is_kept_with_the_session(db: str) -> None:
    store = Store(db)
    rows = store.read(lambda con: con.execute(
        "SELECT i.job_id, s.target FROM sessions s JOIN incidents i ON i.id = s.incident_id "
        "WHERE i.job_id = '81234'").fetchall())
    assert len(rows) == 1
    assert json.loads(rows[0][1])["slurm_job"]["gres"] == "gres:gpu:8"
    linked = store.read(lambda con: con.execute(
        "SELECT count(*) FROM findings f JOIN sessions s ON s.id = f.session_id "
        "JOIN incidents i ON i.id = s.incident_id WHERE i.job_id = '81234'").fetchone())
    assert linked is not None and linked[0] >= 2
