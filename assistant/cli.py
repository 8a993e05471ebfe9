"""The command line: every sub-command is a thin front end over the core.

Heavy modules (textual, duckdb, paramiko, networkx, jsonschema) are imported inside the
commands that need them, so `diag --help` and `diag match` start fast. stdout carries results,
stderr diagnostics. Exit codes: 0 done and healthy, 1 findings of severity error or worse,
2 bad usage or bad input, 3 hosts could not be probed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


class UsageError(Exception):
    """Bad usage or bad input: reported in one line on stderr, exit 2."""


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


# --- runbooks --------------------------------------------------------------------------------

def cmd_runbooks_list(args: argparse.Namespace) -> int:
    from assistant.runbook.library import all_runbooks

    runbooks = all_runbooks()
    if args.json:
        _print_json({"runbooks": [{"id": r.id, "title": r.title, "summary": r.summary,
                                   "tags": list(r.tags), "nodes": len(r.nodes)}
                                  for r in runbooks]})
        return EXIT_OK
    width = max(len(r.id) for r in runbooks)
    for runbook in runbooks:
        print(f"{runbook.id:<{width}}  {runbook.title}")
    return EXIT_OK


def _runbook(runbook_id: str) -> Any:
    from assistant.runbook.library import get_runbook

    try:
        return get_runbook(runbook_id)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None


def cmd_runbooks_show(args: argparse.Namespace) -> int:
    from assistant.runbook.render import outline

    sys.stdout.write(outline(_runbook(args.id)))
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

    runbook = _runbook(args.id)
    sys.stdout.write(to_dot(runbook) if args.format == "dot" else to_mermaid(runbook))
    return EXIT_OK


# --- match and kb ----------------------------------------------------------------------------

def cmd_match(args: argparse.Namespace) -> int:
    from assistant.match import match

    text = " ".join(args.text) if args.text != ["-"] else sys.stdin.read()
    if not text.strip():
        raise UsageError("nothing to match: give a symptom or a log line")
    results = match(text, limit=args.limit)
    if args.json:
        _print_json({"results": [r.to_dict() for r in results]})
        return EXIT_OK
    if not results:
        print("no runbook or KB article matches", file=sys.stderr)
        return EXIT_OK
    for r in results:
        print(f"{r.score:5.1f}  {r.type:<7}  {r.id:<36}  {r.title}")
    return EXIT_OK


def cmd_kb_search(args: argparse.Namespace) -> int:
    from assistant.match import match

    results = [r for r in match(" ".join(args.text), limit=50) if r.type == "kb"][: args.limit]
    if args.json:
        _print_json({"results": [r.to_dict() for r in results]})
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
        _print_json({"id": article.id, "title": article.title, "tags": list(article.tags),
                     "aliases": list(article.aliases), "body": article.body})
        return EXIT_OK
    print(f"# {article.title}\n")
    sys.stdout.write(article.body)
    return EXIT_OK


# --- parse -----------------------------------------------------------------------------------

def cmd_parse(args: argparse.Namespace) -> int:
    from probes.parsers import KINDS, ParseError, parse

    if args.kind not in KINDS:
        raise UsageError(f"unknown kind '{args.kind}' (known: {', '.join(KINDS)})")
    if len(args.file) > 1 and args.kind != "rank-logs":
        raise UsageError(f"{args.kind} parses one file; only rank-logs takes several")
    texts = []
    for name in args.file:
        try:
            raw = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        except OSError as exc:
            raise UsageError(f"{name}: {exc.strerror}") from None
        text = raw.decode("utf-8", errors="replace")
        # Several rank logs: each under a header naming its file, so a file's name (rank7.log)
        # can tell its rank, as `tail` prints them.
        texts.append(f"==> {name} <==\n{text}" if len(args.file) > 1 else text)
    try:
        facts = parse(args.kind, "\n".join(texts))
    except ParseError as exc:
        raise UsageError(f"{', '.join(args.file)}: {exc}") from None
    if args.json:
        _print_json(facts)
    else:
        for key, value in facts.items():
            print(f"{key}: {json.dumps(value, ensure_ascii=False, default=str)}")
    return EXIT_OK


# --- run and probe ---------------------------------------------------------------------------

def _parse_pairs(pairs: Sequence[str], what: str) -> dict[str, str]:
    result = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"{what} takes KEY=VALUE, got '{pair}'")
        result[key] = value
    return result


def _probe_params(pairs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """--param storage.path=/ckpt -> {"storage": {"path": "/ckpt"}} (numbers stay numbers)."""
    import yaml

    params: dict[str, dict[str, Any]] = {}
    for key, value in _parse_pairs(pairs, "--param").items():
        probe, dot, name = key.partition(".")
        if not dot or not name:
            raise UsageError(f"--param takes PROBE.KEY=VALUE, got '{key}={value}'")
        params.setdefault(probe, {})[name] = yaml.safe_load(value)
    return params


def _open_target(args: argparse.Namespace) -> Any:
    from assistant.target import TargetError, open_target

    try:
        return open_target(hosts=args.hosts, inventory=args.inventory, scenario=args.scenario,
                           transport=args.transport,
                           accept_new_host_keys=args.accept_new_host_keys,
                           connect_timeout=args.connect_timeout,
                           job=getattr(args, "job", None),
                           slurm_timeout=getattr(args, "slurm_timeout", None))
    except TargetError as exc:
        raise UsageError(str(exc)) from None


def _provider(args: argparse.Namespace, target: Any) -> Any:
    from assistant.runbook.provider import FleetProvider
    from probes.base import ThresholdsError, load_thresholds

    try:
        thresholds = load_thresholds(Path(args.thresholds) if args.thresholds else None)
    except ThresholdsError as exc:
        raise UsageError(str(exc)) from None
    params = {k: dict(v) for k, v in target.params.items()}
    if args.logs:
        # The job's logs feed three probes: rank progress, the job log, NCCL's own lines.
        for probe, key in (("ranks", "logs"), ("joblog", "log"), ("nccl", "log")):
            params.setdefault(probe, {})[key] = args.logs
    for probe, values in _probe_params(args.param).items():
        params.setdefault(probe, {}).update(values)
    if args.baseline:
        params.setdefault("versions", {})["baseline"] = _version_baseline(args.baseline)
    return FleetProvider(target.transport, attrs=target.attrs, thresholds=thresholds,
                         params=params, concurrency=args.concurrency, timeout=args.timeout,
                         deadline=args.deadline)


def _version_baseline(path: str) -> dict[str, str]:
    """A pinned version baseline: {kernel: ..., driver_version: ..., nccl_version: ...}."""
    import yaml

    from probes.catalog import load_catalog

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"--baseline {path}: {exc}") from None
    known = load_catalog().probes["versions"].facts
    if not isinstance(data, dict) or not data:
        raise UsageError(f"--baseline {path}: expected a mapping such as driver_version: 550.90.07")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise UsageError(f"--baseline {path}: unknown key(s) {', '.join(unknown)} "
                         f"(known: {', '.join(known)})")
    return {key: str(value) for key, value in data.items()}


def _progress(event: Any) -> None:
    """Live progress on stderr, so stdout stays the result."""
    from assistant.runbook import events as ev

    if isinstance(event, ev.StepEntered):
        print(f"-> {event.node}: {event.title}", file=sys.stderr)
    elif isinstance(event, ev.ProbeFinished) and event.state != "ok":
        print(f"   {event.probe} on {event.host}: {event.state} {event.reason}".rstrip(),
              file=sys.stderr)


def _ask(node: Any) -> str:
    """An interactive answer on the terminal (when not --auto and stdin is a TTY)."""
    print(f"\n{node.title}: {node.text}\n  ({node.explain.strip()})", file=sys.stderr)
    for i, choice in enumerate(node.choices, 1):
        print(f"  {i}. {choice.label}", file=sys.stderr)
    while True:
        raw = input("choice> ").strip()
        if raw.isdigit() and 1 <= int(raw) <= len(node.choices):
            return node.choices[int(raw) - 1].id
        if node.choice(raw):
            return raw


def _confirm(node: Any, hosts: tuple[str, ...]) -> bool:
    """Ask before a command that changes nodes: show exactly what would run where."""
    from assistant.runbook.actions import commands_for

    print(f"\n{node.title}: {node.text.strip()}", file=sys.stderr)
    if not hosts:
        return False
    print("This changes nodes. It would run:", file=sys.stderr)
    for host, command in commands_for(node.command, hosts).items():
        print(f"  {host}: {command}", file=sys.stderr)
    return input("Type 'yes' to run it, anything else skips it: ").strip() == "yes"


def cmd_run(args: argparse.Namespace) -> int:
    from assistant.runbook.engine import Walk, WalkError
    from assistant.runbook.report import exit_code, walk_document, walk_text
    from assistant.store import Recorder, Store, StoreError

    store = Store(args.db)
    saved = state = None
    if args.resume:
        try:
            saved = store.load_session(args.resume)  # id or unique prefix
            state = store.load_session_state(saved["id"])  # refuses concluded / empty ones
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        for key, value in (saved["target"] or {}).items():  # reach the same hosts again
            if value is not None and getattr(args, key, None) in (None, [], "ssh"):
                setattr(args, key, value)
        runbook = _runbook(state["runbook"])
    elif not args.runbook:
        raise UsageError("which runbook? give RUNBOOK, or --resume SESSION")
    else:
        runbook = _runbook(args.runbook)
    target = _open_target(args)
    answers = dict(target.scenario.answers) if target.scenario and args.auto else {}
    answers.update(_parse_pairs(args.answer, "--answer"))
    interactive = not args.auto and not args.json and sys.stdin.isatty()
    listeners = [] if args.json else [_progress]
    runner = None
    if interactive and target.scenario is None:  # a replayed incident has no node to change
        from assistant.runbook.actions import transport_runner

        runner = transport_runner(target.transport)

    def store_warning(exc: Exception) -> None:
        print(f"diag: warning: {exc}; the step is kept and written when the store is free",
              file=sys.stderr)

    provider = _provider(args, target)
    try:
        if saved is not None and state is not None:
            walk = Walk.from_dict(state, runbook, provider, listeners=listeners,
                                  confirm=_confirm if interactive else None,
                                  run_action=runner)
            walk.add_answers(answers)  # new --answer values for the questions still ahead
            session = saved["id"]
        else:
            walk = Walk(runbook, target.hosts, provider, answers=answers,
                        listeners=listeners, confirm=_confirm if interactive else None,
                        run_action=runner)
            session = store.open_session(
                runbook.id, target.hosts, target.attrs,
                symptom=target.scenario.symptom if target.scenario else "",
                job=target.job_id,
                target={"scenario": args.scenario, "inventory": args.inventory,
                        "hosts": args.hosts if args.hosts else None,
                        "transport": args.transport, "logs": args.logs,
                        "job": args.job, **target.context()})
        recorder = Recorder(store, session, raw=provider.raw, on_error=store_warning)
        recorder.follow(walk)
        while walk.run() == "waiting" and interactive:
            node = runbook.node(walk.current)
            walk.answer(node.id, _ask(node))
    except (WalkError, StoreError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        target.close()
    if not recorder.flush():
        print("diag: warning: some steps could not be written to the store", file=sys.stderr)
    doc = walk_document(walk, session)
    if args.json:
        _print_json(doc)
    else:
        sys.stdout.write(walk_text(doc))
    conclusion = doc["conclusion"]
    return exit_code(doc["hosts"], walk.findings(), conclusion and conclusion["severity"])


def cmd_probe(args: argparse.Namespace) -> int:
    import uuid

    from assistant.runbook.report import exit_code, probe_document
    from probes.base import get_probe
    from probes.hostfold import fold_counted

    try:
        get_probe(args.probe)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    target = _open_target(args)
    try:
        outcome = _provider(args, target).run_probe(args.probe, target.hosts, {},
                                                    lambda event: None)
    finally:
        target.close()
    doc = probe_document(outcome, uuid.uuid4().hex[:12])
    if args.json:
        _print_json(doc)
    else:
        groups: dict[tuple[str, str], list[str]] = {}
        for host, result in outcome.hosts.items():
            groups.setdefault((result.state, result.reason), []).append(host)
        for (state, reason), hosts in groups.items():
            print(f"{fold_counted(hosts)}: {state}{' - ' + reason if reason else ''}")
        for f in outcome.findings:
            print(f"{f.severity:<8} {f.code:<24} {fold_counted(f.hosts)}  {f.message}")
    return exit_code(doc["hosts"], outcome.findings)


# --- the parser ------------------------------------------------------------------------------

def _add_host_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("hosts")
    g.add_argument("--hosts", metavar="EXPR", help="hosts, Slurm hostlist syntax: gpu[001-016]")
    g.add_argument("--inventory", metavar="FILE", help="inventory YAML (docs/inventory-format.md)")
    g.add_argument("--job", metavar="ID",
                   help="a Slurm job: its nodes are the hosts (a pending job: the nodes it "
                        "waits for), its state, partition, GRES and nodes are recorded")
    g.add_argument("--scenario", metavar="NAME",
                   help="replay a simulated incident from fixtures/scenarios (no SSH)")
    g.add_argument("--transport", choices=("ssh", "slurm", "local"), default=None,
                   help="ssh (default), slurm (srun inside --job's allocation; the default "
                        "with --job for hosts the inventory does not list) or local (run on "
                        "this machine)")
    g.add_argument("--slurm-timeout", type=float, default=None, metavar="S",
                   help="seconds each Slurm query may take when resolving --job (default 5)")
    g.add_argument("--concurrency", type=int, default=64, help="hosts at once (default 64)")
    g.add_argument("--timeout", type=float, default=None,
                   help="seconds per host and command (default: the probe's own)")
    g.add_argument("--deadline", type=float, default=120.0,
                   help="seconds for a whole step; hosts not done by then are 'timeout'")
    g.add_argument("--connect-timeout", type=float, default=5.0, help="SSH connect timeout")
    g.add_argument("--accept-new-host-keys", action="store_true",
                   help="accept and record unknown SSH host keys (changed keys are still refused)")
    g.add_argument("--thresholds", metavar="FILE", help="override check thresholds (YAML)")
    g.add_argument("--baseline", metavar="FILE",
                   help="pinned versions (YAML: driver_version: ..., nccl_version: ...); hosts "
                        "that differ raise version-baseline-mismatch")
    g.add_argument("--logs", metavar="GLOB",
                   help="the training job's logs on each node, e.g. '/shared/job-1234/rank*.log' "
                        "(rank progress, OOM/NaN/rendezvous lines, NCCL's transport)")
    g.add_argument("--param", action="append", default=[], metavar="PROBE.KEY=VALUE",
                   help="probe parameter, e.g. storage.path=/checkpoints (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="diag",
        description="Troubleshooting assistant and runbook engine for GPU training clusters: "
                    "match a symptom to a runbook, walk it, read the knowledge base. Without a "
                    "command, opens the TUI (--demo: over a simulated incident).",
        epilog="Exit codes: 0 healthy, 1 findings of severity error or worse, 2 bad usage or "
               "input, 3 hosts could not be probed.")
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("--demo", action="store_true",
                        help="open the TUI over a simulated incident (no SSH needed)")
    tui = parser.add_argument_group("the TUI's hosts (when no command is given)")
    tui.add_argument("--hosts", dest="tui_hosts", metavar="EXPR",
                     help="hosts the TUI's walks reach over SSH: gpu[001-016]")
    tui.add_argument("--inventory", dest="tui_inventory", metavar="FILE", help="inventory YAML")
    tui.add_argument("--scenario", dest="tui_scenario", metavar="NAME",
                     help="replay a simulated incident")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

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

    p = sub.add_parser("match", help="rank runbooks and KB articles for a symptom or log line",
                       description="Rank runbooks and KB articles for a symptom, in English or "
                                   "Chinese, or for a pasted log line ('-' reads stdin).")
    p.add_argument("text", nargs="+", help="symptom text or a pasted log line")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--limit", type=int, default=8, help="how many results (default 8)")
    p.set_defaults(func=cmd_match)

    kb = sub.add_parser("kb", help="search and read the knowledge base",
                        description="Search and read the knowledge-base articles.")
    ksub = kb.add_subparsers(dest="kb_command", metavar="ACTION", required=True)
    p = ksub.add_parser("search", help="find articles for some text",
                        description="Rank KB articles by title, aliases and tags.")
    p.add_argument("text", nargs="+")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--limit", type=int, default=8)
    p.set_defaults(func=cmd_kb_search)
    p = ksub.add_parser("show", help="print an article", description="Print a KB article.")
    p.add_argument("id")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_kb_show)

    p = sub.add_parser("run", help="walk a runbook against hosts",
                       description="Walk a runbook: run its probes on the hosts, follow the "
                                   "branches, ask its questions (or take --answer), and print "
                                   "the findings, the path and the conclusion.")
    p.add_argument("runbook", nargs="?", help="runbook id, e.g. hang (not with --resume)")
    _add_host_options(p)
    p.add_argument("--resume", metavar="SESSION",
                   help="continue a recorded session (id or unique prefix) where its record "
                        "ends; the hosts are reached as they were unless host options say "
                        "otherwise")
    p.add_argument("--db", metavar="PATH",
                   help="the incident store (default: $DIAG_DB, else "
                        "$XDG_DATA_HOME/diag/diag.duckdb)")
    p.add_argument("--auto", action="store_true",
                   help="never prompt: stop at a question that has no --answer (a scenario's "
                        "own answers are used)")
    p.add_argument("--answer", action="append", default=[], metavar="NODE=CHOICE",
                   help="answer a question up front (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("probe", help="run one probe on hosts and show its findings",
                       description="Run one read-only probe (versions, gpu, topology, network, "
                                   "nccl, storage, ...) on the hosts; print states, findings "
                                   "and, with --json, every host's facts.")
    p.add_argument("probe", help="probe name")
    _add_host_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("parse", help="parse a saved command output into facts",
                       description="Parse a saved output of a node command (nvidia-smi, ibstat, "
                                   "nccl-tests, ...) into facts, with the same parser the "
                                   "probes use. KIND is e.g. nvidia-smi-topo; FILE '-' is stdin.")
    p.add_argument("kind")
    p.add_argument("file", nargs="+", help="the saved output ('-': stdin); rank-logs takes "
                                           "several logs, one per rank")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_parse)

    p = sub.add_parser("drill", help="walk a simulated incident in the TUI and get scored",
                       description="Training: a simulated incident from fixtures/scenarios shows "
                                   "only its symptom; pick the runbook, walk it, and get a score "
                                   "(right conclusion, steps vs the shortest path, hints, time). "
                                   "Scores are kept in the store.")
    p.add_argument("scenario", nargs="?", default="",
                   help="scenario name (default: a random one you have not drilled yet)")
    p.set_defaults(func=cmd_drill)

    from assistant.cli_store import add_store_commands

    add_store_commands(sub)
    return parser


def _version() -> str:
    from assistant import __version__

    return f"diag {__version__}"


def cmd_tui(args: argparse.Namespace) -> int:
    """`diag` alone opens the TUI; `diag --demo` opens it over the built-in demo incident."""
    from assistant.tui.app import run_app

    return run_app(demo=args.demo, hosts=args.tui_hosts, inventory=args.tui_inventory,
                   scenario=args.tui_scenario)


def cmd_drill(args: argparse.Namespace) -> int:
    """A simulated incident in the TUI: the symptom only, walk it, get scored."""
    from assistant.fleet.scenario import ScenarioError
    from assistant.tui.app import run_app

    try:
        return run_app(drill=args.scenario)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        args.func = cmd_tui
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"diag: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("diag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # never a traceback for a user; DIAG_DEBUG=1 shows it
        if os.environ.get("DIAG_DEBUG"):
            raise
        from assistant.runbook.library import RunbookError

        if isinstance(exc, RunbookError):
            print(f"diag: invalid runbook:\n{exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"diag: internal error: {type(exc).__name__}: {exc} "
              "(set DIAG_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
