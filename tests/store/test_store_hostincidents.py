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
from assistant.store.incidents import merge
from assistant.store.pool import Pool
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

    # A simulated walk (a replayed scenario) is not history: no rows.
    store.open_session("mini", ["sim001"], {}, symptom="drill", simulated=True)
    hinc, _ = assert_kept(store)
    assert "sim001" not in {r[1] for r in hinc}


def test_an_older_store_gets_its_rows_on_upgrade(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    record_walk(store, DRIFT, DRIFT_ANSWERS)
    record_walk(store, XID, {})
    before = assert_kept(store)

    def back_to_eight(con: Connection) -> None:  # exactly a version 8 file: v9 only adds
        for table in TABLES:
            con.execute(f"DROP TABLE {table}")
        con.execute("DELETE FROM schema_version WHERE version = 9")

    store.write(back_to_eight)
    upgraded = Store(tmp_path / "diag.duckdb")
    assert assert_kept(upgraded) == before
    assert one(upgraded, "SELECT max(version) FROM schema_version") == 9


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


def _report(pool: Pool) -> tuple[bool, str]:
    def ask(con: Connection) -> tuple[bool, str]:
        return hostincidents.kept(con), json.dumps(correlate(con, since=None, min_count=1),
                                                   default=str)
    return pool.read(ask)


def test_a_pool_reads_exported_rows_only_when_whole(exports: dict[str, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    whole = Pool(str(exports["alice"].parent))
    kept, report = _report(whole)
    assert kept  # each incident in one export: the exported rows are read as they are
    assert main(["import", str(exports["alice"].parent), "--db",
                 str(tmp_path / "team.duckdb")]) == 0
    team = Store(tmp_path / "team.duckdb")
    assert team.read(lambda con: json.dumps(correlate(con, since=None, min_count=1),
                                            default=str)) == report
    assert_kept(team)  # import derived the rows of what it added

    # alice's sessions in two exports: her rows would count twice, so they are derived
    twice = Pool(f"{tmp_path}/*/*")
    assert len(twice.exports) == 3
    assert _report(twice) == (False, report)

    # an export from a diag before schema 9 has no such rows: derived, the same counts
    (exports["bob"] / f"{hostincidents.CODES}.parquet").unlink()
    assert _report(whole) == (False, report)
    capsys.readouterr()
