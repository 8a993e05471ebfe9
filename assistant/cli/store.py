"""``diag store recover``: import the walks that were kept in a journal while the store could
not take them (locked by a long query, on a full disk, corrupt)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import DB_HELP, EXIT_OK, EXIT_USAGE, print_json


def cmd_store_recover(args: argparse.Namespace) -> int:
    from assistant.store import Store
    from assistant.store.journal import (
        import_journal,
        journal_dir,
        pending_journals,
        refused_journals,
    )

    store = Store(args.db)
    journals = pending_journals(store.path)
    refused = refused_journals(store.path)
    results = [import_journal(store.write, path, store.path) for path in journals]
    failed = [r for r in results if r.error is not None]
    if args.json:
        print_json({"journal_dir": str(journal_dir(store.path)),
                    "imported": [{"session": r.session, "entries": r.entries}
                                 for r in results if r.error is None],
                    "failed": [{"session": r.session, "error": r.error} for r in failed],
                    "refused": refused})
    else:
        for why in refused:
            print(f"diag: not imported (another user could have written it): {why}",
                  file=sys.stderr)
        if not results and not refused:
            print(f"no journal waiting in {journal_dir(store.path)}: every walk is in the store")
        for r in results:
            if r.error is None:
                print(f"session {r.session}: {r.entries} entries imported into {store.path}")
            else:
                print(f"diag: session {r.session}: not imported, the journal is kept: {r.error}",
                      file=sys.stderr)
    return EXIT_USAGE if failed or refused else EXIT_OK


def register(sub: Any) -> None:
    """Add ``store recover`` to diag's sub-command parser."""
    group = sub.add_parser(
        "store", help="look after the store file (recover journalled walks)",
        description="Look after the incident store file.").add_subparsers(
            dest="store_command", metavar="COMMAND", required=True)
    p = group.add_parser(
        "recover", help="import walks kept in the journal while the store refused writes",
        description="A walk whose store could not be written (held by a long query, on a "
                    "full disk, corrupt) keeps its steps in a journal beside the store "
                    "(STORE.journal/SESSION.jsonl). This imports every waiting journal into "
                    "the store, in order, and removes each one imported; one that still "
                    "cannot be imported is kept and named (exit 2).")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--db", metavar="PATH", help=DB_HELP)
    p.set_defaults(func=cmd_store_recover)
