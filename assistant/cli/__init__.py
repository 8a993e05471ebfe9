"""The command line: every sub-command is a thin front end over the core.

One module per command group (``runbooks``, ``lookup``, ``run``, ``history``, ``query``,
``incidents``, ``store``, ``tui``), each adding its commands with ``register(sub)``. Heavy modules
(textual, duckdb, paramiko, networkx, jsonschema) are imported inside the commands that need
them, so ``diag --help`` and ``diag match`` start fast. stdout carries results, stderr
diagnostics. Exit codes (DESIGN.md): 0 done and healthy, 1 findings of severity error or worse,
2 bad usage or bad input, 3 hosts could not be probed, 4 a walk stopped on a question, 130
interrupted.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

from . import tui
from .common import EXIT_OK, EXIT_USAGE, UsageError, use_search_options

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

__all__ = ["build_parser", "fast_args", "main"]

GROUPS = ("runbooks", "lookup", "run", "accept", "tui", "history", "incidents", "query",
          "store", "monitoring", "alerts")
# Which group module adds each command: `diag match ...` imports and registers only `lookup`
# (argparse's set-up of every command, with a gettext look-up per help string, and the import
# of every group were a third of a start). A command missing here still works: the whole
# parser is built; tests/cli keeps this map equal to what the groups register.
COMMAND_GROUPS = {
    "runbooks": "runbooks", "match": "lookup", "kb": "lookup", "parse": "lookup",
    "run": "run", "probe": "run", "drill": "tui", "history": "history",
    "correlate": "history", "report": "history", "incident": "incidents", "bundle": "incidents",
    "query": "query", "export": "query", "import": "query", "store": "store",
    "accept": "accept", "watch": "accept", "monitoring": "monitoring",
    "alerts": "alerts",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """diag's parser; with *command* (a name of COMMAND_GROUPS), only that command's group is
    registered, enough to parse a command line that starts with it."""
    import argparse
    import importlib

    from .common import add_search_options

    parser = argparse.ArgumentParser(
        prog="diag",
        description="Troubleshooting assistant and runbook engine for GPU training clusters: "
                    "match a symptom to a runbook, walk it, read the knowledge base. Without a "
                    "command, opens the TUI (--demo: over a simulated incident).",
        epilog="Exit codes: 0 healthy, 1 findings of severity error or worse, 2 bad usage or "
               "input, 3 hosts could not be probed (or no host's output could be read), 4 the "
               "walk stopped on a question it could not answer (the resume line is printed), "
               "130 interrupted (the session is kept; the resume line is printed).")
    parser.add_argument("--version", action=_version_action(), nargs=0,
                        default=argparse.SUPPRESS,
                        help="show diag's version and its store schema version, then exit")
    parser.add_argument("--demo", action="store_true",
                        help="open the TUI over a simulated incident (no SSH needed)")
    tui.add_options(parser)
    add_search_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    names = (COMMAND_GROUPS[command],) if command in COMMAND_GROUPS else GROUPS
    for name in names:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def _version_action() -> type[argparse.Action]:
    """--version, worked out only when asked (the store's schema loads DuckDB); argparse is
    imported only when a parser is built (a warm `diag match` never does)."""
    import argparse

    class VersionAction(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                     values: Any, option_string: str | None = None) -> None:
            parser._print_message(_version() + "\n", sys.stdout)
            parser.exit()

    return VersionAction


def _version() -> str:
    from assistant import __version__
    from assistant.store.schema import CURRENT_VERSION

    return f"diag {__version__} (store schema version {CURRENT_VERSION})"


def _top_defaults() -> dict[str, Any]:
    """What argparse leaves in the namespace for the top-level options when none is given (the
    parser's own defaults: tests/test_cli.py keeps the two equal)."""
    return {"demo": False, "tui_hosts": None, "tui_inventory": None, "tui_scenario": None,
            "tui_job": None, "tui_resume": None, "tui_prometheus": None,
            "tui_prometheus_timeout": None, "tui_since": None, "tui_window_from": None,
            "tui_window_to": None, "runbook_dirs": [], "kb_dirs": []}


def fast_args(argv: Sequence[str]) -> Any:
    """The namespace argparse would build for the two commands an operator runs most, in their
    plain form (``diag match WORDS...``, ``diag runbooks list``), or None for anything else.

    Importing argparse and building even one group's parsers was a fifth of such a start. Only
    command lines with no option at all (no word starting with ``-``: no ``--help``, no
    ``--json``, no ``-`` for stdin) take this path, so every option, every error message and
    every help text still comes from argparse; the tests compare this namespace with
    argparse's for the same command lines."""
    if any(word.startswith("-") for word in argv):
        return None
    if len(argv) >= 2 and argv[0] == "match":
        from .lookup import cmd_match

        return SimpleNamespace(**_top_defaults(), command="match", text=list(argv[1:]),
                               json=False, limit=8, func=cmd_match)
    if list(argv) == ["runbooks", "list"]:
        from .runbooks import cmd_runbooks_list

        return SimpleNamespace(**_top_defaults(), command="runbooks", runbooks_command="list",
                               json=False, func=cmd_runbooks_list)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = fast_args(argv)
    if args is None:
        args = build_parser(argv[0] if argv else None).parse_args(argv)
    if not getattr(args, "func", None):
        args.func = tui.cmd_tui
    if args.func is tui.cmd_tui:  # the TUI owns the terminal; its text goes through safe_text
        return _run(args)
    # Host text reaches stdout and stderr on many paths (progress, findings, tables, reports,
    # errors): every write is made inert here, once, so none can pass a raw escape.
    from assistant.hosttext import InertStream

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = InertStream(out), InertStream(err)
    try:
        code = _run(args)
        try:  # what is still buffered is written now: a full disk shows here, not at exit
            sys.stdout.flush()
        except OSError as exc:
            return _output_failed(exc)
        except ValueError:  # stdout closed by the command: nothing is left to write
            pass
        return code
    finally:
        sys.stdout, sys.stderr = out, err


def _run(args: Any) -> int:
    try:
        use_search_options(args)
        return int(args.func(args))
    except UsageError as exc:
        print(f"diag: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("diag: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # never a traceback for a user; DIAG_DEBUG=1 shows it
        if isinstance(exc, OSError) and exc is getattr(sys.stdout, "failed", None):
            return _output_failed(exc)
        if os.environ.get("DIAG_DEBUG"):
            raise
        from assistant.runbook.library import RunbookError

        if isinstance(exc, RunbookError):
            print(f"diag: invalid runbook:\n{exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"diag: internal error: {type(exc).__name__}: {exc} "
              "(set DIAG_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_USAGE


def _output_failed(exc: OSError) -> int:
    """stdout could not take the output. A reader that went away (``diag ... | head``) is the
    usual way to stop reading: quiet, exit 0. Anything else (a full disk: ``> /dev/full``) is
    one line and exit 2, not an "internal error". Either way stdout is pointed at /dev/null, so
    what is still buffered cannot fail again when Python flushes it on the way out (which
    printed "Exception ignored ..." and exited 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind it (io.UnsupportedOperation)
        pass
    if isinstance(exc, BrokenPipeError):
        return EXIT_OK
    print(f"diag: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_USAGE
