"""Schema 10 (issue 29 item 2): a store written by a diag that kept typed text verbatim — a
token pasted into `incident close --cause`, a tag, the symptom, an answer, an action — is
redacted in place the first time this diag opens it; the rest of the text stays readable."""

from __future__ import annotations

import json
import time
from pathlib import Path

import duckdb
import pytest

from assistant.store import Store
from assistant.store.schema import CURRENT_VERSION
from tests.store.storehelpers import export_as_written, old_store, one, rows

pytestmark = pytest.mark.store

HF = "hf_" + "Qx7" * 12
GH = "ghp_" + "a1B2" * 9
PASSWORD = "hunter2-correct-horse"
SECRETS = (HF, GH, PASSWORD)


def build_v9(path: Path) -> None:
    """A store as diag left it at schema 9, with what a person typed kept verbatim."""
    con = old_store(path, 9)
    con.execute(
        "INSERT INTO incidents (id, title, symptom, job_id, status, opened, root_cause, tags) "
        "VALUES ('inc000000001', ?, ?, ?, 'closed', TIMESTAMP '2026-11-02 03:04', ?, ?)",
        [f"hang after export HF_TOKEN={HF}", f"job hangs; token {GH} in the log",
         f"4471 --password {PASSWORD}",
         f"bad cable on gpu010 mlx5_6, replaced; docker login -p {PASSWORD} nvcr.io",
         ["vendor-rma", f"HF_TOKEN={HF}"]])
    con.execute("INSERT INTO sessions (id, incident_id, runbook, operator, started, updated, "
                "status, hosts_n, walk_state, outcome) VALUES ('ses000000001', 'inc000000001', "
                "'hang', 'ana', TIMESTAMP '2026-11-02 03:04', TIMESTAMP '2026-11-02 03:05', "
                "'concluded', 1, ?, ?)",
                [json.dumps({"current": "done", "answers": {"ask-note": f"token {GH}"}}),
                 f"cause: password={PASSWORD}"])
    con.execute("INSERT INTO steps (session_id, seq, idx, node, kind, answer, started, ended, "
                "record) VALUES ('ses000000001', 0, 0, 'ask-note', 'question', ?, "
                "TIMESTAMP '2026-11-02 03:05', TIMESTAMP '2026-11-02 03:05', ?)",
                [f"HF_TOKEN={HF}", json.dumps({"node": "ask-note", "answer": f"token {GH}",
                                               "note": "kept as it is"})])
    con.execute("INSERT INTO actions (session_id, step_seq, step_index, ts, node, command, "
                "confirmed, result) VALUES ('ses000000001', 0, 0, TIMESTAMP '2026-11-02 03:05', "
                "'drain', ?, true, 'ok')",
                [f"curl -u admin:{PASSWORD} https://bmc/redfish/v1/Systems/1/Actions/Reset"])
    con.close()


def _everything(store: Store) -> str:
    texts = []
    for (table,) in rows(store, "SELECT table_name FROM duckdb_tables()"):
        texts += [str(r) for r in rows(store, f"SELECT * FROM {table}")]
    return "\n".join(texts)


def test_an_older_store_is_redacted_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    build_v9(db)
    with duckdb.connect(str(db), read_only=True) as con:  # the secrets are there before
        assert all(s in str(con.execute("SELECT * FROM incidents").fetchall()) for s in (HF, GH))
    store = Store(db)
    began = time.perf_counter()
    assert store.version() == CURRENT_VERSION >= 10
    print(f"migration to {CURRENT_VERSION}: {time.perf_counter() - began:.3f} s")
    stored = _everything(store)
    assert not [s for s in SECRETS if s in stored]
    # only the secret is replaced: the rest of each text stays readable
    assert one(store, "SELECT root_cause FROM incidents").startswith(
        "bad cable on gpu010 mlx5_6, replaced; docker login -p [REDACTED]")
    assert one(store, "SELECT tags FROM incidents")[0] == "vendor-rma"
    record = json.loads(one(store, "SELECT record FROM steps"))
    assert record["note"] == "kept as it is" and record["node"] == "ask-note"
    assert json.loads(one(store, "SELECT walk_state FROM sessions"))["current"] == "done"
    assert "https://bmc/redfish" in one(store, "SELECT command FROM actions")
    assert rows(store, "SELECT version FROM schema_version WHERE version = 10")


def test_a_clean_store_is_left_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    build_v9(db)
    with duckdb.connect(str(db)) as con:
        con.execute("DELETE FROM incidents")
        con.execute("INSERT INTO incidents (id, title, status, opened) VALUES "
                    "('inc000000002', 'hang on gpu[001-008] (8)', 'open', now()::TIMESTAMP)")
    store = Store(db)
    assert one(store, "SELECT title FROM incidents") == "hang on gpu[001-008] (8)"


def test_an_older_export_is_redacted_when_imported(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from assistant.cli import main

    db = tmp_path / "old.duckdb"
    build_v9(db)
    # the export an older diag wrote of it: its rows as they were, schema 9
    export = export_as_written(db, tmp_path / "shared" / "ana")
    mine = tmp_path / "mine.duckdb"
    assert main(["import", str(export), "--db", str(mine)]) == 0
    capsys.readouterr()
    stored = _everything(Store(mine))
    assert "bad cable on gpu010" in stored and not [s for s in SECRETS if s in stored]


def test_an_older_export_is_redacted_when_pooled(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from assistant.cli import main

    db = tmp_path / "old.duckdb"
    build_v9(db)
    export = export_as_written(db, tmp_path / "shared" / "ana")
    said = []
    for sql in ("SELECT * FROM incidents", "SELECT * FROM sessions", "SELECT * FROM steps",
                "SELECT * FROM actions"):
        assert main(["query", "--from", str(export), "--format", "json", sql]) == 0
        said.append(capsys.readouterr().out)
    assert main(["report", "inc000000001", "--from", str(export)]) == 0
    said.append(capsys.readouterr().out)
    text = "\n".join(said)
    assert "bad cable on gpu010" in text and "https://bmc/redfish" in text
    assert not [s for s in SECRETS if s in text]
    assert json.loads(said[2])[0]["record"]  # a JSON document still reads as one
