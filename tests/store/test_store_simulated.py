"""Simulated runs stay out of real history (docs/store.md): a replayed scenario is recorded
marked ``simulated`` and left out of history, correlate and the report unless
``--include-simulated``; a store written before the mark gets it from the target it recorded."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from assistant.cli import main
from assistant.store import Store
from tests.store.storehelpers import one, rows
from tests.store.test_store_schema import build_v1


def history_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["history", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_scenario_run_is_not_in_history_unless_asked(capsys: pytest.CaptureFixture[str],
                                                       ) -> None:
    # Before: README's first commands wrote simulated incidents into the operator's history.
    assert main(["run", "hang", "--scenario", "demo", "--auto"]) == 1
    assert main(["run", "crash", "--scenario", "crash-xid48-dbe", "--auto"]) == 1
    capsys.readouterr()
    assert history_json([], capsys)["counts"]["incidents"] == 0
    shown = history_json(["--include-simulated"], capsys)
    assert shown["counts"]["incidents"] == 2
    assert all(i["simulated"] for i in shown["incidents"])
    assert main(["history"]) == 0
    assert "0 incident(s)" in capsys.readouterr().out
    # The demo's gpu013 is never a host's history either.
    assert history_json(["--host", "gpu013"], capsys)["counts"]["incidents"] == 0


def test_report_latest_and_similar_leave_simulated_out(capsys: pytest.CaptureFixture[str],
                                                       ) -> None:
    assert main(["run", "hang", "--scenario", "demo", "--auto"]) == 1
    capsys.readouterr()
    assert main(["report", "latest"]) == 2
    assert "simulated ones are left out" in capsys.readouterr().err
    assert main(["report", "latest", "--include-simulated"]) == 0
    assert "Simulated: a replayed scenario" in capsys.readouterr().out


def test_correlate_leaves_simulated_sessions_out(capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(3):
        assert main(["run", "hang", "--scenario", "demo", "--auto"]) == 1
    capsys.readouterr()
    assert main(["correlate", "--json", "--since", "all"]) == 0
    real = json.loads(capsys.readouterr().out)
    assert real["time_to_conclusion"] == []
    assert main(["correlate", "--json", "--since", "all", "--include-simulated"]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert [r["sessions"] for r in everything["time_to_conclusion"]] == [3]


def test_a_real_run_is_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --hosts over the local transport is a real target: recorded, not simulated.
    assert main(["probe", "versions", "--hosts", "localhost", "--transport", "local"]) in (0, 1)
    store = Store()
    assert not store.exists()  # `probe` records nothing; a run does
    capsys.readouterr()
    code = main(["run", "launch-failure", "--hosts", "localhost", "--transport", "local",
                 "--auto"])
    assert code in (0, 1, 3, 4)
    capsys.readouterr()
    assert one(store, "SELECT bool_or(simulated) FROM sessions") is False
    assert history_json([], capsys)["counts"]["incidents"] == 1


def test_an_older_store_marks_its_scenario_runs_on_upgrade(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    build_v1(db)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO incidents (id, title, status, opened) VALUES "
                "('inc000000002', 'demo', 'open', TIMESTAMP '2025-01-03 03:04')")
    con.execute("INSERT INTO sessions (id, incident_id, runbook, operator, started, updated, "
                "status, hosts_n, target) VALUES ('ses000000002', 'inc000000002', 'hang', "
                "'bob', TIMESTAMP '2025-01-03 03:04', TIMESTAMP '2025-01-03 03:05', "
                "'concluded', 16, '{\"scenario\": \"demo\", \"hosts\": null}')")
    con.close()
    store = Store(db)
    assert rows(store, "SELECT id, simulated FROM sessions ORDER BY id") == [
        ("ses000000001", False), ("ses000000002", True)]
    assert rows(store, "SELECT id, simulated FROM incidents ORDER BY id") == [
        ("inc000000001", False), ("inc000000002", True)]
