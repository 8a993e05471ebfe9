"""``diag incident list | show | close | reopen | merge | tag`` and ``diag bundle``: incidents
managed as the unit, and one packed into a file for a hardware or network ticket.

A walk records itself in an incident (a new one, or the open one it plainly belongs to: see
``diag run --incident``); these commands are what an operator does afterwards — close one with
its root cause (which feeds time to resolve), reopen it, merge two that were one problem, tag
one with a ticket number. Results go to stdout; a store problem is one line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import (
    EXIT_OK,
    add_store_options,
    fail,
    open_store,
    parse_since,
    print_json,
)


def cmd_list(args: argparse.Namespace) -> int:
    from assistant.store import StoreError, StoreMissingError
    from assistant.store.history import cutoff
    from assistant.store.incidents import list_incidents
    from assistant.store.textfmt import table

    store = open_store(args)
    try:
        start = cutoff(parse_since(args.since))
        rows = store.read(lambda con: list_incidents(con, status=args.status, since=start,
                                                     tagged=args.tag, limit=args.limit,
                                                     simulated=args.include_simulated))
    except StoreMissingError as exc:
        if args.json:
            print_json({"store": str(store.path), "incidents": []})
        else:
            print(f"diag: {exc}", file=sys.stderr)
        return EXIT_OK
    except (StoreError, ValueError) as exc:
        return fail(str(exc))
    if args.json:
        print_json({"store": str(store.path), "incidents": rows})
        return EXIT_OK
    if not rows:
        print(f"no {'' if args.status == 'all' else args.status + ' '}incidents")
        return EXIT_OK
    from assistant.store.textfmt import culprit

    shown = [{**r, "runbooks": ",".join(r["runbooks"] or []), "tags": ",".join(r["tags"] or []),
              "operators": ",".join(r.get("operators") or []), "what": culprit(r)}
             for r in rows]
    print(table(shown, [("id", "incident"), ("status", "status"), ("opened", "opened (UTC)"),
                        ("last", "last walk (UTC)"), ("sessions", "walks"),
                        ("runbooks", "runbook", 16), ("operators", "operator", 16),
                        ("hosts", "hosts"), ("job_id", "job", 12), ("tags", "tags", 20),
                        ("what", "accused: root cause / title", 52)]))
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from assistant.store import StoreError
    from assistant.store.incidents import show
    from assistant.store.textfmt import duration, table, when

    store = open_store(args)
    try:
        inc = store.read(lambda con: show(con, args.incident, store.path))
    except StoreError as exc:
        return fail(str(exc))
    if args.json:
        print_json(inc)
        return EXIT_OK
    print(f"incident {inc['id']}: {inc['title']}")
    status = inc["status"] + (f" into {inc['merged_into']}" if inc["merged_into"] else "")
    if inc["closed"]:
        took = duration((inc["closed"] - inc["opened"]).total_seconds())
        status += f", closed {when(inc['closed'])} UTC by {inc['closed_by'] or '-'} ({took})"
    print(f"  status      {status}")
    print(f"  opened      {when(inc['opened'])} UTC")
    for key, label in (("job_id", "job"), ("root_cause", "root cause"),
                       ("conclusion", "conclusion")):
        print(f"  {label:<11} {inc[key] or '-'}")
    print(f"  tags        {', '.join(inc['tags'] or []) or '-'}")
    if inc["merged"]:
        print(f"  merged in   {', '.join(inc['merged'])}")
    print()
    print(table(inc["sessions"], [("id", "walk"), ("runbook", "runbook"),
                                  ("operator", "operator"), ("started", "started (UTC)"),
                                  ("status", "status"), ("hosts_n", "hosts"),
                                  ("outcome", "conclusion", 50)])
          if inc["sessions"] else "no walks")
    if inc["codes"]:
        print()
        print(table([{**c, "some": ", ".join(c["some"] or [])} for c in inc["codes"]],
                    [("code", "code", 28), ("severity", "severity"), ("hosts", "hosts"),
                     ("some", "e.g.", 50)]))
    return EXIT_OK


def _change(args: argparse.Namespace, what: str, change: Any) -> int:
    """Run one change in a write transaction and print the incident as it now is."""
    from assistant.store import StoreError, StoreMissingError

    store = open_store(args)
    if not store.exists():
        return fail(str(StoreMissingError(f"no incident store at {store.path} yet")))
    try:
        row = store.write(change)
    except StoreError as exc:
        return fail(str(exc))
    if args.json:
        print_json(row)
    else:
        cause = row["root_cause"] or "not established"
        print(f"incident {row['id']}: {what} (status {row['status']}; root cause: "
              f"{cause if len(cause) <= 90 else cause[:89] + '…'}; tags: "
              f"{', '.join(row['tags'] or []) or '-'})")
    return EXIT_OK


def cmd_action(args: argparse.Namespace) -> int:
    from assistant.store.db import current_operator
    from assistant.store.schema_v11 import record_action

    return _change(args, f"recorded {args.kind}", lambda con: record_action(
        con, args.incident, args.kind, args.text, current_operator()))


def cmd_close(args: argparse.Namespace) -> int:
    from assistant.store import current_operator
    from assistant.store.incidents import close

    return _change(args, "closed", lambda con: close(con, args.incident, args.cause,
                                                     current_operator()))


def cmd_reopen(args: argparse.Namespace) -> int:
    from assistant.store.incidents import reopen

    return _change(args, "reopened", lambda con: reopen(con, args.incident))


def cmd_merge(args: argparse.Namespace) -> int:
    from assistant.store.incidents import merge

    return _change(args, f"absorbed {args.absorb}",
                   lambda con: merge(con, args.keep, args.absorb))


def cmd_tag(args: argparse.Namespace) -> int:
    from assistant.store.incidents import tag

    if not args.tags and not args.remove:
        return fail("incident tag takes TAG ... and/or --remove TAG")
    return _change(args, "tagged", lambda con: tag(con, args.incident, args.tags,
                                                   args.remove))


def cmd_bundle(args: argparse.Namespace) -> int:
    import os
    import tempfile
    from pathlib import Path

    from assistant import __version__
    from assistant.store import StoreError
    from assistant.store.bundle import build

    if args.max_size <= 0:
        return fail("--max-size takes a size in MiB above 0")
    store = open_store(args)
    try:
        data, manifest = store.read(lambda con: build(
            con, args.incident, max_bytes=int(args.max_size * 1024 * 1024),
            version=__version__, path=str(store.path)))
    except StoreError as exc:
        return fail(str(exc))
    out = Path(args.output).expanduser()
    try:  # whole or not at all, and private: it names hosts and failures
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent or Path("."))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, out)
    except OSError as exc:
        return fail(f"cannot write {out}: {exc.strerror or exc}")
    left = manifest["omitted"]
    print(f"{out}: incident {manifest['incident']}, {len(manifest['files'])} file(s), "
          f"{manifest['bytes'] / 1024:.0f} KiB before compression, {len(data) / 1024:.0f} KiB "
          "written" + (f"; {len(left)} file(s) left out over the size bound (see "
                       "manifest.json)" if left else ""))
    return EXIT_OK


INCIDENT_ARG = ("incident", {"help": "incident id, a unique prefix, or 'latest'"})

# One row per action: name, one-line help, description, handler, its own arguments. Kept as a
# table so that every action gets --json and --db the same way.
ACTIONS: tuple[tuple[str, str, str, Any, tuple[tuple[Any, dict[str, Any]], ...]], ...] = (
    ("list", "incidents, newest first (open ones by default)",
     "List incidents newest first with their walks, runbooks, hosts, job, tags and root cause.",
     cmd_list, (
         ("--status", {"choices": ("open", "closed", "merged", "all"), "default": "open",
                       "help": "which incidents (default open)"}),
         ("--since", {"metavar": "AGE", "help": "only incidents opened in the last AGE"}),
         ("--tag", {"metavar": "TAG", "help": "only incidents with this tag"}),
         ("--limit", {"type": int, "default": 50, "metavar": "N",
                      "help": "at most N (default 50)"}),
         ("--include-simulated", {"action": "store_true",
                                  "help": "also list simulated incidents (replayed scenarios: "
                                          "--demo, --scenario), which are left out by "
                                          "default"}))),
    ("show", "one incident: status, root cause, walks, codes",
     "Show one incident: its status and root cause, who closed it, its walks and the finding "
     "codes they raised.", cmd_show, (INCIDENT_ARG,)),
    ("close", "close an incident with its root cause",
     "Close an incident. --cause states the root cause (else the one its walks concluded "
     "stays); the time from opened to closed feeds `diag correlate`'s time to resolve.",
     cmd_close, (INCIDENT_ARG,
                 ("--cause", {"metavar": "TEXT", "help": "the root cause, in words"}))),
    ("reopen", "open a closed incident again",
     "Open a closed incident again (the problem came back); new walks can join it.",
     cmd_reopen, (INCIDENT_ARG,)),
    ("merge", "merge incident B into A (one problem recorded twice)",
     "Move every walk of incident B into A; B stays, marked merged into A, so its id still "
     "leads somewhere.", cmd_merge, (
         ("keep", {"metavar": "A", "help": "the incident that stays"}),
         ("absorb", {"metavar": "B", "help": "the incident whose walks move into A"}))),
    ("action", "record something done outside diag (power cycle, RMA, vendor ticket)",
     "Record on an incident what was done about it outside diag — a power cycle, a reseat, an "
     "RMA, a vendor ticket — so the report's actions tell the whole story (text redacted).",
     cmd_action, (INCIDENT_ARG,
                   ("text", {"metavar": "TEXT", "help": "what was done, in words"}),
                   ("--kind", {"default": "other", "help": "power-cycle, reboot, reseat, "
                               "replace, rma, vendor-ticket, drain, resume or other "
                               "(default other)"}))),
    ("tag", "add or remove an incident's tags",
     "Add free labels to an incident (a ticket number, a team, 'vendor-rma'), or remove them.",
     cmd_tag, (INCIDENT_ARG,
               ("tags", {"nargs": "*", "metavar": "TAG", "help": "tags to add"}),
               ("--remove", {"action": "append", "default": [], "metavar": "TAG",
                             "help": "a tag to remove (repeatable)"}))),
)


def register(sub: Any) -> None:
    """Add ``incident`` (list, show, close, reopen, merge, tag) and ``bundle`` to diag's
    parser."""
    p = sub.add_parser(
        "incident", help="incidents: list, show, close with a root cause, reopen, merge, tag",
        description="Incidents group the walks spent on one problem. A new walk joins the "
                    "open incident of the same Slurm job, or of the same runbook on "
                    "overlapping hosts within a few hours (diag run --incident / "
                    "--new-incident / --join-window); these commands manage them after.")
    group = p.add_subparsers(dest="incident_command", metavar="ACTION", required=True)
    for name, short, description, handler, arguments in ACTIONS:
        q = group.add_parser(name, help=short, description=description)
        for flag, options in arguments:
            q.add_argument(flag, **options)
        q.add_argument("--json", action="store_true", help="print one JSON document")
        add_store_options(q, pooled=name in ("list", "show"))  # the others write
        q.set_defaults(func=handler)

    p = sub.add_parser(
        "bundle", help="pack an incident for a hardware or network ticket (.tar.gz)",
        description="Write what a vendor ticket needs, from the store: the report (Markdown "
                    "and JSON), the raw outputs behind each finding, the XID and link kernel "
                    "lines, nvidia-smi -q of the accused GPUs, versions, each walk's path and "
                    "actions, and a manifest. Bounded in size, byte-identical for the same "
                    "store, redacted again on the way out.")
    p.add_argument("incident", help="incident id, a unique prefix, or 'latest'")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the .tar.gz to write (mode 0600)")
    p.add_argument("--max-size", type=float, default=16.0, metavar="MIB",
                   help="at most this many MiB before compression (default 16); what does "
                        "not fit is named in the manifest")
    add_store_options(p, pooled=True)
    p.set_defaults(func=cmd_bundle)
