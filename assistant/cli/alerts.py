"""``diag run --alert FILE|-`` (an Alertmanager webhook payload picks the runbook, the hosts
and the window) and ``diag alerts serve`` (Alertmanager's webhook receiver: one read-only
``--auto`` walk per new alert group, recorded in the store): docs/monitoring.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .common import EXIT_OK, UsageError


def apply_alert(args: argparse.Namespace) -> None:
    """Fill the run's runbook, hosts and window from the payload (what the command line gives
    itself wins); the walk is --auto: nobody is there to answer."""
    from assistant.monitoring.alerts import AlertError, parse

    try:
        raw = (sys.stdin.buffer.read() if args.alert == "-"
               else Path(args.alert).read_bytes())
    except OSError as exc:
        raise UsageError(f"--alert {args.alert}: {exc.strerror or exc}") from None
    try:
        alert = parse(raw)
    except AlertError as exc:
        raise UsageError(f"--alert {args.alert}: {exc}") from None
    if not args.runbook and not args.resume:
        args.runbook = alert.runbook
    if not (args.hosts or args.inventory or getattr(args, "job", None) or args.scenario):
        args.hosts = ",".join(alert.hosts)
    if alert.start is not None and not (args.since or args.window_from):
        args.window_from = str(alert.start)
    args.auto = True
    print(f"diag: alert {', '.join(alert.alerts) or '(unnamed)'} ({alert.status}): runbook "
          f"{args.runbook} on {args.hosts}", file=sys.stderr)


def add_alert_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--alert", metavar="FILE|-",
                        help="an Alertmanager webhook payload (version 4) picks the runbook "
                             "(alert name -> runbook map), the hosts (Hostname/instance/node/"
                             "host labels) and the window; implies --auto")


def cmd_serve(args: argparse.Namespace) -> int:
    import os
    import subprocess
    import tempfile

    from assistant.monitoring.webhook import AlertReceiver

    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--listen takes HOST:PORT, got '{args.listen}'")
    try:
        token = Path(args.token_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UsageError(f"--token-file {args.token_file}: {exc.strerror or exc}") from None
    if len(token) < 16:
        raise UsageError(f"--token-file {args.token_file}: the token is under 16 characters")

    def say(line: str) -> None:
        print(f"diag: {line}", file=sys.stderr, flush=True)

    def walk(alert: Any, body: bytes) -> None:
        with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as f:
            f.write(body)
        command = [sys.executable, "-m", "assistant.cli", "run", "--alert", f.name, "--auto",
                   "--json", *(["--db", args.db] if args.db else []),
                   *(["--prometheus", args.prometheus] if args.prometheus else []),
                   *(["--inventory", args.inventory] if args.inventory else [])]
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=args.walk_timeout, stdin=subprocess.DEVNULL)
        finally:
            os.unlink(f.name)
        last = (done.stderr.strip().splitlines() or [""])
        incident = next((x for x in last if x.startswith("diag: incident")), "")
        say(f"alerts: walked {alert.runbook} on {','.join(alert.hosts)} (exit "
            f"{done.returncode}){'; ' + incident[6:] if incident else ''}")

    try:
        receiver = AlertReceiver(host, int(port), token, walk, say, args.queue)
    except OSError as exc:
        raise UsageError(f"--listen {args.listen}: {exc.strerror or exc}") from None
    bound = receiver.address
    say(f"alerts: listening on http://{bound[0]}:{bound[1]}/ (Alertmanager webhook, bearer "
        "token required); read-only walks, never an action")
    try:
        receiver.serve_forever()
    except KeyboardInterrupt:
        receiver.shutdown()
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``alerts`` to diag's sub-command parser."""
    p = sub.add_parser("alerts", help="start walks from Alertmanager alerts",
                       description="Alertmanager alerts start diag walks (docs/monitoring.md).")
    asub = p.add_subparsers(dest="alerts_command", metavar="COMMAND", required=True)
    s = asub.add_parser("serve", help="receive Alertmanager's webhook; walk each new group",
                        description="Receive Alertmanager's webhook (version 4) and run one "
                                    "read-only --auto walk per new alert group (by group key), "
                                    "from a bounded queue, recorded in the store, so the "
                                    "incident is diagnosed when someone opens diag. Never runs "
                                    "an action.")
    s.add_argument("--listen", metavar="HOST:PORT", default="127.0.0.1:9097",
                   help="where to listen (default 127.0.0.1:9097)")
    s.add_argument("--token-file", metavar="FILE", required=True,
                   help="the bearer token Alertmanager sends (http_config.authorization."
                        "credentials_file on its side), 16 characters or more")
    s.add_argument("--queue", metavar="N", type=int, default=16,
                   help="alert groups waiting at most (default 16); more are refused (503)")
    s.add_argument("--walk-timeout", metavar="SECONDS", type=float, default=900,
                   help="one walk's limit (default 900)")
    s.add_argument("--db", metavar="PATH", help="the incident store")
    s.add_argument("--prometheus", metavar="URL", help="passed to each walk")
    s.add_argument("--inventory", metavar="FILE", help="passed to each walk")
    s.set_defaults(func=cmd_serve)
