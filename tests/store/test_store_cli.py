"""The store's commands: history, correlate, query (read-only), report, export."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from assistant.cli import build_parser
from assistant.store import Store
from assistant.store.schema import DERIVED, TABLES
from bench import synth
from tests.store.storehelpers import DRIFT, DRIFT_ANSWERS, ROOT, XID, record_walk


def parser() -> argparse.ArgumentParser:
    return build_parser()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    args = parser().parse_args(list(argv))
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two incidents that reached the same conclusion, and one hardware incident."""
    store = Store(tmp_path_factory.mktemp("template") / "diag.duckdb")
    record_walk(store, DRIFT, DRIFT_ANSWERS, symptom="first hang of job 1")
    record_walk(store, XID, {}, symptom="gpu002 fell over")
    record_walk(store, DRIFT, DRIFT_ANSWERS, symptom="second hang of job 1")
    return store.path


@pytest.fixture
def db(template: Path, tmp_path: Path) -> str:
    """A private copy of the template store (closed, so the file is complete)."""
    copy = tmp_path / "diag.duckdb"
    shutil.copy(template, copy)
    return str(copy)


def test_every_command_and_option_has_help() -> None:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    store_commands = {"history", "correlate", "query", "report", "export"}
    assert store_commands <= set(sub.choices)
    helped = {a.dest for a in sub._choices_actions if a.help}
    assert helped == set(sub.choices)
    for name, command in sub.choices.items():
        if name not in store_commands:
            continue
        assert command.description, name
        for action in command._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"{name} {action.dest}"
        assert any("--db" in a.option_strings for a in command._actions), name


def test_building_the_parser_loads_no_heavy_module() -> None:
    code = ("import sys; from assistant.cli import build_parser; build_parser(); "
            "print('duckdb' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_history(capsys: pytest.CaptureFixture[str], db: str) -> None:
    code, out, _ = run(capsys, "history", "--db", db)
    assert code == 0
    assert out.splitlines()[0].startswith("3 incident(s), 3 session(s), 3 finding(s)")
    assert "INCIDENT" in out and "version-drift" in out and "xid-drain" in out
    code, out, _ = run(capsys, "history", "--db", db, "--host", "gpu002", "--json")
    data = json.loads(out)
    assert data["counts"]["incidents"] == 3 and data["host"]["leaf"] == "leaf-01"
    assert [f["code"] for f in data["findings"]] == ["xid-drain"]
    code, out, _ = run(capsys, "history", "--db", db, "--code", "version-drift", "--json")
    assert json.loads(out)["counts"]["incidents"] == 2
    assert run(capsys, "history", "--db", db, "--since", "soon")[0] == 2


def test_history_without_a_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "history", "--db", str(tmp_path / "none.duckdb"))
    assert code == 0 and out == "" and "no incident store at" in err
    assert not (tmp_path / "none.duckdb").exists()


def test_correlate_text_and_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    store.write(lambda con: synth.generate(con, hosts=2000, findings=40_000, threads=1))
    code, out, _ = run(capsys, "correlate", "--db", str(store.path), "--since", "all")
    assert code == 0
    assert "leaf leaf-07" in out and "nccl_version 2.18.3" in out and "Time to conclusion" in out
    code, out, _ = run(capsys, "correlate", "--db", str(store.path), "--json")
    data = json.loads(out)
    assert set(data) >= {"recurring_hosts", "placement", "versions", "xid_repeat",
                         "time_to_conclusion"}


def test_query_formats(capsys: pytest.CaptureFixture[str], db: str) -> None:
    sql = "SELECT code, count(*) AS n FROM findings GROUP BY code ORDER BY code"
    code, out, _ = run(capsys, "query", "--db", db, sql)
    assert code == 0 and out.splitlines()[0].split() == ["CODE", "N"]
    assert "(2 rows)" in out
    code, out, _ = run(capsys, "query", "--db", db, "--format", "csv", sql)
    assert out.splitlines() == ["code,n", "version-drift,2", "xid-drain,1"]
    code, out, _ = run(capsys, "query", "--db", db, "--format", "json", sql)
    assert json.loads(out) == [{"code": "version-drift", "n": 2}, {"code": "xid-drain", "n": 1}]


@pytest.mark.parametrize("sql", ["DELETE FROM findings", "DROP TABLE steps",
                                 "UPDATE incidents SET status = 'closed'",
                                 "CREATE TABLE mine (x INTEGER)",
                                 "INSERT INTO hosts (session_id, host, ts) VALUES ('a','b',now())"])
def test_query_refuses_writes(capsys: pytest.CaptureFixture[str], db: str, sql: str) -> None:
    code, out, err = run(capsys, "query", "--db", db, sql)
    assert code == 2 and out == ""
    assert err.startswith("diag: query is read-only") and "Traceback" not in err
    assert Store(db).read(lambda con: con.execute("SELECT count(*) FROM findings").fetchone())\
        == (3,)


def test_query_errors_are_one_line(capsys: pytest.CaptureFixture[str], db: str) -> None:
    code, _, err = run(capsys, "query", "--db", db, "SELEKT 1")
    assert code == 2 and err.startswith("diag: query failed:") and err.count("\n") == 1
    code, _, err = run(capsys, "query", "--db", db)
    assert code == 2 and "--schema" in err


def test_query_refusal_in_a_real_process(db: str) -> None:
    out = subprocess.run([sys.executable, "-m", "assistant.cli",
                          "query", "--db", db, "DELETE FROM steps"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "read-only" in out.stderr and "Traceback" not in out.stderr


def test_query_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "query", "--schema")
    assert code == 0
    for table in TABLES:
        assert f"\n{table} — " in out or out.startswith(f"{table} — ")
    assert "walk_state" in out and "JSON" in out and "INTEGER[]" in out
    code, out, _ = run(capsys, "query", "--schema", "--format", "json")
    tables = json.loads(out)["tables"]
    assert all(c["meaning"] for t in tables.values() for c in t["columns"])


def test_report(capsys: pytest.CaptureFixture[str], db: str) -> None:
    store = Store(db)
    latest = store.read(lambda con: con.execute(
        "SELECT id FROM incidents WHERE symptom LIKE 'second%'").fetchone())[0]
    code, out, _ = run(capsys, "report", "--db", db, latest[:6])
    assert code == 0
    for section in ("# Incident", "## Timeline", "## Hosts involved", "## Evidence",
                    "## Conclusion", "## Actions", "## Similar past incidents"):
        assert section in out, section
    assert "check-versions (probe)" in out and "gpu003" in out and "mini/drift" in out
    code, out, _ = run(capsys, "report", "--db", db, latest, "--format", "json")
    report: dict[str, Any] = json.loads(out)
    assert [s["node"] for s in report["timeline"]] == ["check-gpu", "ask-change",
                                                      "check-versions", "drift"]
    assert [h["host"] for h in report["hosts"]["involved"]] == ["gpu003"]
    assert report["conclusions"][0]["node"] == "drift"
    similar = report["similar"]
    assert len(similar) == 1 and "same conclusion" in similar[0]["reasons"][0]
    assert "version-drift" in similar[0]["reasons"][1]
    code, _, err = run(capsys, "report", "--db", db, "ffffffffffff")
    assert code == 2 and "no incident 'ffffffffffff'" in err


def test_report_actions(capsys: pytest.CaptureFixture[str], db: str) -> None:
    code, out, _ = run(capsys, "report", "--db", db, "latest")
    assert code == 0
    xid = Store(db).read(lambda con: con.execute(
        "SELECT id FROM incidents WHERE symptom LIKE 'gpu002%'").fetchone())[0]
    code, out, _ = run(capsys, "report", "--db", db, xid)
    assert "scontrol update NodeName=$HOST" in out and "not confirmed" in out


def test_export_parquet(capsys: pytest.CaptureFixture[str], db: str, tmp_path: Path) -> None:
    out_dir = tmp_path / "export"
    code, out, _ = run(capsys, "export", "--db", db, "--parquet", str(out_dir))
    assert code == 0 and len(out.splitlines()) == len(TABLES) + len(DERIVED) + 1  # + export.json
    con = duckdb.connect()
    for table in (*TABLES, *DERIVED):
        path = out_dir / f"{table}.parquet"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        exported = con.execute(f"SELECT count(*) FROM read_parquet('{path}')").fetchone()
        stored = Store(db).read(lambda c, t=table: c.execute(
            f"SELECT count(*) FROM {t}").fetchone())
        assert exported == stored, table
    # Pooling: two exports read as one history.
    again = tmp_path / "export2"
    run(capsys, "export", "--db", db, "--parquet", str(again))
    pooled = con.execute(f"SELECT count(DISTINCT id), count(*) FROM read_parquet("
                         f"['{out_dir}/incidents.parquet', '{again}/incidents.parquet'])"
                         ).fetchone()
    assert pooled == (3, 6)
