"""What an export says about itself, and what a pool says about an export it cannot read
whole.

``diag export`` writes ``export.json`` beside the Parquet files: the diag version and the schema
version that wrote them, when, and each table's rows and columns. Its ``schema_version.parquet``
carries the schema's steps too (every export has it, also those from before the manifest). A
pool (``--from``) that meets an export written by a newer diag reads what it knows of it and
says, in one line per export, what it leaves out: the tables and columns this diag does not
know, named — an export is never read short without a word.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb

from . import schema
from .base import Connection, quiet

MANIFEST = "export.json"


def manifest(con: Connection, tables: Sequence[str]) -> dict[str, Any]:
    """The manifest of an export of the store open on *con* (its tables as now)."""
    from assistant import __version__

    info: dict[str, Any] = {
        "format": "diag-export", "diag_version": __version__,
        "schema_version": schema.CURRENT_VERSION,
        "exported": datetime.now(timezone.utc).isoformat(timespec="seconds"), "tables": {}}
    for table in tables:
        count = con.execute(f"SELECT count(*) FROM {table}").fetchone()
        columns = [str(r[0]) for r in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND "
            "database_name = current_database() AND schema_name = 'main' "
            "ORDER BY column_index", [table]).fetchall()]
        info["tables"][table] = {"rows": int(count[0]) if count else 0, "columns": columns}
    return info


def read_manifest(export: Path) -> dict[str, Any]:
    """The export's manifest, or {} (an export from before it, or one not readable)."""
    try:
        data = json.loads((export / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _schema_of(con: Connection, export: Path) -> int | None:
    path = export / "schema_version.parquet"
    if not path.is_file():
        return None
    try:
        row = con.execute("SELECT max(TRY_CAST(version AS BIGINT)) FROM read_parquet(?)",
                          [str(path)]).fetchone()
    except duckdb.Error:
        return None
    return int(row[0]) if row and row[0] is not None else None


def newer_exports(exports: Sequence[Path]) -> list[str]:
    """One line per export a newer diag wrote: its versions and what this diag leaves out."""
    from assistant import __version__

    from .pool import current_columns

    known = current_columns()
    lines: list[str] = []
    con = quiet(duckdb.connect())
    try:
        for export in exports:
            info = read_manifest(export)
            version = _schema_of(con, export)
            version = max(version or 0, int(info.get("schema_version") or 0))
            if version <= schema.CURRENT_VERSION:
                continue
            dropped: list[str] = []
            for path in sorted(export.glob("*.parquet")):
                table = path.stem
                if table not in known:
                    dropped.append(f"table {table}")
                    continue
                try:
                    have = [str(r[0]) for r in con.execute(
                        "DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()]
                except duckdb.Error:
                    continue
                names = {c for c, _ in known[table]}
                dropped += [f"{table}.{c}" for c in have if c not in names]
            by = f"diag {info['diag_version']}, " if info.get("diag_version") else ""
            lines.append(
                f"{export}: written by a newer diag ({by}schema version {version}; this is diag "
                f"{__version__}, schema {schema.CURRENT_VERSION}): read without what this diag "
                f"does not know — {', '.join(dropped) if dropped else 'no table or column'}"
                f"{' (and what its rows mean may have changed)' if dropped else ''}; "
                "upgrade diag to read it whole")
    finally:
        con.close()
    return lines
