"""``diag match``, ``diag kb search | show`` and ``diag parse``: finding the right runbook,
article or facts for what the operator has in hand (a symptom, a log line, a saved output)."""

from __future__ import annotations

import sys

from .common import EXIT_FINDINGS, EXIT_OK, UsageError, add_search_options, print_json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    import argparse
    from typing import Any


def cmd_match(args: argparse.Namespace) -> int:
    """Rank runbooks and articles; exit 1 when no runbook matches, like grep finding nothing.

    Text that means nothing to diag gets no runbook at all rather than the least bad one: an
    engineer who is told "no runbook matches" and shown the list picks the right walk, one who
    is sent down a wrong walk loses the night. The KB articles that did match still print.
    """
    from assistant.match import match
    from assistant.runbook.library import catalogue

    text = " ".join(args.text) if args.text != ["-"] else sys.stdin.read()
    if not text.strip():
        raise UsageError("nothing to match: give a symptom or a log line")
    every = match(text, limit=10_000)
    results = every[: args.limit]
    # A runbook below the top *limit* articles still counts as a match.
    matched = any(r.type == "runbook" for r in every)
    runbooks = [] if matched else [{"id": rb.id, "title": rb.title} for rb in catalogue()]
    if args.json:
        print_json({"results": [r.to_dict() for r in results],
                    **({} if matched else {"runbooks": runbooks})})
        return EXIT_OK if matched else EXIT_FINDINGS
    for r in results:
        print(f"{r.score:5.1f}  {r.type:<7}  {r.id:<36}  {r.title}")
    if not matched:
        print("no runbook matches; the runbooks are:", file=sys.stderr)
        for rb in runbooks:
            print(f"  {rb['id']:<18}  {rb['title']}", file=sys.stderr)
        print("walk one with: diag run RUNBOOK --hosts ...", file=sys.stderr)
        return EXIT_FINDINGS
    return EXIT_OK


def cmd_kb_search(args: argparse.Namespace) -> int:
    from assistant.match import match

    results = [r for r in match(" ".join(args.text), limit=50) if r.type == "kb"][: args.limit]
    if args.json:
        print_json({"results": [r.to_dict() for r in results]})
        return EXIT_OK
    for r in results:
        print(f"{r.score:5.1f}  {r.id:<40}  {r.title}")
    return EXIT_OK


def cmd_kb_show(args: argparse.Namespace) -> int:
    from assistant.kb import get_article

    try:
        article = get_article(args.id)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    if args.json:
        print_json({"id": article.id, "title": article.title, "tags": list(article.tags),
                     "aliases": list(article.aliases), "body": article.body})
        return EXIT_OK
    print(f"# {article.title}\n")
    sys.stdout.write(article.body)
    return EXIT_OK


# A saved output of a node command is kilobytes to a few megabytes (the transports keep at most
# 4 MiB of a probe's output); a file far beyond that, or an endless stream, is refused after a
# bounded read instead of filling the operator's memory.
PARSE_LIMIT = 32 << 20


def _read_bounded(name: str) -> bytes:
    """At most PARSE_LIMIT bytes of FILE ('-': stdin); more is a usage error."""
    try:
        if name == "-":
            raw = sys.stdin.buffer.read(PARSE_LIMIT + 1)
        else:
            with open(name, "rb") as f:
                raw = f.read(PARSE_LIMIT + 1)
    except OSError as exc:
        raise UsageError(f"{name}: {exc.strerror}") from None
    if len(raw) > PARSE_LIMIT:
        raise UsageError(f"{name}: more than {PARSE_LIMIT >> 20} MiB; a saved output is far "
                         f"smaller: give the part that matters (e.g. tail -c 1M {name})")
    return raw


def _rank_logs(files: list[str]) -> dict[str, Any]:
    """Rank logs are read file by file within a memory bound (probes.rankfiles): 1,024 logs
    or one of gigabytes cost a few megabytes; a file that is not text is skipped and named."""
    from pathlib import Path

    from probes.rankfiles import analyse_files

    for name in files:
        if name != "-" and not Path(name).exists():
            raise UsageError(f"{name}: No such file or directory")
    facts = analyse_files(files, stdin=sys.stdin.buffer)
    skipped = facts.get("skipped_files") or []
    if not facts.get("lines_read"):
        if skipped and facts.get("skipped_total") == len(files):
            raise UsageError(f"{', '.join(files)}: {skipped[0]['why']}: no rank log to read")
        why = ("no ProcessGroupNCCL watchdog/progress line and no NCCL 'rank N nranks M' "
               "init line found")
        raise UsageError(f"{', '.join(files)}: not PyTorch/NCCL rank log output: {why}")
    for skip in skipped:
        print(f"diag: skipped {skip['path']}: {skip['why']}", file=sys.stderr)
    return facts


def cmd_parse(args: argparse.Namespace) -> int:
    import json

    from probes.parsers import KINDS, ParseError, parse

    if args.kind not in KINDS:
        raise UsageError(f"unknown kind '{args.kind}' (known: {', '.join(KINDS)})")
    if len(args.file) > 1 and args.kind != "rank-logs":
        raise UsageError(f"{args.kind} parses one file; only rank-logs takes several")
    if args.kind == "rank-logs":
        facts = _rank_logs(list(args.file))
    else:
        (name,) = args.file
        text = _read_bounded(name).decode("utf-8", errors="replace")
        try:
            facts = parse(args.kind, text)
        except ParseError as exc:
            raise UsageError(f"{name}: {exc}") from None
    if args.json:
        print_json(facts)
    else:
        for key, value in facts.items():
            print(f"{key}: {json.dumps(value, ensure_ascii=False, default=str)}")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``match``, ``kb`` and ``parse`` to diag's sub-command parser."""
    p = sub.add_parser("match", help="rank runbooks and KB articles for a symptom or log line",
                       description="Rank runbooks and KB articles for a symptom, in English or "
                                   "Chinese, or for a pasted log line ('-' reads stdin). Exits 1 "
                                   "and lists the runbooks when no runbook matches.")
    p.add_argument("text", nargs="+", help="symptom text or a pasted log line")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--limit", type=int, default=8, help="how many results (default 8)")
    add_search_options(p)
    p.set_defaults(func=cmd_match)

    kb = sub.add_parser("kb", help="search and read the knowledge base",
                        description="Search and read the knowledge-base articles.")
    ksub = kb.add_subparsers(dest="kb_command", metavar="ACTION", required=True)
    p = ksub.add_parser("search", help="find articles for some text",
                        description="Rank KB articles by title, aliases and tags.")
    p.add_argument("text", nargs="+")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--limit", type=int, default=8)
    add_search_options(p)
    p.set_defaults(func=cmd_kb_search)
    p = ksub.add_parser("show", help="print an article", description="Print a KB article.")
    p.add_argument("id")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_search_options(p)
    p.set_defaults(func=cmd_kb_show)

    p = sub.add_parser("parse", help="parse a saved command output into facts",
                       description="Parse a saved output of a node command (nvidia-smi, ibstat, "
                                   "nccl-tests, ...) into facts, with the same parser the "
                                   "probes use. KIND is e.g. nvidia-smi-topo; FILE '-' is stdin.")
    p.add_argument("kind")
    p.add_argument("file", nargs="+", help="the saved output ('-': stdin); rank-logs takes "
                                           "several logs, one per rank")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_parse)
