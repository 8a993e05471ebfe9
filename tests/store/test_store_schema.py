"""The file knows its schema version: an older file is upgraded in place with its data, a
newer one (or a stranger's DuckDB file) is refused, and every column is documented."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from assistant.store import Store, StoreError, StoreMissingError, StoreVersionError
from assistant.store.locations import default_db_path, resolve_db_path
from assistant.store.raw import raw_outputs
from assistant.store.schema import CURRENT_VERSION, MIGRATIONS, V1_STATEMENTS
from assistant.store.schema_doc import SCHEMA_DOC
from tests.store.storehelpers import XID, one, record_walk, rows


def build_v1(path: Path) -> None:
    """A store as the first version of diag left it, with one incident's worth of rows."""
    con = duckdb.connect(str(path))
    for statement in V1_STATEMENTS:
        con.execute(statement)
    con.execute("INSERT INTO schema_version VALUES (1, now()::TIMESTAMP, 'v1')")
    con.execute("INSERT INTO incidents (id, title, status, opened) "
                "VALUES ('inc000000001', 'old hang', 'open', TIMESTAMP '2025-01-02 03:04')")
    con.execute("INSERT INTO sessions (id, incident_id, runbook, operator, started, updated, "
                "status, hosts_n) VALUES ('ses000000001', 'inc000000001', 'hang', 'bob', "
                "TIMESTAMP '2025-01-02 03:04', TIMESTAMP '2025-01-02 03:05', 'running', 2)")
    con.execute("INSERT INTO findings (session_id, step_seq, step_index, finding_no, ts, code, "
                "severity, host, hosts_n, probe, message, evidence) VALUES "
                "('ses000000001', 0, 0, 0, TIMESTAMP '2025-01-02 03:05', 'xid-drain', "
                "'critical', 'gpu007', 1, 'gpu', 'XID 79', '{\"xids\": [79, 48]}'), "
                "('ses000000001', 0, 0, 1, TIMESTAMP '2025-01-02 03:05', 'ib-port-down', "
                "'critical', 'gpu008', 1, 'network', 'port down', '{\"port\": 1}')")
    # Before schema 8: raw text per probe run (two hosts printed the same), the whole walk
    # state with its steps in the session.
    con.execute("INSERT INTO steps VALUES ('ses000000001', 0, 0, 'check-gpu', 'probe', NULL, "
                "'drain', 'xid', TIMESTAMP '2025-01-02 03:05', TIMESTAMP '2025-01-02 03:05', "
                "false)")
    con.execute("INSERT INTO probe_runs (session_id, step_seq, step_index, ts, host, probe, "
                "state, raw, raw_bytes) SELECT 'ses000000001', 0, 0, TIMESTAMP '2025-01-02 "
                "03:05', h, 'gpu', 'ok', r, strlen(r) FROM (VALUES ('gpu007', 'Xid 79'), "
                "('gpu008', 'same'), ('gpu009', 'same')) t(h, r)")
    con.execute("""UPDATE sessions SET walk_state = '{"runbook": "hang", "hosts": ["gpu007"],
                   "current": "drain", "status": "ready", "pending_answers": {},
                   "steps": [{"node": "check-gpu", "kind": "probe", "goto": "drain"}]}'""")
    con.close()


def test_v1_file_is_upgraded_in_place_with_its_data(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    build_v1(db)
    store = Store(db)
    assert store.version() == CURRENT_VERSION  # reading upgraded it
    assert rows(store, "SELECT version FROM schema_version ORDER BY version") == [
        (v,) for v in range(1, CURRENT_VERSION + 1)]
    assert rows(store, "SELECT code, xids FROM findings ORDER BY code") == [
        ("ib-port-down", None), ("xid-drain", [79, 48])]
    assert one(store, "SELECT title FROM incidents") == "old hang"
    assert one(store, "SELECT data_type FROM duckdb_columns() WHERE table_name = 'findings' "
                      "AND column_name = 'xids'") == "INTEGER[]"
    # Schema 8 moved the raw texts to one blob per content, and the steps' records out of
    # the walk state: both read back as before.
    assert one(store, "SELECT count(*) FROM raw_blobs") == 2
    assert {(o.host, o.text) for o in store.read(lambda con: raw_outputs(
        con, ["ses000000001"]))} == {("gpu007", "Xid 79"), ("gpu008", "same"),
                                     ("gpu009", "same")}
    assert one(store, "SELECT count(*) FROM probe_runs WHERE raw IS NOT NULL") == 0
    assert json.loads(one(store, "SELECT record FROM steps"))["goto"] == "drain"
    assert store.load_session_state("ses000000001")["steps"] == [
        {"node": "check-gpu", "kind": "probe", "goto": "drain"}]
    # ... and it takes new walks like any store.
    record_walk(store, XID, {})
    assert one(store, "SELECT count(*) FROM sessions") == 2


def test_upgrade_happens_once_even_with_many_openers(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    build_v1(db)
    for _ in range(3):
        Store(db).write(lambda con: None)
    assert one(Store(db), "SELECT count(*) FROM schema_version") == CURRENT_VERSION


def test_a_newer_file_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "new.duckdb"
    Store(db).write(lambda con: None)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_version VALUES (?, now()::TIMESTAMP, 'from the future')",
                [CURRENT_VERSION + 1])
    con.close()
    before = db.read_bytes()
    for action in (lambda s: s.write(lambda con: None), lambda s: s.read(lambda con: None),
                   lambda s: s.open_session("mini", ["gpu001"], {})):
        with pytest.raises(StoreVersionError, match=rf"written by a newer diag \(schema "
                                                    rf"version {CURRENT_VERSION + 1}; this "
                                                    rf"diag knows up to {CURRENT_VERSION}\)"):
            action(Store(db))
    assert db.read_bytes() == before


def test_a_foreign_duckdb_file_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE sales (x INTEGER)")
    con.close()
    with pytest.raises(StoreVersionError, match="not a diag incident store"):
        Store(db).write(lambda con: None)


def test_reading_never_creates_the_store(tmp_path: Path) -> None:
    db = tmp_path / "nothing" / "diag.duckdb"
    with pytest.raises(StoreMissingError, match="no incident store at"):
        Store(db).read(lambda con: None)
    assert not db.exists() and not db.parent.exists()


def test_not_a_database_at_all(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("hello")
    with pytest.raises(StoreError):
        Store(db).read(lambda con: None)


def test_locations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DIAG_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "diag" / "diag.duckdb"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/is/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home" / ".local" / "share" / "diag" / "diag.duckdb"
    monkeypatch.setenv("DIAG_DB", str(tmp_path / "env.duckdb"))
    assert resolve_db_path() == tmp_path / "env.duckdb"
    assert resolve_db_path(tmp_path / "flag.duckdb") == tmp_path / "flag.duckdb"  # flag wins
    assert Store().path == tmp_path / "env.duckdb"


def test_every_column_is_documented() -> None:
    con = duckdb.connect()
    for step in MIGRATIONS:
        for statement in step.statements:
            con.execute(statement)
    columns = con.execute("SELECT table_name, column_name FROM duckdb_columns() "
                          "WHERE database_name = current_database() AND schema_name = 'main' "
                          "AND NOT internal").fetchall()
    missing = [f"{t}.{c}" for t, c in columns if c not in SCHEMA_DOC.get(t, ("", {}))[1]]
    stale = [f"{t}.{c}" for t, (_, cols) in SCHEMA_DOC.items() for c in cols
             if (t, c) not in columns]
    assert not missing and not stale, (missing, stale)


def test_walk_state_round_trips_as_json(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    session, walk = record_walk(store, XID, {})
    assert store.load_session(session)["state"] == json.loads(json.dumps(walk.to_dict()))


def test_an_impossible_place_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the store's directory should be")
    with pytest.raises(StoreError, match="cannot create"):
        Store(blocker / "diag.duckdb").write(lambda con: None)


def test_reading_in_several_steps(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    record_walk(store, XID, {})
    with store.reading() as con:
        sessions = con.execute("SELECT id FROM sessions").fetchall()
        steps = con.execute("SELECT count(*) FROM steps WHERE session_id = ?",
                            [sessions[0][0]]).fetchone()
    assert steps == (3,)
