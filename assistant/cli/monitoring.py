"""``diag monitoring check`` (what the configured Prometheus holds for diag) and ``diag
monitoring signatures`` (the metric signatures, validated): docs/monitoring.md."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import EXIT_OK, EXIT_UNREACHABLE, UsageError

PROM_HELP = ("the Prometheus to read (default: $DIAG_PROMETHEUS_URL, else prometheus.url in "
             "~/.config/diag/monitoring.yaml); credentials and the CA file come from that file")


def add_prometheus_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prometheus", metavar="URL", help=PROM_HELP)
    parser.add_argument("--prometheus-timeout", metavar="SECONDS", type=float,
                        help="per query (default 10, or timeout in the config file)")


def add_window_options(parser: argparse.ArgumentParser) -> None:
    """--prometheus and the incident window, for the commands that walk a runbook."""
    g = parser.add_argument_group("monitoring (docs/monitoring.md)")
    g.add_argument("--prometheus", metavar="URL", help=PROM_HELP)
    g.add_argument("--prometheus-timeout", metavar="SECONDS", type=float,
                   help="per query (default 10, or timeout in the config file)")
    g.add_argument("--since", metavar="AGE", default=None,
                   help="the incident window: the last AGE (30m, 2h, 1d; default 2h)")
    g.add_argument("--from", dest="window_from", metavar="TIME",
                   help="the incident window's start (2026-01-01T02:00:00Z or unix seconds)")
    g.add_argument("--to", dest="window_to", metavar="TIME",
                   help="the incident window's end (default now)")


AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_age(text: str) -> float:
    unit = AGE_UNITS.get(text[-1:])
    try:
        value = float(text[:-1]) * unit if unit else float(text)
    except ValueError:
        value = -1
    if value <= 0:
        raise UsageError(f"--since: '{text}' is not an age (30m, 2h, 1d)")
    return value


def window_bounds(args: argparse.Namespace) -> tuple[float, float | None, float | None]:
    """(since, start, end) of the incident window from --since / --from / --to."""
    if args.since and args.window_from:
        raise UsageError("--since and --from both give the window's start: use one")
    since = parse_age(args.since) if args.since else 2 * 3600.0
    start = parse_time(args.window_from, "--from") if args.window_from else None
    end = parse_time(args.window_to, "--to") if args.window_to else None
    if start is not None and end is not None and start >= end:
        raise UsageError("--from must be before --to")
    return since, start, end


def prom_config(args: argparse.Namespace) -> Any:
    from assistant.monitoring.config import ConfigError, resolve

    try:
        return resolve(args.prometheus, timeout=args.prometheus_timeout)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def parse_time(text: str, what: str) -> float:
    """An RFC 3339 time (2026-01-01T02:10:00Z) or unix seconds."""
    from datetime import datetime

    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise UsageError(f"{what}: '{text}' is not a time (2026-01-01T02:10:00Z or unix "
                         "seconds)") from None


def cmd_check(args: argparse.Namespace) -> int:
    from assistant.monitoring.check import check
    from assistant.monitoring.client import PromClient, PromError

    from .common import print_json

    config = prom_config(args)
    if config is None:
        raise UsageError("no Prometheus configured: --prometheus URL, $DIAG_PROMETHEUS_URL or "
                         "prometheus.url in ~/.config/diag/monitoring.yaml")
    at = parse_time(args.at, "--at") if args.at else None
    try:
        with PromClient(config) as client:
            report = check(client, config.host_label, at=at)
    except PromError as exc:
        print(f"diag: monitoring: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.json:
        print_json(report.as_json())
        return EXIT_OK
    print(f"Prometheus {report.version or '(version unknown)'} at {report.url} ({config.source})")
    print(f"scrape interval: {report.scrape_interval or 'unknown'}"
          + "".join(f"; {job} {iv}" for job, iv in sorted(report.job_intervals.items())
                    if iv != report.scrape_interval))
    for name, state in report.exporters.items():
        if not state.metrics:
            print(f"{name}: no metrics")
            continue
        label = (f"hosts by '{state.host_label}' ({state.hosts})" if state.host_label
                 else "no host label")
        print(f"{name}: {len(state.metrics)} metrics, {label}"
              + (f", {state.generation}" if state.generation else ""))
    for problem in report.problems:
        print(f"diag: monitoring: {problem}", file=sys.stderr)
    return EXIT_OK


def cmd_signatures(args: argparse.Namespace) -> int:
    from assistant.monitoring.signatures import SignatureError, load

    from .common import print_json

    try:
        sigs = load()
    except SignatureError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json([s.__dict__ for s in sigs])
        return EXIT_OK
    for sig in sigs:
        print(f"{sig.id:36} {sig.exporter:14} {sig.metric} {sig.op} {sig.threshold:g}")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``monitoring`` to diag's sub-command parser."""
    p = sub.add_parser("monitoring", help="the Prometheus diag reads: check it, list signatures",
                       description="Evidence over time from the site's Prometheus "
                                   "(dcgm-exporter, node_exporter): docs/monitoring.md.")
    msub = p.add_subparsers(dest="monitoring_command", metavar="COMMAND", required=True)
    c = msub.add_parser("check", help="is Prometheus reachable; which exporters, host labels, "
                                      "scrape interval",
                        description="Ask the configured Prometheus what diag needs: its "
                                    "version, which exporters' metrics it holds (and their "
                                    "metric-name generation), which label names the host on "
                                    "each exporter's series, and the scrape interval. Exit 3 "
                                    "when it cannot be asked.")
    add_prometheus_options(c)
    c.add_argument("--at", metavar="TIME", help="look at this time instead of now")
    c.add_argument("--json", action="store_true", help="print one JSON document")
    c.set_defaults(func=cmd_check)
    s = msub.add_parser("signatures", help="list the metric signatures (validated)",
                        description="The metric signatures diag judges over an incident "
                                    "window (probes/faults/metrics/*.yaml), validated.")
    s.add_argument("--json", action="store_true", help="print one JSON document")
    s.set_defaults(func=cmd_signatures)
