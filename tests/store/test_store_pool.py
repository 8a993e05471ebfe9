"""A team's pooled history on real files: several operators' Parquet exports read as one
store (``--from``) and merged into one (``diag import``); rows exported twice count once, the
newer copy wins, an export from an older diag still reads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from assistant.cli import main
from assistant.store import Store
from assistant.store.correlate import correlate
from assistant.store.pool import Pool
from tests.store.storehelpers import DRIFT, DRIFT_ANSWERS, XID, one, record_walk


def diag(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def team(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Path]:
    """alice's store (two drift walks) and bob's (one XID walk), each exported; alice's
    exported a second time after she closed her first incident."""
    alice, bob = Store(tmp_path / "alice.duckdb"), Store(tmp_path / "bob.duckdb")
    first, _ = record_walk(alice, DRIFT, DRIFT_ANSWERS, symptom="hang 1")
    record_walk(alice, DRIFT, DRIFT_ANSWERS, symptom="hang 2")
    record_walk(bob, XID, {}, symptom="gpu002 fell over")
    shared = tmp_path / "shared"
    assert main(["export", "--parquet", str(shared / "alice-monday"), "--db",
                 str(alice.path)]) == 0
    assert main(["export", "--parquet", str(shared / "bob"), "--db", str(bob.path)]) == 0
    incident = one(alice, "SELECT incident_id FROM sessions WHERE id = ?", [first])
    alice.close_incident(incident, "driver drift on gpu003")
    assert main(["export", "--parquet", str(shared / "alice-tuesday"), "--db",
                 str(alice.path)]) == 0
    capsys.readouterr()
    return {"shared": shared, "alice": alice.path, "bob": bob.path,
            "incident": Path(incident)}


def test_pooled_exports_read_as_one_store(team: dict[str, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    pool = Pool(str(team["shared"]))
    assert len(pool.exports) == 3
    counts = pool.read(lambda con: con.execute(
        "SELECT (SELECT count(*) FROM incidents), (SELECT count(*) FROM sessions), "
        "(SELECT count(*) FROM findings), (SELECT count(*) FROM steps)").fetchone())
    alice, bob = Store(team["alice"]), Store(team["bob"])
    expected = [one(alice, f"SELECT count(*) FROM {t}") + one(bob, f"SELECT count(*) FROM {t}")
                for t in ("incidents", "sessions", "findings", "steps")]
    assert list(counts) == expected  # alice's rows, exported twice, count once
    # The newer copy of alice's first incident wins: closed, with its root cause.
    assert pool.read(lambda con: con.execute(
        "SELECT status, root_cause FROM incidents WHERE id = ?",
        [team["incident"].name]).fetchone()) == ("closed", "driver drift on gpu003")

    code, out, _ = diag(capsys, "history", "--from", f"{team['shared']}/*", "--json")
    assert code == 0 and json.loads(out)["counts"]["incidents"] == 3
    code, out, _ = diag(capsys, "report", team["incident"].name, "--from",
                        str(team["shared"]))
    assert code == 0 and "driver drift on gpu003" in out
    code, out, _ = diag(capsys, "query", "--from", str(team["shared"]), "--format", "json",
                        "SELECT count(DISTINCT operator) AS n FROM sessions")
    assert code == 0 and json.loads(out) == [{"n": 1}]  # one $USER made both stores
    code, out, _ = diag(capsys, "correlate", "--from", str(team["shared"]), "--since", "all")
    assert code == 0 and "Time to resolve" in out
    # diag query --from reads the exports and no other file.
    code, _, err = diag(capsys, "query", "--from", str(team["shared"]),
                        "SELECT * FROM read_csv('/etc/passwd')")
    assert code == 2 and "Permission Error" in err


def test_import_merges_exports_once(team: dict[str, Path], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "team.duckdb")
    code, out, _ = diag(capsys, "import", f"{team['shared']}/*", "--db", db, "--json")
    added = json.loads(out)["added"]
    assert code == 0 and (added["incidents"], added["sessions"]) == (3, 3)
    code, out, _ = diag(capsys, "import", str(team["shared"]), "--db", db)
    assert code == 0 and "0 incidents, 0 sessions" in out and "3 session(s) were already" in out
    pool, store = Pool(str(team["shared"])), Store(db)
    for table in ("incidents", "sessions", "hosts", "steps", "probe_runs", "findings",
                  "actions", "raw_blobs"):
        sql = f"SELECT * FROM {table} ORDER BY ALL"
        assert store.read(lambda con, s=sql: con.execute(s).fetchall()) == \
            pool.read(lambda con, s=sql: con.execute(s).fetchall()), table
    pooled = pool.read(lambda con: correlate(con, since=None))
    merged = store.read(lambda con: correlate(con, since=None))
    assert json.dumps(pooled, default=str) == json.dumps(merged, default=str)


def test_an_export_from_an_older_diag_still_reads(team: dict[str, Path]) -> None:
    old = team["shared"] / "carol-old"
    shutil.copytree(team["shared"] / "bob", old)
    con = duckdb.connect()  # a findings file without the xids column, incidents without v4's
    for table, dropped in (("findings", "xids"), ("incidents", "updated, closed_by, "
                                                  "merged_into")):
        path = old / f"{table}.parquet"
        con.execute(f"COPY (SELECT * EXCLUDE ({dropped}) FROM read_parquet('{path}')) "
                    f"TO '{path}.new' (FORMAT parquet)")
        Path(f"{path}.new").replace(path)
    (old / "drills.parquet").unlink()
    con.close()
    pool = Pool(str(old))
    assert pool.read(lambda con: con.execute(
        "SELECT count(*), count(xids) FROM findings").fetchone()) == (1, 0)
    assert pool.read(lambda con: con.execute("SELECT count(*) FROM drills").fetchone()) == (0,)


def test_bad_pool_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = diag(capsys, "history", "--from", str(tmp_path / "nowhere"))
    assert code == 2 and err.startswith("diag: no diag exports at ") and err.count("\n") == 1
    code, _, err = diag(capsys, "import", str(tmp_path), "--db", str(tmp_path / "x.duckdb"))
    assert code == 2 and "no diag exports" in err
    with pytest.raises(SystemExit):
        main(["history", "--from", str(tmp_path), "--db", str(tmp_path / "x.duckdb")])
    assert "not allowed with argument" in capsys.readouterr().err
