"""Versions told (issue 29 item 3): every export names the diag and schema version that wrote
it; a pool with an export from a newer diag names the export and what it leaves out; `diag
--version` names the installed package's version, not a constant."""

from __future__ import annotations

import json
import shutil
from importlib.metadata import version
from pathlib import Path

import duckdb
import pytest

from assistant.cli import main
from assistant.store import Store
from assistant.store.schema import CURRENT_VERSION
from tests.store.storehelpers import XID, record_walk

pytestmark = pytest.mark.store


def newer_export(older: Path, newer: Path) -> None:
    """*older* as a diag one schema version ahead would have written it: an extra column in
    sessions, a table this diag does not know, a schema step it has not heard of."""
    shutil.copytree(older, newer)
    con = duckdb.connect()
    try:
        sessions = str(newer / "sessions.parquet")
        con.execute(f"COPY (SELECT *, 'ib0' AS fabric FROM read_parquet('{sessions}')) "
                    f"TO '{sessions}.tmp' (FORMAT parquet)")
        Path(sessions + ".tmp").replace(sessions)
        con.execute(f"COPY (SELECT 1 AS x) TO '{newer / 'rma_tickets.parquet'}' (FORMAT parquet)")
        steps = str(newer / "schema_version.parquet")
        con.execute(f"COPY (SELECT * FROM read_parquet('{steps}') UNION ALL SELECT "
                    f"{CURRENT_VERSION + 1}, now()::TIMESTAMP, 'future') TO '{steps}.tmp' "
                    "(FORMAT parquet)")
        Path(steps + ".tmp").replace(steps)
    finally:
        con.close()
    info = json.loads((newer / "export.json").read_text())
    info.update(diag_version="9.9.0", schema_version=CURRENT_VERSION + 1)
    (newer / "export.json").write_text(json.dumps(info))


def test_exports_name_their_versions_and_a_newer_one_gets_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = Store(tmp_path / "bob.duckdb")
    record_walk(store, XID, {}, symptom="gpu002 fell over")
    shared = tmp_path / "shared"
    assert main(["export", "--parquet", str(shared / "bob"), "--db", str(store.path)]) == 0
    out = capsys.readouterr().out
    info = json.loads((shared / "bob" / "export.json").read_text())
    assert info["diag_version"] == version("diag") and info["schema_version"] == CURRENT_VERSION
    assert info["tables"]["sessions"]["rows"] == 1
    assert f"diag {version('diag')}, schema version {CURRENT_VERSION}" in out
    assert oct((shared / "bob" / "export.json").stat().st_mode & 0o777) == "0o600"

    # the same export, as it pools: no word
    assert main(["history", "--from", str(shared)]) == 0
    assert "newer diag" not in capsys.readouterr().err

    newer_export(shared / "bob", shared / "carol")
    assert main(["history", "--from", str(shared)]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "newer diag" in line]
    assert len(lines) == 1, err
    assert str(shared / "carol") in lines[0] and "diag 9.9.0" in lines[0]
    assert f"schema version {CURRENT_VERSION + 1}" in lines[0]
    assert "sessions.fabric" in lines[0] and "table rma_tickets" in lines[0]
    # diag import still refuses it whole, by name
    assert main(["import", str(shared / "carol"), "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "newer diag" in capsys.readouterr().err


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    out = capsys.readouterr().out
    assert out.strip() == f"diag {version('diag')} (store schema version {CURRENT_VERSION})"
