"""``diag query``, ``diag export`` and ``diag import``: read-only SQL over the store (or a
pooled history), Parquet to pool it, and pooled exports merged into a store."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .common import DB_HELP, EXIT_OK, add_store_options, fail, open_store, print_json

# A reader reads the store and nothing else: no file (COPY ... TO, EXPORT DATABASE,
# read_text('/etc/shadow'), ATTACH), no URL, no extension download. Set on the connection
# before the operator's SQL runs, then locked so the SQL cannot set it back.
LOCKDOWN = ("SET enable_external_access = false", "SET lock_configuration = true")
DEFAULT_QUERY_TIMEOUT = 60.0
# What a question may use, set before the lockdown: no spilling (DuckDB's default writes a temp
# directory beside the team's store, up to 90 % of the free disk, once 80 % of RAM is used),
# memory and threads bounded. A question past the memory limit stops with one line.
MAX_DEFAULT_MEMORY_MB = 4096
MAX_DEFAULT_THREADS = 4
# Statements a question may be (DuckDB's own refusals word SET, COPY, ATTACH, EXPORT, LOAD);
# anything else (CREATE TABLE, INSERT, ...) is refused before it runs: a pool (--from) is an
# in-memory database where DuckDB itself would let a table be made.
READING = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "CALL", "SET", "VARIABLE_SET", "COPY",
                     "ATTACH", "DETACH", "EXPORT", "LOAD", "PREPARE", "EXECUTE"})


def default_memory_mb() -> int:
    """A quarter of this machine's memory, at most MAX_DEFAULT_MEMORY_MB."""
    import os

    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError, AttributeError):
        total = 4 * MAX_DEFAULT_MEMORY_MB
    return max(64, min(MAX_DEFAULT_MEMORY_MB, total // 4))


def bounds(memory_mb: int, threads: int) -> tuple[str, ...]:
    """The settings that keep a question within memory and off the disk."""
    return ("SET temp_directory = ''", "SET max_temp_directory_size = '0B'",
            f"SET memory_limit = '{int(memory_mb)}MiB'", f"SET threads = {int(threads)}")


def refused_statement(sql: str) -> str | None:
    """The kind of the first statement of *sql* a question may not be, or None."""
    import duckdb

    scratch = duckdb.connect()
    try:
        kinds = [s.type.name for s in scratch.extract_statements(sql)]
    except duckdb.Error:
        return None  # DuckDB words the syntax error when it runs
    finally:
        scratch.close()
    return next((k for k in kinds if k not in READING), None)


class _Query:
    """One statement on a locked-down read-only connection, run on a worker thread so the
    main thread can stop it: at the time limit, or on Ctrl-C. DuckDB holds a thread in C++
    for the whole statement, where Python never sees the signal; and a KeyboardInterrupt
    raised into ``Thread.join`` can mark a still-running thread finished, so the process
    would exit under DuckDB's feet (it aborted). Ctrl-C therefore only sets a flag here; the
    statement is interrupted, the worker waited for, then the interrupt goes on."""

    def __init__(self, store: Any, sql: str, limits: tuple[str, ...] = ()) -> None:
        self.store = store
        self.sql = sql
        self.limits = limits
        self.con: Any = None
        self.result: tuple[list[str], list[tuple[Any, ...]]] | None = None
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.interrupted = threading.Event()
        self.thread = threading.Thread(target=self._work, name="diag-query", daemon=True)

    def _work(self) -> None:
        try:
            self.result = self.store.read(self._run)
        except BaseException as exc:  # handed to the main thread
            self.error = exc
        finally:
            self.done.set()

    def _run(self, con: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
        # A pooled store's connection arrives already locked down (external access off, then
        # locked); setting anything on a locked connection is an error.
        if not con.execute("SELECT current_setting('lock_configuration')").fetchone()[0]:
            for statement in (*self.limits, *LOCKDOWN):
                con.execute(statement)
        with self.lock:
            self.con = con
        cur = con.execute(self.sql)
        if cur.description is None:
            return [], []
        return [d[0] for d in cur.description], cur.fetchall()

    def _stop(self) -> None:
        """Interrupt the running statement and wait for the worker to finish."""
        while not self.done.is_set():
            with self.lock:
                if self.con is not None:
                    with contextlib.suppress(Exception):
                        self.con.interrupt()
            self.done.wait(0.1)  # also covers a stop before the statement started

    def run(self, timeout: float) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The rows, or the worker's exception; TimeoutError past *timeout* seconds,
        KeyboardInterrupt on Ctrl-C — each only once the statement has stopped."""
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, lambda *_: self.interrupted.set())
        try:
            self.thread.start()
            deadline = time.monotonic() + timeout
            while not self.done.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
                if self.interrupted.is_set():
                    self._stop()
                    raise KeyboardInterrupt
                if time.monotonic() >= deadline:
                    self._stop()
                    raise TimeoutError
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        if self.interrupted.is_set():
            raise KeyboardInterrupt
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


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
    if not args.timeout > 0:
        return fail(f"--timeout takes a number of seconds above 0, got {args.timeout:g}")
    if args.memory < 64 or args.threads < 1:
        return fail("--memory takes MiB (64 or more) and --threads a count of 1 or more")
    kind = refused_statement(sql)
    if kind is not None:
        return fail(f"query is read-only: statements that change the store are refused (the "
                    f"history is written only by diag runs; this one is {kind}). "
                    "Ask with SELECT.")
    limits = bounds(args.memory, args.threads)
    store = open_store(args)
    if getattr(args, "pool", None):
        store.restricted = True  # the pooled exports, and no other file
        store.limits = limits  # set on its connection before it is locked
    try:
        names, rows = _Query(store, sql, limits).run(args.timeout)
    except TimeoutError:
        return fail(f"query stopped after {args.timeout:g} s (--timeout; a query that needs "
                    "longer can ask for it)")
    except StoreError as exc:
        return fail(str(exc))
    except duckdb.Error as exc:
        text = str(exc)
        first = text.splitlines()[0] if text else type(exc).__name__
        if "read-only" in text:
            return fail("query is read-only: statements that change the store are "
                         "refused (the history is written only by diag runs). "
                         f"DuckDB said: {first}")
        if isinstance(exc, duckdb.OutOfMemoryException):
            return fail(f"query needs more than --memory {args.memory} MiB (diag never lets "
                        "it spill to disk): ask for less, or give it more memory")
        if isinstance(exc, duckdb.PermissionException) or "configuration has been locked" \
                in text:
            return fail("query reads the store and nothing else: files, URLs, extensions and "
                        f"settings are off (diag export writes Parquet). DuckDB said: {first}")
        return fail(f"query failed: {first}")
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

    from assistant.store.schema import MIGRATIONS
    from assistant.store.schema_doc import schema_json, schema_text

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
    from assistant.store.exportinfo import MANIFEST, manifest
    from assistant.store.schema import DERIVED, TABLES

    store = open_store(args)
    out = Path(args.parquet).expanduser()
    try:
        out.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        return fail(f"{out}: {exc.strerror}")

    def export(con: Any) -> list[tuple[str, int]]:
        written = []
        for table_name in (*TABLES, *DERIVED):  # what correlate counts too: pools read it
            target = out / f"{table_name}.parquet"
            literal = str(target).replace("'", "''")
            con.execute(f"COPY (SELECT * FROM {table_name}) TO '{literal}' "
                        "(FORMAT parquet, COMPRESSION zstd)")
            os.chmod(target, 0o600)  # the history names hosts and people: keep it private
            count = con.execute(f"SELECT count(*) FROM {table_name}").fetchone()
            written.append((str(target), int(count[0]) if count else 0))
        # what wrote it: a pool or an import by another diag version can say what it skips
        target = out / MANIFEST
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(manifest(con, (*TABLES, *DERIVED)), fh, indent=1)
        os.chmod(target, 0o600)
        return written

    try:
        written = store.read(export)
    except StoreError as exc:
        return fail(str(exc))
    for path, count in written:
        print(f"{path}  {count} row(s)")
    from assistant import __version__
    from assistant.store.schema import CURRENT_VERSION

    print(f"{out / MANIFEST}  diag {__version__}, schema version {CURRENT_VERSION}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from assistant.store import Store, StoreError
    from assistant.store.importing import import_exports
    from assistant.store.pool import find_exports

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
                    "would change it is refused, and so is anything that reaches past it "
                    "(files, URLs, extensions, settings); memory and threads are bounded "
                    "and nothing spills to disk. --schema documents every table and "
                    "column.",
        epilog="example: diag query \"SELECT code, count(*) AS n FROM findings "
               "WHERE ts > now() - INTERVAL 30 DAY GROUP BY ALL ORDER BY n DESC\"")
    p.add_argument("sql", nargs="?", help="the SQL statement ('-' reads it from stdin)")
    p.add_argument("--schema", action="store_true",
                   help="print the tables, their columns, types and meaning instead")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="output format (default table)")
    p.add_argument("--timeout", type=float, default=DEFAULT_QUERY_TIMEOUT, metavar="S",
                   help=f"stop the query after S seconds (default {DEFAULT_QUERY_TIMEOUT:g})")
    p.add_argument("--memory", type=int, default=default_memory_mb(), metavar="MIB",
                   help="memory the query may use, in MiB (default a quarter of this "
                        f"machine's, at most {MAX_DEFAULT_MEMORY_MB}); nothing ever spills "
                        "to disk")
    p.add_argument("--threads", type=int, default=MAX_DEFAULT_THREADS, metavar="N",
                   help=f"threads the query may use (default {MAX_DEFAULT_THREADS})")
    add_store_options(p, pooled=True)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser(
        "export", help="write every store table as Parquet (to pool histories)",
        description="Write every table of the store as DIR/TABLE.parquet, so a team can pool "
                    "many operators' histories and query them together with DuckDB. "
                    "DIR/export.json names the diag and schema version that wrote them (a "
                    "pool read by an older diag says what it leaves out).")
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
