"""The store's commands: ``diag history | correlate | query | report | export``.

``add_store_commands(subparsers)`` adds them to diag's parser; each command is a thin front
end over ``assistant.store``. Like the rest of the CLI, heavy modules (duckdb) are imported
inside the commands so ``diag --help`` stays fast, results go to stdout and diagnostics to
stderr, and a store problem is one line on stderr with exit status 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_USAGE = 0, 2

DB_HELP = ("the store file (default: $DIAG_DB, else $XDG_DATA_HOME/diag/diag.duckdb, "
           "i.e. ~/.local/share/diag/diag.duckdb)")


def _fail(message: str) -> int:
    print(f"diag: {message}", file=sys.stderr)
    return EXIT_USAGE


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def _store(args: argparse.Namespace) -> Any:
    from assistant.store import Store

    return Store(args.db)


def _since(text: str | None) -> Any:
    from assistant.store.history import parse_since

    return parse_since(text)


# --- history ---------------------------------------------------------------------------------

def cmd_history(args: argparse.Namespace) -> int:
    from assistant.store import StoreError, StoreMissingError
    from assistant.store.history import history
    from assistant.store.textfmt import table, when

    store = _store(args)
    try:
        since = _since(args.since)
        result = store.read(lambda con: history(con, host=args.host, since=since,
                                                runbook=args.runbook, code=args.code,
                                                job=getattr(args, "job", None),
                                                limit=args.limit))
    except StoreMissingError as exc:
        if args.json:
            _print_json({"counts": {"incidents": 0, "sessions": 0, "findings": 0},
                         "incidents": [], "findings": [], "store": str(store.path)})
            return EXIT_OK
        print(f"diag: {exc}", file=sys.stderr)
        return EXIT_OK
    except (StoreError, ValueError) as exc:
        return _fail(str(exc))
    if args.json:
        _print_json({"store": str(store.path), **result})
        return EXIT_OK
    counts = result["counts"]
    filters = ", ".join(f"{k} {when(v) if k == 'since' else v}"
                        for k, v in result["filters"].items() if v)
    print(f"{counts['incidents']} incident(s), {counts['sessions']} session(s), "
          f"{counts['findings']} finding(s) on {counts['hosts_with_findings']} host(s)"
          + (f"  [{filters}]" if filters else ""))
    if args.host:
        h = result["host"]
        where = ", ".join(f"{k} {h[k]}" for k in ("rack", "leaf", "rail") if h.get(k))
        print(f"host {args.host}: {where or 'placement unknown'}; probed in "
              f"{h.get('sessions', 0)} session(s) of {h.get('incidents', 0)} incident(s), "
              f"last {when(h.get('last_seen'))} UTC")
    if result["incidents"]:
        rows = [{**i, "runbooks": ",".join(i["runbooks"] or []),
                 "what": i["root_cause"] or i["title"]} for i in result["incidents"]]
        columns = [("id", "incident"), ("opened", "opened (UTC)"), ("status", "status"),
                   ("runbooks", "runbook", 16), ("hosts", "hosts"), ("findings", "findings"),
                   ("critical", "crit"), ("error", "err"), ("warning", "warn"),
                   ("what", "root cause / title", 48)]
        if any(i.get("job_id") for i in rows):  # incidents of Slurm jobs name their job
            columns.insert(3, ("job_id", "job", 12))
        print()
        print(table(rows, columns))
        if counts["incidents"] > len(rows):
            print(f"... {counts['incidents'] - len(rows)} older incident(s); --limit N shows "
                  "more")
    if result["findings"]:
        print()
        print(table(result["findings"], [("code", "code", 28), ("severity", "severity"),
                                         ("findings", "findings"), ("hosts", "hosts"),
                                         ("incidents", "incidents"),
                                         ("last_seen", "last seen (UTC)")]))
    return EXIT_OK


# --- correlate -------------------------------------------------------------------------------

def cmd_correlate(args: argparse.Namespace) -> int:
    from assistant.store import StoreError, StoreMissingError
    from assistant.store.correlate import correlate

    store = _store(args)
    try:
        since = _since(args.since)
        result = store.read(lambda con: correlate(con, since=since, min_count=args.min_count,
                                                  min_lift=args.min_lift, alpha=args.alpha,
                                                  limit=args.limit))
    except StoreMissingError as exc:
        print(f"diag: {exc}", file=sys.stderr)
        return EXIT_OK
    except (StoreError, ValueError) as exc:
        return _fail(str(exc))
    if args.json:
        _print_json({"store": str(store.path), **result})
    else:
        sys.stdout.write(correlate_text(result))
    return EXIT_OK


def correlate_text(result: dict[str, Any]) -> str:
    from assistant.store.textfmt import duration, percent, table, when

    t = result["thresholds"]
    out = [f"history since {when(result['since'])} UTC" if result["since"] else
           "whole history",
           f"(reported: lift >= {t['min_lift']:g}, at least {t['min_count']} findings, "
           f"p < {t['alpha']:g} after Bonferroni; one host alone is never a pattern)", ""]

    out.append("Hosts that recur across incidents (same code, more incidents than the fleet "
               "rate predicts)")
    rows = [{"host": h["host"], "code": c["code"], "incidents": c["incidents"],
             "of": h["incidents_involved"], "expected": c["expected"], "lift": c["lift"],
             "p": _p(c["p_value"]), "note": c.get("explained_by", "")}
            for h in result["recurring_hosts"] for c in h["codes"]]
    out.append(table(rows, [("host", "host"), ("code", "code", 26), ("incidents", "incidents"),
                            ("of", "of"), ("expected", "expected"), ("lift", "lift"),
                            ("p", "p"), ("note", "part of")], "  ")
               if rows else "  none significant")
    out.append("")

    for key, title in (("placement", "Findings concentrated on one leaf switch, rack or rail"),
                       ("versions", "Finding codes that co-occur with a driver / NCCL / kernel "
                                    "version")):
        out.append(f"{title} (share of findings vs share of fleet)")
        rows = [{**r, "where": f"{r['dimension']} {r['value']}",
                 "count": f"{r['findings']}/{r['findings_total']}",
                 "share_": percent(r["share"]), "fleet": percent(r["fleet_share"]),
                 "lift_": f"{r['lift']:.1f}x", "hosts_": f"{r['hosts']}/{r['fleet_hosts']}",
                 "p_": _p(r["p_value"])}
                for r in result[key]]
        out.append(table(rows, [("code", "code", 26), ("where", "where", 48),
                                ("count", "findings"), ("share_", "share"),
                                ("fleet", "fleet share"), ("lift_", "lift"),
                                ("hosts_", "hosts"), ("p_", "p")], "  ")
                   if rows else "  none significant")
        out.append("")

    out.append("Repeat offenders by XID (hosts with the same XID in more incidents than "
               "chance)")
    rows = [{"xid": x["xid"], "repeat": x["repeat_hosts"], "with": x["hosts_with_xid"],
             "hosts": ", ".join(f"{h['host']} ({h['incidents']})" for h in x["hosts"][:6])
             + (" ..." if x["repeat_hosts"] > 6 else "")}
            for x in result["xid_repeat"]]
    out.append(table(rows, [("xid", "xid"), ("repeat", "repeat hosts"),
                            ("with", "hosts with it"), ("hosts", "hosts (incidents)", 70)],
                     "  ") if rows else "  none significant")
    out.append("")

    out.append("Time to conclusion per runbook")
    rows = [{**r, "mean": duration(r["mean_s"]), "median": duration(r["median_s"]),
             "p90": duration(r["p90_s"])} for r in result["time_to_conclusion"]]
    out.append(table(rows, [("runbook", "runbook"), ("sessions", "sessions"),
                            ("concluded", "concluded"), ("mean", "mean"),
                            ("median", "median"), ("p90", "p90")], "  ")
               if rows else "  no sessions")
    return "\n".join(out) + "\n"


def _p(value: float) -> str:
    """p-values far in the tail underflow to 0.0 in JSON; say what that means."""
    return "<1e-300" if value == 0 else f"{value:.2g}"


# --- query -----------------------------------------------------------------------------------

def cmd_query(args: argparse.Namespace) -> int:
    import duckdb

    from assistant.store import StoreError

    if args.schema:
        return _print_schema(args.format)
    sql = args.sql
    if sql == "-":
        sql = sys.stdin.read()
    if not sql or not sql.strip():
        return _fail("query takes SQL (or --schema to see the tables): "
                     "diag query \"SELECT code, count(*) FROM findings GROUP BY ALL\"")
    store = _store(args)

    def run(con: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
        cur = con.execute(sql)
        if cur.description is None:
            return [], []
        return [d[0] for d in cur.description], cur.fetchall()

    try:
        names, rows = store.read(run)
    except StoreError as exc:
        return _fail(str(exc))
    except duckdb.Error as exc:
        text = str(exc)
        if "read-only" in text:
            return _fail("query is read-only: statements that change the store are "
                         "refused (the history is written only by diag runs). "
                         f"DuckDB said: {text.splitlines()[0]}")
        return _fail(f"query failed: {text.splitlines()[0] if text else type(exc).__name__}")
    _print_rows(names, rows, args.format)
    return EXIT_OK


def _print_rows(names: list[str], rows: list[tuple[Any, ...]], fmt: str) -> None:
    from assistant.store.textfmt import table

    if fmt == "json":
        _print_json([dict(zip(names, row, strict=True)) for row in rows])
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
        _print_json(schema_json(columns))
    else:
        sys.stdout.write(schema_text(columns))
    return EXIT_OK


# --- report ----------------------------------------------------------------------------------

def cmd_report(args: argparse.Namespace) -> int:
    from assistant.store import StoreError
    from assistant.store.reports import incident_report, report_markdown

    store = _store(args)
    try:
        report = store.read(lambda con: incident_report(con, args.incident, str(store.path)))
    except StoreError as exc:
        return _fail(str(exc))
    if args.format == "json":
        _print_json(report)
    else:
        sys.stdout.write(report_markdown(report))
    return EXIT_OK


# --- export ----------------------------------------------------------------------------------

def cmd_export(args: argparse.Namespace) -> int:
    import os

    from assistant.store import StoreError
    from assistant.store.schema import TABLES

    store = _store(args)
    out = Path(args.parquet).expanduser()
    try:
        out.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        return _fail(f"{out}: {exc.strerror}")

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
        return _fail(str(exc))
    for path, count in written:
        print(f"{path}  {count} row(s)")
    return EXIT_OK


# --- the parser ------------------------------------------------------------------------------

def add_store_commands(sub: Any) -> None:
    """Add history, correlate, query, report and export to diag's sub-command parser."""
    p = sub.add_parser(
        "history", help="past incidents and findings, newest first",
        description="List recorded incidents (newest first) with their sessions, hosts and "
                    "finding counts, then the finding codes behind them. Filters combine.")
    p.add_argument("--host", metavar="H", help="only incidents whose sessions covered host H, "
                                               "and only H's findings")
    p.add_argument("--since", metavar="AGE",
                   help="only incidents whose sessions started in the last AGE: 30d, 12h, 2w, "
                        "1y (default: all)")
    p.add_argument("--runbook", metavar="ID", help="only sessions of this runbook, e.g. hang")
    p.add_argument("--code", metavar="CODE",
                   help="only incidents with this finding code, e.g. xid-drain")
    p.add_argument("--job", metavar="ID",
                   help="only incidents of this Slurm job (runs with --job ID)")
    p.add_argument("--limit", type=int, default=50, metavar="N",
                   help="at most N incidents and N finding codes (default 50)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--db", metavar="PATH", help=DB_HELP)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser(
        "correlate", help="patterns across incidents: hosts, switches, versions, XIDs",
        description="Ask the history the post-mortem questions: hosts that recur across "
                    "incidents; findings concentrated on one leaf switch, rack or rail "
                    "(share of findings vs share of fleet); finding codes that co-occur with "
                    "a driver/NCCL/kernel version; repeat offenders by XID; mean time to "
                    "conclusion per runbook. Only significant patterns are reported.")
    p.add_argument("--since", metavar="AGE", default="90d",
                   help="look at the last AGE of history (default 90d; 'all' for everything)")
    p.add_argument("--min-count", type=int, default=10, metavar="N",
                   help="a concentration needs at least N findings (default 10)")
    p.add_argument("--min-lift", type=float, default=2.0, metavar="X",
                   help="report groups at X times the fleet rate or more (default 2)")
    p.add_argument("--alpha", type=float, default=0.01, metavar="P",
                   help="significance level before Bonferroni correction (default 0.01)")
    p.add_argument("--limit", type=int, default=20, metavar="N",
                   help="at most N recurring hosts and N hosts per XID (default 20)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--db", metavar="PATH", help=DB_HELP)
    p.set_defaults(func=cmd_correlate)

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
    p.add_argument("--db", metavar="PATH", help=DB_HELP)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser(
        "report", help="a post-mortem draft for one incident",
        description="Draft a post-mortem from the store: timeline, hosts involved, evidence, "
                    "conclusion, actions and similar past incidents.")
    p.add_argument("incident", help="incident id, a unique prefix of one, or 'latest'")
    p.add_argument("--format", choices=("md", "json"), default="md",
                   help="Markdown (default) or JSON")
    p.add_argument("--db", metavar="PATH", help=DB_HELP)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "export", help="write every store table as Parquet (to pool histories)",
        description="Write every table of the store as DIR/TABLE.parquet, so a team can pool "
                    "many operators' histories and query them together with DuckDB.")
    p.add_argument("--parquet", metavar="DIR", required=True,
                   help="directory to write the Parquet files into (created if needed)")
    p.add_argument("--db", metavar="PATH", help=DB_HELP)
    p.set_defaults(func=cmd_export)
