"""``diag runbooks list | show | validate | graph | rehearse``: the runbooks as a list, a tree,
a check, a diagram, and their rehearsal cases run without pytest. Every command takes a
runbook id on the search path (``--runbooks DIR``, ``$DIAG_RUNBOOKS``,
``~/.config/diag/runbooks``, the shipped ones) or a file (``./team-runbook.yaml``)."""

from __future__ import annotations

import os
import sys

from .common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_search_options,
    find_runbook,
    print_json,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    import argparse
    from typing import Any


def _source(path: str | None) -> str:
    """Where a runbook came from: "shipped", or the file a team put on the search path."""
    from assistant.locations import shipped_dir

    shipped = os.path.realpath(shipped_dir("runbooks"))
    if path is None or os.path.realpath(os.path.dirname(path)) == shipped:
        return "shipped"
    return path


def cmd_runbooks_list(args: argparse.Namespace) -> int:
    """The list comes from ``library.catalogue()``: on a warm start one small cached entry,
    not every runbook's model."""
    from assistant.runbook.library import catalogue

    runbooks = catalogue()
    if args.json:
        print_json({"runbooks": [{"id": r.id, "title": r.title, "summary": r.summary,
                                   "tags": list(r.tags), "nodes": r.nodes,
                                   "source": _source(r.path)} for r in runbooks]})
        return EXIT_OK
    width = max(len(r.id) for r in runbooks)
    for runbook in runbooks:
        source = _source(runbook.path)
        print(f"{runbook.id:<{width}}  {runbook.title}"
              + (f"  [{source}]" if source != "shipped" else ""))
    return EXIT_OK


def cmd_runbooks_show(args: argparse.Namespace) -> int:
    from assistant.runbook.render import outline

    sys.stdout.write(outline(find_runbook(args.id)))
    return EXIT_OK


def cmd_runbooks_validate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from assistant.runbook.check_evidence import warnings
    from assistant.runbook.library import runbook_files, validate_file

    paths = [Path(p) for p in args.paths] if args.paths else None
    files = runbook_files(paths)
    if not files:
        raise UsageError("no runbook files found")
    # A file named on the command line is walked by path, so its id need not be its file name;
    # files found in a directory are looked up by file name, so theirs must be.
    explicit = {Path(p) for p in args.paths or () if Path(p).is_file()}
    failed = 0
    for path in files:
        if not path.exists():
            print(f"{path}: no such file", file=sys.stderr)
            failed += 1
            continue
        runbook, issues = validate_file(path, named_by_file=path not in explicit)
        for issue in issues:
            print(issue, file=sys.stderr)
        if issues or runbook is None:
            failed += 1
        else:
            for line in warnings(runbook, str(path)):
                print(line, file=sys.stderr)
            print(f"{path}: ok")
    if failed:
        print(f"{failed} of {len(files)} runbook file(s) invalid", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def cmd_runbooks_rehearse(args: argparse.Namespace) -> int:
    """Walk every case of rehearsal files on their recorded data: ok / FAIL per case."""
    from pathlib import Path

    from assistant.runbook.library import RunbookError
    from assistant.runbook.rehearsal import RehearsalError, load_cases, rehearse

    failed = total = 0
    for name in args.files:
        try:
            cases = load_cases(Path(name))
        except RehearsalError as exc:
            raise UsageError(str(exc)) from None
        for case in cases:
            total += 1
            try:
                passed, detail = rehearse(case)
            except KeyError as exc:
                raise UsageError(f"{name}: {exc.args[0]}") from None
            except RunbookError as exc:
                raise UsageError(f"{name}: the runbook is invalid:\n{exc}") from None
            except Exception as exc:  # a bad answer or an unknown probe in the case
                passed, detail = False, f"{type(exc).__name__}: {exc}"
            failed += not passed
            print(f"{'ok  ' if passed else 'FAIL'}  {name}: {case.name}: {detail}")
    print(f"{total - failed} of {total} case(s) passed", file=sys.stderr)
    return EXIT_FINDINGS if failed else EXIT_OK


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
    p = rsub.add_parser("list", help="list the runbooks on the search path",
                        description="List the runbooks with their titles: the shipped ones "
                                    "and a team's (--runbooks DIR, $DIAG_RUNBOOKS, "
                                    "~/.config/diag/runbooks), each marked with its file.")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_search_options(p)
    p.set_defaults(func=cmd_runbooks_list)
    p = rsub.add_parser("show", help="print a runbook as an indented tree",
                        description="Print a runbook's decision tree: steps, branches and "
                                    "conclusions with their causes and fixes.")
    p.add_argument("id", help="runbook id, e.g. hang, or a file: ./team-runbook.yaml")
    add_search_options(p)
    p.set_defaults(func=cmd_runbooks_show)
    p = rsub.add_parser("validate", help="check runbook files (default: the shipped ones)",
                        description="Validate runbooks in layers (YAML, schema, references, "
                                    "conditions, graph). Every problem is printed as "
                                    "file:line:col with its node; exit 2 if any.")
    p.add_argument("paths", nargs="*", help="runbook files or directories (default: every "
                                            "runbook on the search path)")
    add_search_options(p)
    p.set_defaults(func=cmd_runbooks_validate)
    p = rsub.add_parser("graph", help="print a runbook as a DOT or Mermaid diagram",
                        description="Print a runbook's graph for Graphviz (dot) or Mermaid.")
    p.add_argument("id", help="runbook id, or a file: ./team-runbook.yaml")
    p.add_argument("--format", choices=("dot", "mermaid"), default="dot")
    add_search_options(p)
    p.set_defaults(func=cmd_runbooks_graph)
    p = rsub.add_parser("rehearse", help="walk a runbook's rehearsal cases (no hosts, no "
                                         "pytest)",
                        description="Walk each case of rehearsal files (recorded probe "
                                    "results and answers, docs/runbook-format.md) through its "
                                    "runbook and check the conclusion (and path) it expects. "
                                    "Prints ok/FAIL per case; exit 1 if any fails, 2 for a "
                                    "file that cannot be used.")
    p.add_argument("files", nargs="+", metavar="FILE", help="rehearsal files")
    add_search_options(p)
    p.set_defaults(func=cmd_runbooks_rehearse)
