"""Issue 27 item 5: `diag import` trusted what an export said.

Each attack is an export crafted from a real one (a recorded XID walk, exported): a raw output
under the hash of an output the victim produces later, ids twice, a zlib bomb, and the damaged
or foreign files a shared directory can hold. An import is refused whole, with the file and
what was wrong in one line; what is imported is what it says it is."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from assistant.cli import main
from assistant.store import Store
from assistant.store.pool import Pool
from assistant.store.raw import raw_outputs
from tests.store.storehelpers import XID, one, raw_texts, record_walk

pytestmark = pytest.mark.store

MINE = "gpu output of gpu001\n"  # what the victim's own walk will print on gpu001
MINE_HASH = hashlib.sha256(MINE.encode()).hexdigest()
BOMB_BYTES = 16 * 1024 * 1024


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real export: an XID walk over gpu001-003 (the gpu probe printed MINE on gpu001)."""
    root = tmp_path_factory.mktemp("export")
    store = Store(root / "source.duckdb")
    record_walk(store, XID, {})
    assert main(["export", "--parquet", str(root / "base"), "--db", str(store.path)]) == 0
    return root / "base"


def craft(base: Path, where: Path, **tables: str | Callable[[Any, str], None]) -> Path:
    """A copy of *base* with each named table's file rewritten: a SELECT over ``{f}`` (the
    file as it was), or a function of (a DuckDB connection, the file's path)."""
    shutil.copytree(base, where)
    con = duckdb.connect()
    for table, change in tables.items():
        path = where / f"{table}.parquet"
        if callable(change):
            change(con, str(path))
            continue
        con.execute(f"COPY ({change.format(f=repr(str(path)))}) TO '{path}.new' "
                    "(FORMAT parquet)")
        Path(f"{path}.new").replace(path)
    con.close()
    return where


def diag(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def untouched(db: Path) -> bool:
    store = Store(db)
    return not store.exists() or one(store, "SELECT " + " + ".join(
        f"(SELECT count(*) FROM {t})" for t in ("incidents", "sessions", "steps",
                                                "probe_runs", "findings", "raw_blobs"))) == 0


def test_an_imported_output_cannot_pose_as_one_of_mine(
        base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    poison = craft(base, tmp_path / "poison", raw_blobs=(
        "SELECT * REPLACE (CASE WHEN hash = '" + MINE_HASH + "' THEN 'all clear: resume every "
        "node' ELSE text END AS text) FROM read_parquet({f})"))
    victim = tmp_path / "victim.duckdb"
    code, _, err = diag(capsys, "import", str(poison), "--db", str(victim))
    assert code == 2 and err.count("\n") == 1, err
    assert f"{poison / 'raw_blobs.parquet'}: " in err and MINE_HASH in err
    assert "does not match" in err and "internal error" not in err
    assert untouched(victim)
    record_walk(Store(victim), XID, {})  # the victim's own walk, later
    assert raw_texts(Store(victim))[("gpu001", "gpu")][0] == MINE

    # Pooled with the victim's own export (--from, where the first copy of a hash is read):
    # the foreign text is never shown as the victim's output.
    assert main(["export", "--parquet", str(tmp_path / "zz-mine"), "--db", str(victim)]) == 0
    capsys.readouterr()
    pool = Pool(f"{tmp_path}/[pz]*")
    texts = pool.read(lambda con: [o.text for o in raw_outputs(con, [
        r[0] for r in con.execute("SELECT id FROM sessions").fetchall()])])
    assert len(texts) == 6 and not any("all clear" in t for t in texts)
    assert sum("does not match its hash" in t for t in texts) <= 2


def test_ids_twice_are_refused(base: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    twice = "SELECT * FROM read_parquet({f}) UNION ALL SELECT * FROM read_parquet({f})"
    victim = tmp_path / "victim.duckdb"
    for table, key in (("incidents", "id"), ("sessions", "id"), ("steps", "session_id")):
        export = craft(base, tmp_path / table, **{table: twice})
        ident = duckdb.connect().execute(
            f"SELECT {key} FROM read_parquet('{base / f'{table}.parquet'}')").fetchone()[0]
        code, _, err = diag(capsys, "import", str(export), "--db", str(victim))
        assert code == 2 and err.count("\n") == 1, err
        assert f"{export / f'{table}.parquet'}: " in err and ident in err, err
        assert "twice" in err and untouched(victim)


def test_a_zlib_bomb_is_refused_and_never_inflated(
        base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zeros = bytes(BOMB_BYTES)
    digest = hashlib.sha256(zeros).hexdigest()  # its real hash: only the size gives it away
    packed = zlib.compress(zeros, 9)

    def add_bomb(con: Any, path: str) -> None:
        con.execute("CREATE TABLE bomb AS SELECT * FROM read_parquet(?)", [path])
        con.execute("INSERT INTO bomb (hash, bytes, text, zlib) VALUES (?, ?, NULL, ?)",
                    [digest, BOMB_BYTES, packed])
        con.execute(f"COPY bomb TO '{path}' (FORMAT parquet)")

    export = craft(base, tmp_path / "bomb", raw_blobs=add_bomb, probe_runs=(
        f"SELECT * REPLACE (CASE WHEN host = 'gpu002' THEN '{digest}' ELSE raw_hash END "
        "AS raw_hash) FROM read_parquet({f})"))
    assert (export / "raw_blobs.parquet").stat().st_size < 100_000
    victim = tmp_path / "victim.duckdb"
    code, _, err = diag(capsys, "import", str(export), "--db", str(victim))
    assert code == 2 and err.count("\n") == 1 and "internal error" not in err, err
    assert f"{export / 'raw_blobs.parquet'}: " in err and digest in err and "larger" in err
    assert untouched(victim)

    # Bundled straight from the export (--from): the output is left out, never inflated.
    tracemalloc.start()
    try:
        code, _, err = diag(capsys, "bundle", "latest", "--from", str(export),
                            "-o", str(tmp_path / "ticket.tar.gz"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 0, err
    assert peak < 8 * 1024 * 1024, f"{peak / 2**20:.0f} MiB at the peak"
    with tarfile.open(tmp_path / "ticket.tar.gz") as tar:
        raw = [tar.extractfile(m).read().decode()  # type: ignore[union-attr]
               for m in tar.getmembers() if "/raw/gpu002/" in m.name]
    assert len(raw) == 1 and f"sha256 {digest} not shown" in raw[0]
    assert "inflates to more than" in raw[0]


def test_a_failed_import_says_which_file_and_what(
        base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def truncate(con: Any, path: str) -> None:
        data = Path(path).read_bytes()
        Path(path).write_bytes(data[:len(data) // 2])

    def not_parquet(con: Any, path: str) -> None:
        Path(path).write_text("incident,session\n1,2\n")

    def newer(con: Any, path: str) -> None:
        con.execute(f"COPY (SELECT * FROM read_parquet('{path}') UNION ALL SELECT 99, "
                    f"now()::TIMESTAMP, 'from the future') TO '{path}.new' (FORMAT parquet)")
        Path(f"{path}.new").replace(path)

    cases: dict[str, tuple[str, str, str | Callable[[Any, str], None]]] = {
        # name: (table, what the line must say, the change)
        "truncated": ("sessions", "Parquet", truncate),
        "not-parquet": ("findings", "Parquet", not_parquet),
        "wrong-type": ("sessions", "started",
                       "SELECT * REPLACE ('yesterday' AS started) FROM read_parquet({f})"),
        "missing-column": ("sessions", "incident_id",
                           "SELECT * EXCLUDE (incident_id) FROM read_parquet({f})"),
        "null": ("steps", "node", "SELECT * REPLACE (NULL AS node) FROM read_parquet({f})"),
        "bad-json": ("findings", "evidence",
                     "SELECT * REPLACE ('{{not json' AS evidence) FROM read_parquet({f})"),
        "newer": ("schema_version", "newer diag", newer),
        "not-zlib": ("raw_blobs", "zlib",
                     "SELECT * REPLACE (NULL AS text, 'garbage'::BLOB AS zlib) "
                     "FROM read_parquet({f})"),
        "orphan": ("sessions", "nowhere",
                   "SELECT * REPLACE ('nowhere' AS incident_id) FROM read_parquet({f})"),
    }
    victim = tmp_path / "victim.duckdb"
    for name, (table, said, change) in cases.items():
        export = craft(base, tmp_path / name, **{table: change})
        code, _, err = diag(capsys, "import", str(export), "--db", str(victim))
        assert code == 2 and err.startswith("diag: ") and err.count("\n") == 1, (name, err)
        assert "internal error" not in err and "Traceback" not in err, (name, err)
        assert f"{export / f'{table}.parquet'}" in err and said in err, (name, err)
        assert untouched(victim), name

    # An export from an older diag (no simulated, no updated / closed_by / merged_into)
    # is not a crafted one: it imports, its walks counted as real.
    old = craft(base, tmp_path / "old",
                sessions="SELECT * EXCLUDE (simulated) FROM read_parquet({f})",
                incidents="SELECT * EXCLUDE (simulated, updated, closed_by, merged_into) "
                          "FROM read_parquet({f})")
    code, _, err = diag(capsys, "import", str(old), "--db", str(victim))
    assert code == 0, err
    assert one(Store(victim), "SELECT count(*) FROM sessions WHERE NOT simulated") == 1
