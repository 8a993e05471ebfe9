"""What every command shares: exit codes, the one-line usage error, JSON output, lookups."""

from __future__ import annotations

import os
import sys

# argparse, json, pathlib and typing are imported where they are used: a plain `diag match`
# or `diag runbooks list` needs none of them (see cli.fast_args).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3

DB_HELP = ("the store file (default: $DIAG_DB, else $XDG_DATA_HOME/diag/diag.duckdb, "
           "i.e. ~/.local/share/diag/diag.duckdb)")


class UsageError(Exception):
    """Bad usage or bad input: reported in one line on stderr, exit 2."""


def fail(message: str) -> int:
    print(f"diag: {message}", file=sys.stderr)
    return EXIT_USAGE


def print_json(data: Any) -> None:
    """One JSON document on stdout; characters a terminal would obey are ``\\u`` escapes."""
    import json

    from assistant.hosttext import inert_json

    sys.stdout.write(inert_json(json.dumps(data, indent=2, ensure_ascii=False, default=str)))
    sys.stdout.write("\n")


def find_runbook(runbook_id: str) -> Any:
    """A runbook by id on the search path, or by file (``./team-runbook.yaml``). A team's file
    used in place of a shipped runbook of the same id is named on stderr, once."""
    from assistant.runbook.library import get_runbook, is_path, shadowed

    try:
        runbook = get_runbook(runbook_id)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    hidden = None if is_path(runbook_id) else shadowed(runbook_id)
    if hidden:
        print(f"diag: runbook '{runbook_id}': using {hidden[0]} instead of the shipped "
              f"{hidden[1]}", file=sys.stderr)
    return runbook


RUNBOOKS_HELP = ("also look for runbooks in DIR, before $DIAG_RUNBOOKS, ~/.config/diag/runbooks "
                 "and the shipped ones (repeatable; a file named like a shipped runbook "
                 "overrides it)")
KB_HELP = ("also look for KB articles in DIR, before $DIAG_KB, ~/.config/diag/kb and the "
           "shipped ones (repeatable)")


def add_search_options(parser: argparse.ArgumentParser, top: bool = False) -> None:
    """``--runbooks DIR`` and ``--kb DIR``: on the top level (``diag --runbooks DIR ...``) and
    on the commands that read runbooks or articles (``diag run ... --runbooks DIR``)."""
    import argparse

    default: Any = [] if top else argparse.SUPPRESS
    parser.add_argument("--runbooks", dest="runbook_dirs", action="append", metavar="DIR",
                        default=default, help=RUNBOOKS_HELP)
    parser.add_argument("--kb", dest="kb_dirs", action="append", metavar="DIR",
                        default=default, help=KB_HELP)


def use_search_options(args: argparse.Namespace) -> None:
    """Put --runbooks / --kb directories first on the search paths (each must exist)."""
    from assistant import locations

    for kind, dirs in (("runbooks", getattr(args, "runbook_dirs", [])),
                       ("kb", getattr(args, "kb_dirs", []))):
        for directory in dirs:
            if not os.path.isdir(os.path.expanduser(directory)):
                raise UsageError(f"--{kind} {directory}: no such directory")
        locations.use_dirs(kind, dirs)


def parse_pairs(pairs: Sequence[str], what: str) -> dict[str, str]:
    result = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"{what} takes KEY=VALUE, got '{pair}'")
        result[key] = value
    return result


FROM_HELP = ("read a team's pooled history instead of the store: many operators' `diag export "
             "--parquet` directories — a directory of them, or a glob such as "
             "'/shared/diag/*' (rows exported twice count once)")


def add_store_options(parser: argparse.ArgumentParser, pooled: bool = False) -> None:
    """--db (and, for the reading commands, --from)."""
    if pooled:
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--db", metavar="PATH", help=DB_HELP)
        where.add_argument("--from", dest="pool", metavar="PATH", help=FROM_HELP)
    else:
        parser.add_argument("--db", metavar="PATH", help=DB_HELP)


def open_store(args: argparse.Namespace) -> Any:
    """The store to read or write: --db / $DIAG_DB / the default, or --from's pooled exports
    (read-only, with the same ``read`` as a store)."""
    from assistant.store import Store, StoreError

    if getattr(args, "pool", None):
        from assistant.store.pool import Pool

        try:
            pool = Pool(args.pool)
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        from assistant.store.exportinfo import newer_exports

        # exports a newer diag wrote: read as far as this diag knows them, each named with
        # what is left out
        for line in newer_exports(pool.exports):
            print(f"diag: {line}", file=sys.stderr)
        return pool
    return Store(args.db)


def parse_since(text: str | None) -> Any:
    from assistant.store.history import parse_since

    return parse_since(text)
