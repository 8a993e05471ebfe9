"""``diag import``: other operators' exports merged into the store, trusting nothing in them.

An export is a directory of Parquet files on shared storage: anyone who can write there may
have made it, a copy can be cut short, and a newer diag may have written it. Merged as it
was, one held a raw output under the hash of an output the importer's own walk printed later
(a writer keeps the row a hash already has, so the walk showed the export's text), ids twice
(the store has no key constraints: ``schema`` says why), 1.5 GiB of zlib in 150 KB, and a
damaged file ended in ``internal error: TransactionException``. So, before a row is written:

- every file reads as Parquet, and the export is not from a newer diag (its rows may mean
  what this diag does not know);
- every column no row may be without is there (an older diag's export lacks only newer
  columns, which read as their default);
- ids are unique in each file (incidents, sessions and drills by id, steps by session and
  seq, raw outputs by hash); an id the store already has keeps the store's row;
- every new walk's incident is in the exports or in the store;
- every raw output the new walks point at is decompressed within the store's bound and hashed
  again (``raw.check``): it is what its hash says, or nothing is imported;

then the rows are written in the caller's one transaction, and whatever DuckDB still refuses
(a type, a NULL, malformed JSON) is traced back to its file. A refusal is one StoreError that
names the file and what is wrong in it; nothing is written.

The files are examined on a scratch connection of their own: an error on the store's would
abort the import's transaction, and the next statement would only say so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from . import hostincidents, schema
from .base import Connection, StoreError, disk_full, quiet
from .pool import (
    CHILDREN,
    POOLED,
    create_views,
    current_columns,
    pick_view,
    required_columns,
    typed_columns,
)
from .raw import MAX_BLOB_BYTES, BlobError, check

IMPORTED = ("incidents", "sessions", *CHILDREN, "drills", "raw_blobs", "incident_actions")
# What makes a row itself, per file: an export holds each once.
KEYS = {"incidents": ("id",), "sessions": ("id",), "drills": ("id",),
        "incident_actions": ("id",), "steps": ("session_id", "seq"), "raw_blobs": ("hash",)}
_BATCH = 256  # raw outputs checked per fetch: memory stays a few MiB whatever the export
_NOTHING = "nothing was imported"

Described = dict[Path, set[str]]  # each file of the exports -> its columns


def import_exports(con: Connection, exports: Sequence[Path]) -> dict[str, Any]:
    """Merge *exports* into the store open on *con* (inside its write transaction), or raise
    StoreError naming the file and what is wrong, having written nothing.

    New incidents, sessions (with every child row and the raw outputs they point at) and
    drills are added; those the store already has are kept as they are (its own copy wins).
    Returns counts per table.
    """
    scratch = quiet(duckdb.connect())
    try:
        files = _describe(scratch, exports)
        _check_files(scratch, files)
        try:
            added = _merge(con, scratch, exports, files)
            oldest = _oldest_schema(scratch, exports)
            if oldest < 10:
                # an older diag kept typed text verbatim: redacted here as the migration does
                from .schema_v10 import redact_typed

                redact_typed(con)
            if oldest < 12:
                # its walks' conclusions under a runbook's own id: renamed as the migration does
                from .schema_v12 import V12_STATEMENTS

                for statement in V12_STATEMENTS:
                    con.execute(statement)
            return added
        except duckdb.Error as exc:
            if isinstance(exc, duckdb.TransactionException) or disk_full(exc):
                raise  # the store's trouble, not the export's: Store.write waits or says so
            raise StoreError(_trace(scratch, files, exc, exports)) from None
    finally:
        scratch.close()


def _oldest_schema(scratch: Connection, exports: Sequence[Path]) -> int:
    """The oldest schema among *exports* (0 for one that does not say): what the import must
    still do to their rows that the migrations since did to the store's."""
    oldest = 10**6
    for export in exports:
        path = export / "schema_version.parquet"
        if not path.is_file():
            return 0
        row = scratch.execute("SELECT max(TRY_CAST(version AS BIGINT)) FROM read_parquet(?)",
                              [str(path)]).fetchone()
        oldest = min(oldest, int(row[0]) if row and row[0] is not None else 0)
    return oldest


def _first(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _files(files: Described, table: str) -> list[Path]:
    return [f for f in files if f.name == f"{table}.parquet"]


def _describe(scratch: Connection, exports: Sequence[Path]) -> Described:
    """Every file the import reads, with its columns; a file that is not Parquet (cut short,
    another format) refused by name."""
    found: Described = {}
    for export in exports:
        for table in ("schema_version", *POOLED):  # a newer diag's is named as that first
            path = export / f"{table}.parquet"
            if not path.is_file():
                continue
            try:
                found[path] = {str(r[0]) for r in scratch.execute(
                    "DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()}
            except duckdb.Error as exc:
                raise StoreError(f"{path}: not a Parquet file diag can read ({_first(exc)}); "
                                 f"{_NOTHING}") from None
    return found


def _check_files(scratch: Connection, files: Described) -> None:
    """What each file can be refused for on its own: a newer diag's, a column no row may be
    without, an id twice, a raw output (from before schema 8) over the store's bound."""
    for path, columns in files.items():
        table = path.name.removesuffix(".parquet")
        try:
            if table == "schema_version" and "version" in columns:
                _refuse_newer(scratch, path)
            missing = [c for c in required_columns(table) if c not in columns]
            if table in IMPORTED and missing:
                raise StoreError(f"{path}: no {', '.join(missing)} column (every {table} row "
                                 f"has one): not a diag export, or damaged; {_NOTHING}")
            if table in KEYS:
                _refuse_twice(scratch, path, table)
            if table == "probe_runs" and "raw" in columns:
                _refuse_large_raw(scratch, path)
        except duckdb.Error as exc:
            raise StoreError(f"{path}: {_first(exc)}; {_NOTHING}") from None


def _refuse_newer(scratch: Connection, path: Path) -> None:
    row = scratch.execute("SELECT max(TRY_CAST(version AS BIGINT)) FROM read_parquet(?)",
                          [str(path)]).fetchone()
    version = row[0] if row else None
    if version is not None and version > schema.CURRENT_VERSION:
        raise StoreError(f"{path}: this export was written by a newer diag (schema version "
                         f"{version}; this diag knows up to {schema.CURRENT_VERSION}): "
                         f"upgrade diag to import it; {_NOTHING}")


def _refuse_twice(scratch: Connection, path: Path, table: str) -> None:
    key = KEYS[table]
    rows = scratch.execute(
        f"SELECT {', '.join(key)} FROM read_parquet(?) GROUP BY ALL HAVING count(*) > 1 "
        "ORDER BY ALL LIMIT 3", [str(path)]).fetchall()
    if rows:
        what = ", ".join("/".join(str(v) for v in row) for row in rows)
        raise StoreError(f"{path}: {table} {'/'.join(key)} {what} twice (an export holds each "
                         f"once: this one is damaged or not diag's); {_NOTHING}")


def _refuse_large_raw(scratch: Connection, path: Path) -> None:
    row = scratch.execute(
        "SELECT session_id, host, probe, strlen(CAST(raw AS VARCHAR)) FROM read_parquet(?) "
        f"WHERE strlen(CAST(raw AS VARCHAR)) > {MAX_BLOB_BYTES} LIMIT 1", [str(path)]).fetchone()
    if row:
        raise StoreError(f"{path}: the raw output of {row[2]} on {row[1]} (session {row[0]}) "
                         f"is {row[3]} bytes, larger than any output diag keeps "
                         f"({MAX_BLOB_BYTES}); {_NOTHING}")


def _merge(con: Connection, scratch: Connection, exports: Sequence[Path],
           files: Described) -> dict[str, Any]:
    """The rows added, table by table, through the pooled views (duplicates across exports
    dropped there: the newest copy of a session wins)."""
    create_views(con, exports, prefix="pool_", temp=True)
    added: dict[str, int] = {}
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE pool_new AS SELECT id FROM pool_sessions "
                    "WHERE id NOT IN (SELECT id FROM sessions)")
        _check_incidents(con, scratch, files)
        _check_blobs(con, scratch, files)
        for table, where in (
                ("incidents", "id NOT IN (SELECT id FROM incidents)"),
                ("sessions", "id IN (SELECT id FROM pool_new)"),
                *((child, "session_id IN (SELECT id FROM pool_new)") for child in CHILDREN),
                ("drills", "id NOT IN (SELECT id FROM drills)"),
                ("incident_actions", "id NOT IN (SELECT id FROM incident_actions)"),
                # The outputs the new sessions' runs point at, those the store lacks (its
                # own row of a hash is never replaced).
                ("raw_blobs", "hash IN (SELECT raw_hash FROM pool_probe_runs WHERE session_id "
                              "IN (SELECT id FROM pool_new)) AND hash NOT IN "
                              "(SELECT hash FROM raw_blobs)")):
            before = con.execute(f"SELECT count(*) FROM {table}").fetchone()
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM pool_{table} "
                        f"WHERE {where}")
            after = con.execute(f"SELECT count(*) FROM {table}").fetchone()
            added[table] = int(after[0]) - int(before[0]) if before and after else 0
        # What correlate counts is derived: computed again for every incident a new session
        # joined (one the store had, or one just added), not copied.
        hostincidents.refresh(con, [r[0] for r in con.execute(
            "SELECT DISTINCT incident_id FROM sessions WHERE id IN (SELECT id FROM pool_new)"
        ).fetchall()])
        skipped = con.execute("SELECT count(*) FROM pool_sessions").fetchone()
        added["sessions_already_here"] = (int(skipped[0]) if skipped else 0) - added["sessions"]
    finally:  # (on an aborted transaction these fail too: the rollback drops them anyway)
        for view in (*(f"pool_{table}" for table in POOLED), pick_view("pool_")):
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DROP VIEW IF EXISTS {view}")
        with contextlib.suppress(duckdb.Error):
            con.execute("DROP TABLE IF EXISTS pool_new")
    return added


def _check_incidents(con: Connection, scratch: Connection, files: Described) -> None:
    """Every new session's incident is one the exports or the store hold."""
    rows = con.execute("""
        SELECT id, incident_id FROM pool_sessions
        WHERE id IN (SELECT id FROM pool_new) AND incident_id NOT IN (SELECT id FROM incidents)
          AND incident_id NOT IN (SELECT id FROM pool_incidents)
        ORDER BY ALL LIMIT 3""").fetchall()
    if rows:
        path = _holding(scratch, files, "sessions", [str(r[0]) for r in rows])
        raise StoreError(f"{path}: session {', '.join(str(r[0]) for r in rows)} belongs to "
                         f"incident {', '.join(sorted({str(r[1]) for r in rows}))}, which "
                         f"neither the exports nor the store hold; {_NOTHING}")


def _holding(scratch: Connection, files: Described, table: str, ids: list[str]) -> Path:
    """The first file of *table* holding one of *ids*."""
    paths = _files(files, table)
    for path in paths:
        if scratch.execute("SELECT 1 FROM read_parquet(?) WHERE CAST(id AS VARCHAR) IN "
                           "(SELECT unnest(?)) LIMIT 1", [str(path), ids]).fetchone():
            return path
    return paths[0]


def _check_blobs(con: Connection, scratch: Connection, files: Described) -> None:
    """Every copy, in every export, of the raw outputs the new sessions need: decompressed
    within MAX_BLOB_BYTES and hashed again (``raw.check``), a few at a time."""
    needed = [str(r[0]) for r in con.execute("""
        SELECT DISTINCT raw_hash FROM pool_probe_runs
        WHERE session_id IN (SELECT id FROM pool_new) AND raw_hash IS NOT NULL
          AND raw_hash NOT IN (SELECT hash FROM raw_blobs)""").fetchall()]
    if not needed:
        return
    for path in _files(files, "raw_blobs"):
        try:
            rows = scratch.execute(
                f"SELECT hash, bytes, text, zlib FROM (SELECT "
                f"{typed_columns('raw_blobs', files[path])} FROM read_parquet(?)) "
                "WHERE hash IN (SELECT unnest(?))", [str(path), needed])
            while batch := rows.fetchmany(_BATCH):
                for digest, size, text, packed in batch:
                    check(digest, size, text, packed)
        except BlobError as exc:
            raise StoreError(f"{path}: raw output {digest}: {exc}; {_NOTHING}") from None
        except duckdb.Error as exc:
            raise StoreError(f"{path}: {_first(exc)}; {_NOTHING}") from None


def _trace(scratch: Connection, files: Described, exc: duckdb.Error,
           exports: Sequence[Path]) -> str:
    """The file and column behind *exc* (DuckDB refused a row while importing): each file
    read whole as this schema's types, counting NULLs where no row may have one, and the
    column named when a file does not read. Runs only after a failure."""
    for table in IMPORTED:
        for path in _files(files, table):
            typed = [(c, t) for c, t in current_columns()[table] if c in files[path]]
            required = [c for c, _ in typed if c in required_columns(table)]
            try:
                _nulls(scratch, path, typed, required)
            except duckdb.Error:
                for column, type_ in typed:  # which column: one at a time
                    try:
                        _nulls(scratch, path, [(column, type_)], [])
                    except duckdb.Error as bad:
                        return (f"{path}: column {column} does not read as {type_} "
                                f"({_first(bad)}); {_NOTHING}")
                raise
            except StoreError as bad:
                return str(bad)
    where = ", ".join(str(e) for e in exports)
    return f"cannot import {where}: {_first(exc)}; {_NOTHING}"


def _nulls(scratch: Connection, path: Path, typed: list[tuple[str, str]],
           required: list[str]) -> None:
    """Read every row of *path* as *typed*; StoreError when a *required* column has NULLs."""
    table = path.name.removesuffix(".parquet")
    casts = ", ".join(f"CAST({c} AS {t}) AS {c}" for c, t in typed)
    counts = ", ".join([f"count(*) FILTER (WHERE {c} IS NULL)" for c in required]
                       + [f"count({c})" for c, _ in typed])  # (every cast evaluated)
    row = scratch.execute(f"SELECT {counts} FROM (SELECT {casts} FROM read_parquet(?))",
                          [str(path)]).fetchone()
    for column, nulls in zip(required, row or (), strict=False):
        if nulls:
            raise StoreError(f"{path}: {nulls} row(s) without a {column} (every {table} row "
                             f"has one); {_NOTHING}")
