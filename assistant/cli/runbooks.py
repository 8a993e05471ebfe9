"""``diag runbooks list | show | validate | graph``: the runbooks as a list, a tree, a check,
a diagram."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .common import EXIT_OK, EXIT_USAGE, UsageError, find_runbook, print_json


def cmd_runbooks_list(args: argparse.Namespace) -> int:
    from assistant.runbook.library import all_runbooks

    runbooks = all_runbooks()
    if args.json:
        print_json({"runbooks": [{"id": r.id, "title": r.title, "summary": r.summary,
                                   "tags": list(r.tags), "nodes": len(r.nodes)}
                                  for r in runbooks]})
        return EXIT_OK
    width = max(len(r.id) for r in runbooks)
    for runbook in runbooks:
        print(f"{runbook.id:<{width}}  {runbook.title}")
    return EXIT_OK


def cmd_runbooks_show(args: argparse.Namespace) -> int:
    from assistant.runbook.render import outline

    sys.stdout.write(outline(find_runbook(args.id)))
    return EXIT_OK


def cmd_runbooks_validate(args: argparse.Namespace) -> int:
    from assistant.runbook.library import runbook_files, validate_file

    paths = [Path(p) for p in args.paths] if args.paths else None
    files = runbook_files(paths)
    if not files:
        raise UsageError("no runbook files found")
    failed = 0
    for path in files:
        if not path.exists():
            print(f"{path}: no such file", file=sys.stderr)
            failed += 1
            continue
        _, issues = validate_file(path)
        for issue in issues:
            print(issue, file=sys.stderr)
        if issues:
            failed += 1
        else:
            print(f"{path}: ok")
    if failed:
        print(f"{failed} of {len(files)} runbook file(s) invalid", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def cmd_runbooks_graph(args: argparse.Namespace) -> int:
    from assistant.runbook.render import to_dot, to_mermaid

    runbook = find_runbook(args.id)
    sys.stdout.write(to_dot(runbook) if args.format == "dot" else to_mermaid(runbook))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``runbooks`` and its actions to diag's sub-command parser."""
    runbooks = sub.add_parser("runbooks", help="list, show, validate and draw runbooks",
                              description="Work with the decision-tree runbooks.")
    rsub = runbooks.add_subparsers(dest="runbooks_command", metavar="ACTION", required=True)
    p = rsub.add_parser("list", help="list the shipped runbooks",
                        description="List the shipped runbooks with their titles.")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_runbooks_list)
    p = rsub.add_parser("show", help="print a runbook as an indented tree",
                        description="Print a runbook's decision tree: steps, branches and "
                                    "conclusions with their causes and fixes.")
    p.add_argument("id", help="runbook id, e.g. hang")
    p.set_defaults(func=cmd_runbooks_show)
    p = rsub.add_parser("validate", help="check runbook files (default: the shipped ones)",
                        description="Validate runbooks in layers (YAML, schema, references, "
                                    "conditions, graph). Every problem is printed as "
                                    "file:line:col with its node; exit 2 if any.")
    p.add_argument("paths", nargs="*", help="runbook files or directories")
    p.set_defaults(func=cmd_runbooks_validate)
    p = rsub.add_parser("graph", help="print a runbook as a DOT or Mermaid diagram",
                        description="Print a runbook's graph for Graphviz (dot) or Mermaid.")
    p.add_argument("id", help="runbook id")
    p.add_argument("--format", choices=("dot", "mermaid"), default="dot")
    p.set_defaults(func=cmd_runbooks_graph)
