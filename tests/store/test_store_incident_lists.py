"""Incident lists a post-mortem author can read (issue 29 items 7, 8): `history` and
`incident list` name the operators and the accused hosts before the cause, the report's
timeline names who took each step, and `incident list/show` read a pool with --from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.store import Store
from tests.store.storehelpers import XID, record_walk

pytestmark = pytest.mark.store


def test_lists_name_operators_and_the_accused(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "ana")
    store = Store(tmp_path / "diag.duckdb")
    record_walk(store, XID, {}, symptom="the job hangs")
    shared = tmp_path / "shared" / "ana"
    assert main(["export", "--parquet", str(shared), "--db", str(store.path)]) == 0
    capsys.readouterr()
    for where in (["--db", str(store.path)], ["--from", str(shared)]):
        assert main(["incident", "list", *where]) == 0
        out = capsys.readouterr().out
        assert "OPERATOR" in out and " ana " in out and "gpu002: " in out, out
        assert main(["incident", "list", "--json", *where]) == 0
        row = json.loads(capsys.readouterr().out)["incidents"][0]
        assert row["operators"] == ["ana"] and row["accused"] == ["gpu002"]
        assert main(["incident", "show", "latest", *where]) == 0
        assert "ana" in capsys.readouterr().out
    assert main(["history", "--db", str(store.path)]) == 0
    out = capsys.readouterr().out
    assert "OPERATOR" in out and "gpu002: " in out
    assert main(["report", "latest", "--db", str(store.path)]) == 0
    report = capsys.readouterr().out
    timeline = report.split("## Timeline", 1)[1].split("##", 1)[0]
    assert "| operator |" in timeline and "| ana |" in timeline
    # the commands that change incidents still refuse a pool
    with pytest.raises(SystemExit):
        main(["incident", "close", "latest", "--from", str(shared)])
    capsys.readouterr()


def test_a_title_made_of_runbook_and_hosts_names_the_culprit(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    session, walk = record_walk(store, XID, {}, symptom="")
    title = store.read(lambda con: con.execute(
        "SELECT i.title FROM incidents i JOIN sessions s ON s.incident_id = i.id "
        "WHERE s.id = ?", [session]).fetchone()[0])
    assert title.startswith("gpu002: "), title
    assert walk.status == "concluded" and len(title) > len("gpu002: ")
    # a symptom someone typed stays the title
    typed, _ = record_walk(store, XID, {}, symptom="job 4471 hangs at step 1580")
    assert store.read(lambda con: con.execute(
        "SELECT i.title FROM incidents i JOIN sessions s ON s.incident_id = i.id "
        "WHERE s.id = ?", [typed]).fetchone()[0]) == "job 4471 hangs at step 1580"
