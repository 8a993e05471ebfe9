"""`diag query` cannot fill the disk (issue 29 item 5): spilling off, memory and threads
bounded before the lockdown, on the store and on a pool; CREATE TABLE refused under --from as
on the store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.store import Store
from tests.store.storehelpers import XID, record_walk

pytestmark = pytest.mark.store

HEAVY = ("SELECT count(*) FROM (SELECT i, md5(i::VARCHAR) AS m FROM range(20000000) t(i) "
         "ORDER BY m)")


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*")}


@pytest.fixture
def places(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    store = Store(tmp_path / "team" / "diag.duckdb")
    record_walk(store, XID, {}, symptom="gpu002 fell over")
    assert main(["export", "--parquet", str(tmp_path / "shared" / "bob"), "--db",
                 str(store.path)]) == 0
    capsys.readouterr()
    return store.path, tmp_path / "shared"


@pytest.mark.parametrize("where", ["db", "from"])
def test_a_heavy_query_writes_nothing_outside_the_store(
        places: tuple[Path, Path], where: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    db, shared = places
    monkeypatch.chdir(tmp_path)
    source = ["--db", str(db)] if where == "db" else ["--from", str(shared)]
    before = _tree(tmp_path)
    assert main(["query", *source, "--format", "csv",
                 "SELECT current_setting('temp_directory') AS t, "
                 "current_setting('max_temp_directory_size') AS m, "
                 "current_setting('memory_limit') AS l, current_setting('threads') AS n"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split(",")
    assert row[0] == "" and row[1] == "0 bytes" and row[3] == "4"
    assert main(["query", *source, "--memory", "64", HEAVY]) == 2
    err = capsys.readouterr().err
    assert err.startswith("diag: query needs more than --memory 64 MiB") and "Traceback" not in err
    assert _tree(tmp_path) == before  # no temp directory, no spilled block, nothing touched
    assert not [p for p in tmp_path.rglob("*.tmp")]


@pytest.mark.parametrize("where", ["db", "from"])
@pytest.mark.parametrize("sql", ["CREATE TABLE x AS SELECT * FROM findings",
                                 "CREATE TEMP TABLE x AS SELECT 1",
                                 "SELECT 1; INSERT INTO findings SELECT * FROM findings"])
def test_writes_are_refused_on_a_pool_as_on_the_store(
        places: tuple[Path, Path], where: str, sql: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    db, shared = places
    source = ["--db", str(db)] if where == "db" else ["--from", str(shared)]
    assert main(["query", *source, sql]) == 2
    err = capsys.readouterr().err
    assert err.startswith("diag: query is read-only") and "Traceback" not in err
    assert main(["query", *source, "SELECT count(*) AS n FROM findings"]) == 0


def test_default_memory_is_bounded() -> None:
    from assistant.cli.query import MAX_DEFAULT_MEMORY_MB, default_memory_mb

    assert 64 <= default_memory_mb() <= MAX_DEFAULT_MEMORY_MB
    assert default_memory_mb() <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
