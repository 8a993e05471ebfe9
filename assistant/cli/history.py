"""``diag history | correlate | report``: the questions a post-mortem asks of the store.

Results go to stdout; a store problem is one line on stderr with exit status 2."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import EXIT_OK, add_store_options, fail, open_store, parse_since, print_json


def cmd_history(args: argparse.Namespace) -> int:
    from assistant.store import StoreError, StoreMissingError
    from assistant.store.history import history
    from assistant.store.textfmt import Column, table, when

    store = open_store(args)
    try:
        since = parse_since(args.since)
        result = store.read(lambda con: history(con, host=args.host, since=since,
                                                runbook=args.runbook, code=args.code,
                                                job=getattr(args, "job", None),
                                                limit=args.limit,
                                                include_simulated=args.include_simulated))
    except StoreMissingError as exc:
        if args.json:
            print_json({"counts": {"incidents": 0, "sessions": 0, "findings": 0},
                         "incidents": [], "findings": [], "store": str(store.path)})
            return EXIT_OK
        print(f"diag: {exc}", file=sys.stderr)
        return EXIT_OK
    except (StoreError, ValueError) as exc:
        return fail(str(exc))
    if args.json:
        print_json({"store": str(store.path), **result})
        return EXIT_OK
    counts = result["counts"]
    filters = ", ".join("simulated included" if k == "include_simulated" else
                        f"{k} {when(v) if k == 'since' else v}"
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
        for a in h.get("acceptance") or []:
            failed = ", ".join(a["failed_tests"])
            print(f"  acceptance {when(a['ts'])} UTC session {a['session']}: "
                  f"{a['tests']} test(s) up to L{a['max_level']}, "
                  + (f"FAILED {failed}" if failed else "all passed"))
    if result["incidents"]:
        from assistant.store.textfmt import culprit

        rows = [{**i, "runbooks": ",".join(i["runbooks"] or []),
                 "operators": ",".join(i.get("operators") or []),
                 "what": culprit(i)} for i in result["incidents"]]
        columns: list[Column] = [("id", "incident"), ("opened", "opened (UTC)"),
                                 ("status", "status"),
                                 ("runbooks", "runbook", 16), ("operators", "operator", 16),
                                 ("hosts", "hosts"),
                                 ("findings", "findings"), ("critical", "crit"),
                                 ("error", "err"), ("warning", "warn"),
                                 ("what", "accused: root cause / title", 56)]
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


def cmd_correlate(args: argparse.Namespace) -> int:
    from assistant.store import StoreError, StoreMissingError
    from assistant.store.correlate import correlate

    store = open_store(args)
    try:
        since = parse_since(args.since)
        result = store.read(lambda con: correlate(con, since=since, min_count=args.min_count,
                                                  min_lift=args.min_lift, alpha=args.alpha,
                                                  limit=args.limit, leads=args.leads,
                                                  simulated=args.include_simulated))
    except StoreMissingError as exc:
        print(f"diag: {exc}", file=sys.stderr)
        return EXIT_OK
    except (StoreError, ValueError) as exc:
        return fail(str(exc))
    if args.json:
        print_json({"store": str(store.path), **result})
    else:
        sys.stdout.write(correlate_text(result))
    return EXIT_OK


def correlate_text(result: dict[str, Any]) -> str:
    from assistant.store.textfmt import duration, percent, table, when

    t = result["thresholds"]
    out = [f"history since {when(result['since'])} UTC" if result["since"] else
           "whole history",
           f"(significant: lift >= {t['min_lift']:g}, at least {t['min_count']} "
           f"host-incidents, p < {t['alpha']:g} after Bonferroni, exact tests; one host alone "
           "is never a pattern. Leads: the strongest groups that fall short, with why)", ""]

    from assistant.store.repeats import repeat_text

    out.append("Repeat offenders (the same hardware fault on one host or GPU in separate "
               "incidents, counted plainly)")
    out += [f"  lead: {repeat_text(r)}" for r in result.get("repeat_offenders", [])] or [
        "  none"]
    out.append("")
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
        out.append(f"{title} (share of the code's host-incidents vs share of the fleet's)")
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
        out += [f"  lead: {lead_text(r)}" for r in result.get("leads", {}).get(key, [])]
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
                            ("concluded", "concluded"),
                            ("closed_waiting", "closed waiting"), ("mean", "mean"),
                            ("median", "median"), ("p90", "p90")], "  ")
               if rows else "  no sessions")
    out.append("")
    out.append("Time to resolve per runbook (incidents opened to closed; `diag incident close`)")
    rows = [{**r, "mean": duration(r["mean_s"]), "median": duration(r["median_s"]),
             "p90": duration(r["p90_s"])} for r in result.get("time_to_resolve", [])]
    out.append(table(rows, [("runbook", "runbook"), ("incidents", "incidents"),
                            ("closed", "closed"), ("mean", "mean"),
                            ("median", "median"), ("p90", "p90")], "  ")
               if rows else "  no incidents")
    return "\n".join(out) + "\n"


def lead_text(lead: dict[str, Any]) -> str:
    """One lead in words: where, how many distinct hosts, how much of the fleet that is, its
    p before correction, and why it is not significant."""
    share = lead["fleet_hosts"] / lead["fleet_hosts_total"] if lead["fleet_hosts_total"] else 0
    counts = (f"; {lead['findings']} of {lead['findings_total']} host-incidents"
              if lead["findings"] != lead["hosts"] else "")
    pct = f"{share:.0%}" if share >= 0.1 else f"{share:.1%}"
    return (f"{lead['code']} on {lead['dimension']} {lead['value']}: {lead['hosts']} of "
            f"{lead['hosts_total']} affected hosts, {lead['fleet_hosts']} of "
            f"{lead['fleet_hosts_total']} hosts of the fleet "
            f"({pct}){counts}, lift "
            f"{lead['lift']:.1f}x, p={_p(lead['p_value'])} — {'; '.join(lead['why'])} "
            f"(p < {lead['p_needed']:.2g} needed: {lead['tests']} groups tested)")


def _p(value: float) -> str:
    """p-values far in the tail underflow to 0.0 in JSON; say what that means."""
    return "<1e-300" if value == 0 else f"{value:.2g}"


def cmd_report(args: argparse.Namespace) -> int:
    from assistant.store import StoreError
    from assistant.store.reports import incident_report, report_markdown

    store = open_store(args)
    try:
        report = store.read(lambda con: incident_report(
            con, args.incident, str(store.path), include_simulated=args.include_simulated))
    except StoreError as exc:
        return fail(str(exc))
    if args.format == "json":
        print_json(report)
    else:
        sys.stdout.write(report_markdown(report))
    return EXIT_OK


SIMULATED_HELP = ("also count simulated runs (replayed scenarios: --demo, --scenario), which "
                  "are left out by default")


def register(sub: Any) -> None:
    """Add ``history``, ``correlate`` and ``report`` to diag's sub-command parser."""
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
    p.add_argument("--include-simulated", action="store_true", help=SIMULATED_HELP)
    add_store_options(p, pooled=True)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser(
        "correlate", help="patterns across incidents: hosts, switches, versions, XIDs",
        description="Ask the history the post-mortem questions: repeat offenders (the "
                    "same hardware fault on one host or GPU in N incidents within a window, "
                    "counted plainly: defaults and sources in assistant/store/"
                    "repeat_offenders.yaml); hosts that recur across incidents; findings "
                    "concentrated on one leaf switch, rack or rail "
                    "(share of findings vs share of fleet); finding codes that co-occur with "
                    "a driver/NCCL/kernel version; repeat offenders by XID; time to conclusion "
                    "and to resolve per runbook. Patterns are reported when significant (exact "
                    "tests on host-incidents, Bonferroni-corrected); the strongest groups that "
                    "fall short are shown as leads, with their figures and why.")
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
    p.add_argument("--leads", type=int, default=5, metavar="N",
                   help="at most N leads (groups below significance) per report (default 5; "
                        "0 shows none)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--include-simulated", action="store_true", help=SIMULATED_HELP)
    add_store_options(p, pooled=True)
    p.set_defaults(func=cmd_correlate)

    p = sub.add_parser(
        "report", help="a post-mortem draft for one incident",
        description="Draft a post-mortem from the store: timeline, hosts involved, evidence, "
                    "conclusion, actions and similar past incidents.")
    p.add_argument("incident", help="incident id, a unique prefix of one, or 'latest'")
    p.add_argument("--format", choices=("md", "json"), default="md",
                   help="Markdown (default) or JSON")
    p.add_argument("--include-simulated", action="store_true",
                   help="'latest' and the similar past incidents may be simulated ones "
                        "(replayed scenarios), which are left out by default")
    add_store_options(p, pooled=True)
    p.set_defaults(func=cmd_report)
