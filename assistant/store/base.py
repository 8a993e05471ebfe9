"""The store's leaf: its connection type, its errors, ids and UTC times, and row helpers.

Every other store module imports from here and this module imports none of them, so ``db``
(the file and its connections), ``writes`` (what a walk becomes) and the read side can use the
same vocabulary without importing one another in a circle.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb

Connection = duckdb.DuckDBPyConnection


class StoreError(Exception):
    """A store problem, said in one line for the operator (the CLI prints it, exits 2)."""


class StoreMissingError(StoreError):
    """Reading a store that does not exist yet (nothing recorded)."""


class StoreVersionError(StoreError):
    """The file was written by a newer diag, or is not a diag store at all."""


class StoreBusyError(StoreError):
    """Another process held the file for longer than the busy timeout."""


class StoreFullError(StoreError):
    """The disk (or quota) holding the store is full: waiting does not help, unlike a lock."""


def quiet(con: Connection) -> Connection:
    """*con* without DuckDB's progress bar, which it draws on stdout for a query over ~2 s (a
    year's correlate on a busy machine): it was mixed into `diag correlate --json`."""
    con.execute("SET enable_progress_bar = false")
    return con


def disk_full(exc: BaseException) -> bool:
    """Is *exc* the file system saying it has no room (ENOSPC, EDQUOT, EFBIG)?

    DuckDB reports it as text inside an IOException or, at commit, a TransactionException
    ("Failed to commit: Could not write file ...: No space left on device").
    """
    import errno

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return True
    text = str(exc).lower()
    return any(words in text for words in ("no space left", "disk quota exceeded",
                                           "file too large"))


def utc(epoch: float | None) -> datetime | None:
    """Epoch seconds as a naive UTC datetime: the store's TIMESTAMP columns are all UTC."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(float(epoch), tz=timezone.utc).replace(tzinfo=None)


def now_utc() -> datetime:
    return datetime.now(tz=timezone.utc).replace(tzinfo=None)


def new_id() -> str:
    """12 hex digits: short enough to type, random enough to pool many operators' stores."""
    return uuid.uuid4().hex[:12]


def insert_rows(con: Connection, table: str, columns: Sequence[tuple[str, str]],
                rows: Sequence[Sequence[Any]]) -> None:
    """Insert many rows in one statement: one list parameter per column, zipped by UNNEST.

    DuckDB's ``executemany`` runs one statement per row (about 1 ms each); a step over 512
    hosts writes thousands of rows and must stay a short transaction. JSON columns are passed
    as text and cast, list columns as lists of lists.

    Statements carry at most ``CHUNK_CHARS`` characters of text each (the caller's
    transaction still makes them one write): the evidence sweep's step over 1,000 hosts is
    16,000 probe runs, ~300 MB of facts as JSON, and one statement holding them all peaked at
    2.7 GB resident while DuckDB took the parameters in, holding the GIL for 2.3 s (the TUI's
    screen froze that long: ``bench/tuimem.py``).
    """
    if not rows:
        return
    names = ", ".join(name for name, _ in columns)
    exprs = ", ".join(
        "unnest(?::VARCHAR[])::JSON" if type_ == "JSON" else f"unnest(?::{type_}[])"
        for _, type_ in columns)
    sql = f"INSERT INTO {table} ({names}) SELECT {exprs}"
    for chunk in _chunks(rows):
        con.execute(sql, [list(column) for column in zip(*chunk, strict=True)])


CHUNK_CHARS = 4_000_000  # text per INSERT statement (see insert_rows)


def _chunks(rows: Sequence[Sequence[Any]]) -> Iterator[Sequence[Sequence[Any]]]:
    """*rows* in runs of at most ``CHUNK_CHARS`` characters of strings (at least one row)."""
    start, size = 0, 0
    for i, row in enumerate(rows):
        width = sum(len(cell) for cell in row if isinstance(cell, str))
        if size and size + width > CHUNK_CHARS:
            yield rows[start:i]
            start, size = i, 0
        size += width
    yield rows[start:]


def resolve_id(con: Connection, table: str, ident: str, what: str,
               path: Path | str = "") -> str:
    """An id or a unique prefix of one -> the id; otherwise a one-line StoreError."""
    rows = con.execute(f"SELECT id FROM {table} WHERE id = ? OR starts_with(id, ?) LIMIT 3",
                       [ident, ident]).fetchall()
    exact = [r[0] for r in rows if r[0] == ident]
    if exact:
        return str(exact[0])
    if not rows or not ident:
        where = f" in {path}" if path else ""
        raise StoreError(f"no {what} '{ident}'{where} (`diag history` lists them)")
    if len(rows) > 1:
        raise StoreError(f"'{ident}' matches several {what}s ({', '.join(r[0] for r in rows)}"
                         "...); give more of the id")
    return str(rows[0][0])


def fetch_rows(con: Connection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """A query's rows as dicts by column name: what the read side hands to text and JSON."""
    cur = con.execute(sql, list(params))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def sql_list(values: Sequence[str]) -> str:
    """Strings as a quoted SQL list for ``IN (...)``; an empty list is ``NULL`` (matches none)."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values) or "NULL"


def since_sql(column: str, start: datetime | None) -> tuple[str, list[Any]]:
    """The window condition on *column* and its parameters: none when there is no start."""
    return (f"{column} >= ?", [start]) if start is not None else ("true", [])


def window(column: str, start: datetime | None) -> str:
    """SQL: *column* within the window from *start*, as a literal (one condition can then be
    written many times in a statement without counting parameters)."""
    if start is None:
        return "true"
    if start.tzinfo is not None:  # the store's TIMESTAMP columns are naive UTC
        start = start.astimezone(timezone.utc).replace(tzinfo=None)
    return f"{column} >= TIMESTAMP '{start:%Y-%m-%d %H:%M:%S.%f}'"


def counted_sessions(simulated: bool = False) -> str:
    """The sessions the history's questions count, as a table expression for ``FROM``.

    *simulated* True counts simulated walks too (demo, --scenario, drills); by default a
    replayed scenario's made-up hosts never recur next to the fleet's real ones (the
    ``sessions.simulated`` column, schema version 6)."""
    # coalesce: a pooled export from an older diag has no such column (read as NULL)
    return ("sessions" if simulated
            else "(SELECT * FROM sessions WHERE NOT coalesce(simulated, false))")
