"""``diag`` (the TUI), ``diag --demo`` and ``diag drill``: the front ends that open Textual."""

from __future__ import annotations

from .common import UsageError, add_search_options

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    import argparse
    from typing import Any


def cmd_tui(args: argparse.Namespace) -> int:
    """`diag` alone opens the TUI; `diag --demo` opens it over the built-in demo incident;
    `diag --resume SESSION` opens a recorded walk where it stopped."""
    from assistant.tui.app import run_app

    resume = None
    if args.tui_resume:
        from assistant.store import Store, StoreError
        from assistant.walks import load_saved

        from .run import saved_runbook

        try:
            resume = load_saved(Store(), args.tui_resume)  # refuses concluded sessions
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        saved_runbook(*resume)  # a runbook that is gone: one line now, not in the TUI
    return run_app(demo=args.demo, hosts=args.tui_hosts, inventory=args.tui_inventory,
                   scenario=args.tui_scenario, job=args.tui_job, resume=resume,
                   monitoring=_monitoring(args))


def _monitoring(args: argparse.Namespace) -> Any:
    """The TUI walks' monitoring step, when a Prometheus is configured (--prometheus,
    $DIAG_PROMETHEUS_URL or the config file); a demo or a scenario reads none."""
    import argparse as _argparse

    from .hostopts import monitoring_plan

    as_run = _argparse.Namespace(
        prometheus=args.tui_prometheus, prometheus_timeout=args.tui_prometheus_timeout,
        since=args.tui_since, window_from=args.tui_window_from, window_to=args.tui_window_to,
        scenario=args.tui_scenario or (True if args.demo else None))
    plan = monitoring_plan(as_run)
    return plan if plan is not None and plan.step is not None else None


def cmd_drill(args: argparse.Namespace) -> int:
    """A simulated incident in the TUI: the symptom only, walk it, get scored."""
    from assistant.fleet.scenario import ScenarioError
    from assistant.tui.app import run_app

    try:
        return run_app(drill=args.scenario)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def add_options(parser: argparse.ArgumentParser) -> None:
    """The top-level options that say what the TUI's walks reach (when no command is given)."""
    group = parser.add_argument_group("the TUI's hosts (when no command is given)")
    group.add_argument("--hosts", dest="tui_hosts", metavar="EXPR",
                       help="hosts the TUI's walks reach over SSH: gpu[001-016]")
    group.add_argument("--inventory", dest="tui_inventory", metavar="FILE", help="inventory YAML")
    group.add_argument("--scenario", dest="tui_scenario", metavar="NAME",
                       help="replay a simulated incident")
    group.add_argument("--job", dest="tui_job", metavar="ID",
                       help="a Slurm job: its nodes are the hosts, its context is recorded")
    group.add_argument("--prometheus", dest="tui_prometheus", metavar="URL",
                       help="the Prometheus each walk reads its incident window from "
                            "(docs/monitoring.md; default $DIAG_PROMETHEUS_URL or "
                            "~/.config/diag/monitoring.yaml)")
    group.add_argument("--prometheus-timeout", dest="tui_prometheus_timeout", type=float,
                       metavar="SECONDS", help="per query (default 10)")
    group.add_argument("--since", dest="tui_since", metavar="AGE",
                       help="the incident window: the last AGE (30m, 2h, 1d; default 2h, or "
                            "since --job started)")
    group.add_argument("--from", dest="tui_window_from", metavar="TIME",
                       help="the incident window's start (2026-01-01T02:00:00Z or unix seconds)")
    group.add_argument("--to", dest="tui_window_to", metavar="TIME",
                       help="the incident window's end (default now)")
    group.add_argument("--resume", dest="tui_resume", metavar="SESSION",
                       help="open a recorded walk (id or unique prefix) where it stopped, over "
                            "the hosts it used (like `diag run --resume`, in the TUI)")


def register(sub: Any) -> None:
    """Add ``drill`` to diag's sub-command parser."""
    p = sub.add_parser("drill", help="walk a simulated incident in the TUI and get scored",
                       description="Training: a simulated incident from fixtures/scenarios shows "
                                   "only its symptom; pick the runbook, walk it, and get a score "
                                   "(right conclusion, steps vs the shortest path, hints, time). "
                                   "Scores are kept in the store.")
    p.add_argument("scenario", nargs="?", default="",
                   help="scenario name (default: a random one you have not drilled yet)")
    add_search_options(p)
    p.set_defaults(func=cmd_drill)
