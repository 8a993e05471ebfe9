"""A team's pooled history: many operators' Parquet exports read as one store, or merged
into one.

A team shares history without a server: each operator runs ``diag export --parquet DIR`` into
shared storage (one directory per operator, or per export), and anyone asks the whole team's
history with ``--from 'exports/*'``. Ids are random, so exports do not collide; the same rows
exported twice (yesterday's and today's export of one store, or an export of a store that
imported another) are counted once: a session is taken from the export holding its newest
state, with its children from that same export; an incident, a drill, likewise by id.

The pooled store is an in-memory DuckDB whose tables are views over the Parquet files, so a
question reads only the columns it needs; columns a file lacks (an export from an older diag)
read as their default (``simulated`` false: such walks were real), else NULL, and columns it
has beyond this diag's schema are left out. ``diag import`` merges them into a store through
the same views, after checking what they hold (``importing``). An export also carries
its store's host-incidents (what correlate counts): read as exported where an export holds its
incidents whole, derived for the rest (``_derived_views``).
"""

from __future__ import annotations

import contextlib
import glob
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import duckdb

from . import schema
from .base import Connection, StoreError, quiet, sql_list

T = TypeVar("T")
POOLED = tuple(t for t in schema.TABLES if t != "schema_version")
CHILDREN = ("hosts", "steps", "probe_runs", "findings", "actions")
_GLOB = set("*?[")


def find_exports(spec: str) -> list[Path]:
    """The export directories *spec* names: a directory holding ``sessions.parquet``, a
    directory of such directories (searched to any depth), or a glob of either."""
    if _GLOB & set(spec):
        roots = [Path(p) for p in sorted(glob.glob(str(Path(spec).expanduser())))]
    else:
        roots = [Path(spec).expanduser()]
    found: set[Path] = set()
    for root in roots:
        if root.is_file() and root.suffix == ".parquet":
            root = root.parent
        if (root / "sessions.parquet").is_file():
            found.add(root)
        elif root.is_dir():
            found.update(p.parent for p in root.rglob("sessions.parquet"))
    if not found:
        raise StoreError(f"no diag exports at {spec} (an export is a directory with "
                         "sessions.parquet, findings.parquet, ... as `diag export --parquet "
                         "DIR` writes; give that directory, a directory of them, or a glob)")
    return sorted(found)


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


_COLUMNS: dict[str, list[tuple[str, str]]] = {}
# What a column a file lacks reads as: its default where it has one (a NOT NULL column added
# later, like ``simulated``, must not read as NULL), else NULL. And the columns no row may be
# without (NOT NULL, no default): ``diag import`` refuses a file lacking one.
_MISSING: dict[tuple[str, str], str] = {}
_REQUIRED: dict[str, list[str]] = {}


def current_columns() -> dict[str, list[tuple[str, str]]]:
    """The current schema's (column, type) per table, from the migrations themselves (built
    once per process in a scratch in-memory database of its own: not attached to the
    caller's connection, whose transaction — ``diag import``'s — may write only to the
    store)."""
    if _COLUMNS:
        return _COLUMNS
    ref = quiet(duckdb.connect())
    try:
        for step in schema.MIGRATIONS:
            for statement in step.statements:
                ref.execute(statement)
        for table, column, type_, default, nullable in ref.execute(
                "SELECT table_name, column_name, data_type, column_default, is_nullable "
                "FROM duckdb_columns() "
                "WHERE schema_name = 'main' AND database_name = current_database() "
                "ORDER BY table_name, column_index").fetchall():
            _MISSING[(table, column)] = f"CAST({default or 'NULL'} AS {type_})"
            if not nullable and default is None:
                _REQUIRED.setdefault(table, []).append(column)
            _COLUMNS.setdefault(table, []).append((column, type_))
    finally:
        ref.close()
    return _COLUMNS


def typed_columns(table: str, have: set[str]) -> str:
    """The SELECT list that reads a file with columns *have* as *table* of this schema."""
    columns = current_columns()[table]
    return ", ".join(f"CAST({c} AS {t}) AS {c}" if c in have else
                     f"{_MISSING[(table, c)]} AS {c}" for c, t in columns)


def required_columns(table: str) -> list[str]:
    """The columns of *table* no row may be without (NOT NULL, no default)."""
    current_columns()
    return _REQUIRED.get(table, [])


def pick_view(prefix: str) -> str:
    """The view that says which export each session is taken from."""
    return f"{prefix}pool_pick"


def _before_redaction(con: Connection, exports: Sequence[Path]) -> list[str]:
    """The exports (as the ``export`` column names them) from a diag before schema 10, which
    kept typed text verbatim."""
    old = []
    for export in exports:
        path = export / "schema_version.parquet"
        row = con.execute("SELECT max(TRY_CAST(version AS BIGINT)) FROM read_parquet(?)",
                          [str(path)]).fetchone() if path.is_file() else None
        if not row or row[0] is None or row[0] < 10:
            old.append(str(export / "sessions.parquet"))
    if not old:
        return []
    return [str(r[0]) for r in con.execute("SELECT parse_dirpath(unnest(?::VARCHAR[]))",
                                           [old]).fetchall()]


def _redacted(con: Connection, sources: dict[str, str], old: list[str]) -> None:
    """The *old* exports' rows of the typed tables copied into this (in-memory) database and
    redacted as schema 10 does; *sources* then read those copies for them."""
    from .schema_v10 import TYPED, redact_typed

    names: dict[str, str] = {}
    cond = f"export IN ({sql_list(old)})"
    for table, *_ in TYPED:
        copy = f"pool_redacted_{table}"
        con.execute(f"CREATE OR REPLACE TEMP TABLE {copy} AS SELECT * FROM {sources[table]} "
                    f"WHERE {cond}")
        names[table] = copy
        sources[table] = (f"(SELECT * FROM {sources[table]} WHERE NOT ({cond}) "
                          f"UNION ALL BY NAME SELECT * FROM {copy})")
    redact_typed(con, names)


def create_views(con: Connection, exports: Sequence[Path], prefix: str = "",
                 temp: bool = False, derived: bool = False,
                 redact_old: bool = False) -> dict[str, int]:
    """Views named ``{prefix}{table}`` over the exports' Parquet files, duplicates dropped.

    Returns how many exports hold each table. *temp* makes them temporary (``diag import``
    creates them inside the store's own connection).
    """
    kind = "TEMP VIEW" if temp else "VIEW"
    columns = current_columns()
    held: dict[str, int] = {}
    sources: dict[str, str] = {}
    for table in POOLED:
        files = [e / f"{table}.parquet" for e in exports if (e / f"{table}.parquet").is_file()]
        held[table] = len(files)
        if files:
            read = (f"read_parquet([{', '.join(_literal(f) for f in files)}], "
                    "union_by_name = true, filename = true)")
            have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {read}").fetchall()}
            sources[table] = (f"(SELECT {typed_columns(table, have)}, "
                              f"parse_dirpath(filename) AS export FROM {read})")
        else:
            cols = ", ".join(f"CAST(NULL AS {t}) AS {c}" for c, t in columns[table])
            sources[table] = f"(SELECT {cols}, NULL::VARCHAR AS export WHERE false)"
    old = _before_redaction(con, exports) if redact_old else []
    if old:  # an older diag's typed text (a pasted token) never reaches a reader
        _redacted(con, sources, old)
    pick = pick_view(prefix)
    every_session = sources["sessions"]  # each export's copy, before the newest is picked
    duplicated = held["sessions"] > 1 and con.execute(
        f"SELECT count(*) > count(DISTINCT id) FROM {sources['sessions']}").fetchone()
    if duplicated and duplicated[0]:
        # The export holding a session's newest state gives its row and all its children.
        con.execute(f"CREATE OR REPLACE {kind} {pick} AS SELECT id, arg_max(export, "
                    f"(updated, export)) AS export FROM {sources['sessions']} GROUP BY id")
        for table in ("sessions", *CHILDREN):
            key = "id" if table == "sessions" else "session_id"
            sources[table] = (f"(SELECT s.* FROM {sources[table]} s SEMI JOIN {pick} p "
                              f"ON p.id = s.{key} AND p.export = s.export)")
    for table, newest in (("incidents", "coalesce(updated, closed, opened)"),
                          ("drills", "finished"), ("incident_actions", "ts")):
        if held[table] > 1:
            sources[table] = (f"(SELECT * FROM {sources[table]} QUALIFY row_number() OVER "
                              f"(PARTITION BY id ORDER BY {newest} DESC NULLS LAST, "
                              "export DESC) = 1)")
    if held["raw_blobs"] > 1:  # one content, many exports: one row per hash
        sources["raw_blobs"] = (f"(SELECT * FROM {sources['raw_blobs']} QUALIFY "
                                "row_number() OVER (PARTITION BY hash ORDER BY export) = 1)")
    for table in POOLED:
        con.execute(f"CREATE OR REPLACE {kind} {prefix}{table} AS "
                    f"SELECT * EXCLUDE (export) FROM {sources[table]}")
    if derived:
        _derived_views(con, exports, sources["sessions"],
                       every_session if duplicated and duplicated[0] else None)
    return held


def _derived_views(con: Connection, exports: Sequence[Path], sessions: str,
                   every_session: str | None) -> None:
    """Views over the exports' host-incidents (what correlate counts), read as they are from
    the *clean* exports: those that have the rows (a diag with schema 9 or later wrote them)
    and whose every session is the one the pool takes (no newer copy elsewhere) and whose
    every incident has all its sessions there — so their rows are complete and counted once.
    The sessions of the other exports (an older copy of a store exported again, a store that
    continued an incident it imported, an export from an older diag) are listed in
    ``pool_uncovered``: correlate derives their rows from the pooled history
    (``evidence.sources``), and only theirs."""
    with_rows = [e for e in exports if all((e / f"{t}.parquet").is_file()
                                           for t in schema.DERIVED)]
    # each export as the ``export`` column names it (the directory of its files)
    named = con.execute("SELECT parse_dirpath(unnest(?::VARCHAR[]))",
                        [[str(e / "sessions.parquet") for e in with_rows]]).fetchall()
    dirs = dict(zip((str(d[0]) for d in named), with_rows, strict=True))
    # (*every_session*: each export's copy of the sessions, given when some are in two)
    copied = (f"SELECT DISTINCT r.export FROM {every_session} r ANTI JOIN {sessions} p "
              "ON p.id = r.id AND p.export = r.export UNION " if every_session else "")
    dirty = {str(r[0]) for r in con.execute(f"""
        {copied}SELECT DISTINCT export FROM {sessions} WHERE incident_id IN (
            SELECT incident_id FROM {sessions} GROUP BY incident_id
            HAVING count(DISTINCT export) > 1)""").fetchall()}
    clean = [e for d, e in dirs.items() if d not in dirty]
    read_whole = sql_list([d for d, e in dirs.items() if e in clean])  # NULL: none
    con.execute(f"CREATE OR REPLACE VIEW pool_uncovered AS SELECT id FROM {sessions} "
                f"WHERE NOT coalesce(export IN ({read_whole}), false)")
    for table in schema.DERIVED:
        if clean:
            read = (f"read_parquet([{', '.join(_literal(e / f'{table}.parquet') for e in clean)}"
                    "], union_by_name = true)")
            have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {read}").fetchall()}
        else:
            read, have = "(SELECT 1) WHERE false", set()
        con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT {typed_columns(table, have)} "
                    f"FROM {read}")


class Pool:
    """Exports read as one store: ``Pool(spec).read(fn)`` like ``Store.read`` (read-only).

    Cheap to create: it resolves the export directories, and opens an in-memory DuckDB with
    the views for each read.
    """

    def __init__(self, spec: str, *, restricted: bool = False) -> None:
        """*restricted*: the connection may read the exports and nothing else (no other file,
        no URL, settings locked) — for ``diag query --from``, whose SQL the operator writes."""
        self.spec = spec
        self.restricted = restricted
        self.limits: tuple[str, ...] = ()  # settings made before a restricted one is locked
        self.exports = find_exports(spec)
        self.path = f"{spec} ({len(self.exports)} export{'s' if len(self.exports) != 1 else ''})"

    def __repr__(self) -> str:
        return f"Pool({self.spec!r})"

    def exists(self) -> bool:
        return True

    def connect(self) -> Connection:
        con = quiet(duckdb.connect())
        try:
            # Each file's footer parsed once per connection, not once per view and question
            # (this in-memory database lives as long as the connection): over 20 exports,
            # -30% CPU in setting the views up and ~-10% in the XID question, measured.
            con.execute("SET parquet_metadata_cache = true")
            create_views(con, self.exports, derived=True, redact_old=True)
            if self.restricted:
                for statement in self.limits:
                    con.execute(statement)
                con.execute("SET allowed_directories = ?",
                            [[f"{e.resolve()}/" for e in self.exports]])
                con.execute("SET enable_external_access = false")
                con.execute("SET lock_configuration = true")
        except duckdb.Error as exc:
            con.close()
            raise StoreError(f"{self.spec}: cannot read the exports: "
                             f"{str(exc).splitlines()[0]}") from None
        return con

    def read(self, fn: Callable[[Connection], T]) -> T:
        con = self.connect()
        try:
            return fn(con)
        finally:
            con.close()

    @contextlib.contextmanager
    def reading(self) -> Iterator[Connection]:
        con = self.connect()
        try:
            yield con
        finally:
            con.close()
