"""Host-incidents kept as data, on real DuckDB files: after every writer (a walk's start and
steps, incident merge, diag import, the schema migration) the kept rows are exactly what the
history derives; simulated walks stay out; a pool reads exported rows only when they are whole,
and counts the same either way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assistant.cli import main
from assistant.store import Store, hostincidents
from assistant.store.base import Connection, counted_sessions
from assistant.store.correlate import correlate
from assistant.store.evidence import evidence, sources
from assistant.store.incidents import merge
from assistant.store.pool import Pool
from assistant.store.schema import CURRENT_VERSION
from tests.store.storehelpers import ATTRS, DRIFT, DRIFT_ANSWERS, HOSTS, XID, one, record_walk

TABLES = (hostincidents.HINC, hostincidents.CODES)


def kept_and_derived(con: Connection) -> tuple[list[list[Any]], list[list[Any]]]:
    """The kept rows of both tables, and the rows the history derives now."""
    kept = [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES]
    hostincidents.derive(con, counted_sessions(False), "t_hinc", "t_codes")
    derived = [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
               for t in ("t_hinc", "t_codes")]
    for temp in ("t_hinc", "t_codes"):
        con.execute(f"DROP TABLE {temp}")
    return kept, derived


def assert_kept(store: Store) -> list[list[Any]]:
    kept, derived = store.read(kept_and_derived)
    assert kept == derived
    return kept


def test_every_writer_keeps_the_rows(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    store.write(lambda con: None)  # a new store: migrated, empty
    assert assert_kept(store) == [[], []]
    first, _ = record_walk(store, DRIFT, DRIFT_ANSWERS, symptom="hang 1")
    hinc, codes = assert_kept(store)
    # three hosts listed, each placed; the drift finding is one unit on gpu003 with its stack
    assert [(r[1], r[3], r[4]) for r in hinc] == [(h, True, ATTRS[h]["leaf"]) for h in HOSTS]
    assert [(r[1], r[2], r[9]) for r in codes] == [("gpu003", "version-drift", "2.19.3")]

    # A walk opened and not yet stepped: its hosts are host-incidents at once.
    second = store.open_session("mini", ["gpu004"], {"gpu004": {"leaf": "leaf-09"}},
                                symptom="hang 2")
    assert ("gpu004", "leaf-09") in {(r[1], r[4]) for r in assert_kept(store)[0]}
    record_walk(store, XID, {}, symptom="gpu002 fell over")

    # Merged: the absorbed incident's rows are the keeper's now, counted once.
    keep = one(store, "SELECT incident_id FROM sessions WHERE id = ?", [first])
    absorb = one(store, "SELECT incident_id FROM sessions WHERE id = ?", [second])
    store.write(lambda con: merge(con, keep, absorb))
    hinc, _ = assert_kept(store)
    assert {r[0] for r in hinc if r[1] == "gpu004"} == {keep}

    # A simulated walk (a replayed scenario) is not history: no rows, even in an incident it
    # joined.
    store.open_session("mini", ["sim001"], {}, symptom="drill", simulated=True)
    record_walk(store, XID, {}, symptom="drill in a real incident", incident=keep,
                simulated=True)
    hinc, _ = assert_kept(store)
    assert "sim001" not in {r[1] for r in hinc}

    # --include-simulated: the kept rows, with the incidents a simulated walk touched
    # derived whole, are what deriving everything gives.
    def with_simulated(con: Connection) -> tuple[list[Any], list[Any]]:
        with evidence(con, True):
            mixed = [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                     for t in sources(con)]
        hostincidents.derive(con, counted_sessions(True), "t_hinc", "t_codes")
        return mixed, [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                       for t in ("t_hinc", "t_codes")]
    mixed, everything = store.read(with_simulated)
    assert mixed == everything and "sim001" in {r[1] for r in mixed[0]}


def test_an_older_store_gets_its_rows_on_upgrade(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    record_walk(store, DRIFT, DRIFT_ANSWERS)
    record_walk(store, XID, {})
    before = assert_kept(store)

    def back_to_eight(con: Connection) -> None:  # exactly a version 8 file: v9 only adds
        for table in (*TABLES, "incident_actions"):  # (and v10 redacts, v11 adds a table)
            con.execute(f"DROP TABLE {table}")
        con.execute("DELETE FROM schema_version WHERE version >= 9")

    store.write(back_to_eight)
    upgraded = Store(tmp_path / "diag.duckdb")
    assert assert_kept(upgraded) == before
    assert one(upgraded, "SELECT max(version) FROM schema_version") == CURRENT_VERSION


@pytest.fixture
def exports(tmp_path: Path) -> dict[str, Path]:
    """alice's and bob's stores, each exported once; alice's exported again later."""
    alice, bob = Store(tmp_path / "alice.duckdb"), Store(tmp_path / "bob.duckdb")
    record_walk(alice, DRIFT, DRIFT_ANSWERS, symptom="hang 1")
    record_walk(bob, XID, {}, symptom="gpu002 fell over")
    record_walk(bob, DRIFT, DRIFT_ANSWERS, symptom="hang 2")
    out = {"alice": tmp_path / "shared/alice", "bob": tmp_path / "shared/bob",
           "again": tmp_path / "later/alice"}
    for name, store in (("alice", alice), ("bob", bob), ("again", alice)):
        assert main(["export", "--parquet", str(out[name]), "--db", str(store.path)]) == 0
    return out


def _report(pool: Pool) -> tuple[int, str]:
    """(how many sessions correlate derives rows for, the whole correlate report)."""
    def ask(con: Connection) -> tuple[int, str]:
        gaps = hostincidents.uncovered(con)
        derived = con.execute(f"SELECT count(*) FROM {gaps}").fetchone() if gaps else (0,)
        return int(derived[0]) if derived else 0, json.dumps(
            correlate(con, since=None, min_count=1), default=str)
    return pool.read(ask)


def _store_report(store: Store) -> str:
    return store.read(lambda con: json.dumps(correlate(con, since=None, min_count=1),
                                             default=str))


def test_a_pool_reads_exported_rows_where_whole_and_derives_the_rest(
        exports: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = exports["alice"].parent
    assert main(["import", str(shared), "--db", str(tmp_path / "team.duckdb")]) == 0
    team = Store(tmp_path / "team.duckdb")
    assert_kept(team)  # import derived the rows of what it added
    report = _store_report(team)
    # each incident whole in one export: every row read as exported, none derived
    assert _report(Pool(str(shared))) == (0, report)
    # alice's sessions in two exports: the older copy's rows are not read (not counted twice)
    assert _report(Pool(f"{tmp_path}/*/*")) == (0, report)

    # carol imported alice's export and continued her incident, and so did alice: the
    # incident's sessions are in two exports, so alice's and carol's are derived (each
    # session once), bob's read as exported
    carol, alice = Store(tmp_path / "carol.duckdb"), Store(tmp_path / "alice.duckdb")
    assert main(["import", str(exports["alice"]), "--db", str(carol.path)]) == 0
    incident = one(carol, "SELECT incident_id FROM sessions")
    record_walk(carol, XID, {}, symptom="hang 1, again", incident=incident)
    record_walk(alice, XID, {}, symptom="hang 1, once more", incident=incident)
    for name, store in (("carol", carol), ("alice", alice)):
        assert main(["export", "--parquet", str(shared / name), "--db", str(store.path)]) == 0
    assert main(["import", str(shared), "--db", str(team.path)]) == 0
    assert_kept(team)  # the incident it already had gained two walks: computed again
    assert one(team, "SELECT count(*) FROM sessions WHERE incident_id = ?", [incident]) == 3
    assert _report(Pool(str(shared))) == (3, _store_report(team))

    # an export from a diag before schema 9 has no such rows: its sessions are derived
    for name in ("carol", "alice"):
        (shared / name).rename(tmp_path / f"{name}-now")
    (tmp_path / "later/alice").rename(shared / "alice")
    (exports["bob"] / f"{hostincidents.CODES}.parquet").unlink()
    assert _report(Pool(str(shared))) == (2, report)
    capsys.readouterr()


def test_a_journal_imported_days_later_keeps_its_rows(tmp_path: Path) -> None:
    """A walk journalled while the store was locked is imported later: its session starts at
    the import, its steps keep their own, earlier times. The refresh skips rows older than
    an incident's walks by their time; it must not skip these."""
    store = Store(tmp_path / "diag.duckdb")
    session, _ = record_walk(store, DRIFT, DRIFT_ANSWERS)
    incident = one(store, "SELECT incident_id FROM sessions WHERE id = ?", [session])

    def imported_later(con: Connection) -> None:  # as journal.start_session leaves it
        for table, column in (("sessions", "started"), ("hosts", "ts")):
            key = "id" if table == "sessions" else "session_id"
            con.execute(f"UPDATE {table} SET {column} = {column} + INTERVAL 3 DAY "
                        f"WHERE {key} = ?", [session])
        hostincidents.refresh(con, [incident])

    store.write(imported_later)
    _, codes = assert_kept(store)
    assert [(r[1], r[2]) for r in codes] == [("gpu003", "version-drift")]
