"""``diag query``, ``diag export`` and ``diag import``: read-only SQL over the store (or a
pooled history), Parquet to pool it, and pooled exports merged into a store."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

from .common import DB_HELP, EXIT_OK, add_store_options, fail, open_store, print_json


def cmd_query(args: argparse.Namespace) -> int:
    import duckdb

    from assistant.store import StoreError

    if args.schema:
        return _print_schema(args.format)
    sql = args.sql
    if sql == "-":
        sql = sys.stdin.read()
    if not sql or not sql.strip():
        return fail("query takes SQL (or --schema to see the tables): "
                     "diag query \"SELECT code, count(*) FROM findings GROUP BY ALL\"")
    store = open_store(args)
    if getattr(args, "pool", None):
        store.restricted = True  # the pooled exports, and no other file

    def run(con: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
        cur = con.execute(sql)
        if cur.description is None:
            return [], []
        return [d[0] for d in cur.description], cur.fetchall()

    try:
        names, rows = store.read(run)
    except StoreError as exc:
        return fail(str(exc))
    except duckdb.Error as exc:
        text = str(exc)
        if "read-only" in text:
            return fail("query is read-only: statements that change the store are "
                         "refused (the history is written only by diag runs). "
                         f"DuckDB said: {text.splitlines()[0]}")
        return fail(f"query failed: {text.splitlines()[0] if text else type(exc).__name__}")
    _print_rows(names, rows, args.format)
    return EXIT_OK


def _print_rows(names: list[str], rows: list[tuple[Any, ...]], fmt: str) -> None:
    from assistant.store.textfmt import table

    if fmt == "json":
        print_json([dict(zip(names, row, strict=True)) for row in rows])
    elif fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(names)
        for row in rows:
            writer.writerow(["" if v is None else json.dumps(v, default=str)
                             if isinstance(v, list | dict) else v for v in row])
    elif names:
        keys = [f"c{i}" for i in range(len(names))]
        print(table([dict(zip(keys, row, strict=True)) for row in rows],
                    [(k, n, 80) for k, n in zip(keys, names, strict=True)]))
        print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


def _print_schema(fmt: str) -> int:
    import duckdb

    from assistant.store.schema import MIGRATIONS, schema_json, schema_text

    con = duckdb.connect()  # the current schema, built in memory: no store needed
    try:
        for step in MIGRATIONS:
            for statement in step.statements:
                con.execute(statement)
        columns = [(t, c, ty) for t, c, ty in con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = current_database() AND schema_name = 'main' "
            "AND NOT internal ORDER BY table_name, column_index").fetchall()]
    finally:
        con.close()
    if fmt == "json":
        print_json(schema_json(columns))
    else:
        sys.stdout.write(schema_text(columns))
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    import os

    from assistant.store import StoreError
    from assistant.store.schema import TABLES

    store = open_store(args)
    out = Path(args.parquet).expanduser()
    try:
        out.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        return fail(f"{out}: {exc.strerror}")

    def export(con: Any) -> list[tuple[str, int]]:
        written = []
        for table_name in TABLES:
            target = out / f"{table_name}.parquet"
            literal = str(target).replace("'", "''")
            con.execute(f"COPY (SELECT * FROM {table_name}) TO '{literal}' "
                        "(FORMAT parquet, COMPRESSION zstd)")
            os.chmod(target, 0o600)  # the history names hosts and people: keep it private
            count = con.execute(f"SELECT count(*) FROM {table_name}").fetchone()
            written.append((str(target), int(count[0]) if count else 0))
        return written

    try:
        written = store.read(export)
    except StoreError as exc:
        return fail(str(exc))
    for path, count in written:
        print(f"{path}  {count} row(s)")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from assistant.store import Store, StoreError
    from assistant.store.pool import find_exports, import_exports

    try:
        exports = find_exports(args.path)
        store = Store(args.db)
        added = store.write(lambda con: import_exports(con, exports))
    except StoreError as exc:
        return fail(str(exc))
    if args.json:
        print_json({"store": str(store.path), "exports": [str(e) for e in exports],
                    "added": added})
        return EXIT_OK
    print(f"{store.path}: merged {len(exports)} export(s): "
          + ", ".join(f"{added[t]} {t}" for t in ("incidents", "sessions", "findings",
                                                   "probe_runs", "drills"))
          + f"; {added['sessions_already_here']} session(s) were already here")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``query``, ``export`` and ``import`` to diag's sub-command parser."""
    p = sub.add_parser(
        "query", help="run read-only SQL on the store (--schema lists the tables)",
        description="Run one SQL statement on the store, opened read-only: anything that "
                    "would change it is refused. --schema documents every table and column.",
        epilog="example: diag query \"SELECT code, count(*) AS n FROM findings "
               "WHERE ts > now() - INTERVAL 30 DAY GROUP BY ALL ORDER BY n DESC\"")
    p.add_argument("sql", nargs="?", help="the SQL statement ('-' reads it from stdin)")
    p.add_argument("--schema", action="store_true",
                   help="print the tables, their columns, types and meaning instead")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="output format (default table)")
    add_store_options(p, pooled=True)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser(
        "export", help="write every store table as Parquet (to pool histories)",
        description="Write every table of the store as DIR/TABLE.parquet, so a team can pool "
                    "many operators' histories and query them together with DuckDB.")
    p.add_argument("--parquet", metavar="DIR", required=True,
                   help="directory to write the Parquet files into (created if needed)")
    p.add_argument("--db", metavar="PATH", help=DB_HELP)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import", help="merge Parquet exports (a team's pooled history) into the store",
        description="Merge other operators' `diag export --parquet` directories into the "
                    "store: incidents, walks with every step, probe run and finding, and "
                    "drills it does not have yet (by id; what it has stays as it is).")
    p.add_argument("path", help="an export directory, a directory of them, or a glob")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--db", metavar="PATH", help=DB_HELP)
    p.set_defaults(func=cmd_import)
