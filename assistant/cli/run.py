"""``diag run`` and ``diag probe``: a runbook walked, or one probe run, against the hosts.

Progress and questions go to stderr, so stdout stays the result (text or one JSON document)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from .alerts import add_alert_option, apply_alert
from .common import UsageError, add_search_options, find_runbook, parse_pairs, print_json
from .hostopts import add_host_options, fleet_options, open_target
from .monitoring import add_window_options


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
    """Ask before a command that changes nodes: show exactly what would run where. A probe
    step that loads the nodes (acceptance tests) is asked the same way: which tests, where."""
    from assistant.runbook.actions import commands_for

    if node.kind == "probe":
        print(f"\n{node.title}: these tests load the nodes: {', '.join(node.probes)}\n"
              f"  on {len(hosts)} node(s): {', '.join(hosts)}", file=sys.stderr)
        return bool(hosts) and input("Type 'yes' to run them, anything else skips them: "
                                     ).strip() == "yes"
    print(f"\n{node.title}: {node.text.strip()}", file=sys.stderr)
    if not hosts:
        return False
    print("This changes nodes. It would run:", file=sys.stderr)
    for host, command in commands_for(node.command, hosts).items():
        print(f"  {host}: {command}", file=sys.stderr)
    return input("Type 'yes' to run it, anything else skips it: ").strip() == "yes"


def _active_only(node: Any, hosts: tuple[str, ...]) -> bool:
    """--auto --allow-active: steps that load the nodes run; actions are still never taken."""
    return bool(node.kind == "probe")


def saved_runbook(saved: Any, state: Any) -> Any:
    """The runbook a recorded session walked (its file if still there, else by id)."""
    from assistant import walks
    from assistant.runbook.library import RunbookError

    try:
        return walks.saved_runbook(saved, state)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    except RunbookError as exc:
        raise UsageError(f"the session's runbook no longer validates:\n{exc}") from None


def cmd_run(args: argparse.Namespace) -> int:
    from assistant import walks
    from assistant.runbook.engine import WalkError
    from assistant.runbook.report import exit_code, walk_document, walk_text
    from assistant.store import Store, StoreError

    if args.alert:
        apply_alert(args)
    store = Store(args.db)
    options = fleet_options(args)
    saved = state = None
    window = _join_window(args)
    if args.resume and (args.incident or args.new_incident):
        raise UsageError("--resume continues a session in its own incident: --incident and "
                         "--new-incident do not apply")
    if args.resume:
        try:
            saved, state = walks.load_saved(store, args.resume)  # refuses concluded ones
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        options = options.resumed(saved["target"])  # reach the same hosts again
        runbook = saved_runbook(saved, state)
    elif not args.runbook:
        raise UsageError("which runbook? give RUNBOOK, or --resume SESSION")
    else:
        runbook = find_runbook(args.runbook)
    target = open_target(options)
    # A scenario's answers are for its own runbook's questions: walking another runbook over
    # it (a trainee's wrong pick, a check that no runbook accuses a host) uses those it has.
    answers = ({k: v for k, v in target.scenario.answers.items()
                if k in runbook.nodes and runbook.nodes[k].kind == "question"}
               if target.scenario and args.auto else {})
    answers.update(parse_pairs(args.answer, "--answer"))
    interactive = not args.auto and not args.json and sys.stdin.isatty()
    # The one runner the TUI uses too; a replayed incident only simulates (and says so).
    runner = walks.action_runner(target) if interactive else None

    def store_warning(exc: Exception) -> None:
        print(f"diag: warning: {exc}", file=sys.stderr)

    provider = options.provider(target)
    recording = None
    try:
        confirm: Any = _confirm if interactive else None
        if not interactive and args.allow_active:  # active tests yes, changes to nodes no
            confirm = _active_only
        walk = walks.new_walk(runbook, target, provider, answers=answers,
                              listeners=[] if args.json else [_progress],
                              confirm=confirm, run_action=runner, saved_state=state)
        recording = walks.record(
            walk, target, options, provider, store=store,
            symptom=target.scenario.symptom if target.scenario else "",
            session=saved["id"] if saved is not None else None, on_error=store_warning,
            incident=args.incident, join=not args.new_incident, join_window=window)
        print(f"diag: {recording.describe()}", file=sys.stderr)
        while walk.run() == "waiting" and interactive:
            node = runbook.node(walk.current)
            walk.answer(node.id, _ask(node))
        _retry_dead(provider)
    except (WalkError, StoreError) as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        return _interrupted(walk if recording else None, recording, args.db)
    finally:
        target.close()
    if not recording.flush():
        print(f"diag: warning: the store still refuses this walk; it is kept in "
              f"{recording.recorder.journal.path} — `diag store recover` imports it",
              file=sys.stderr)
    elif not recording.incident:  # journalled, then imported: the incident is known now
        with contextlib.suppress(StoreError):
            recording.incident = store.load_session(recording.session)["incident_id"]
    doc = walk_document(walk, recording.session, args.db)
    doc["incident"] = {"id": recording.incident, "joined": recording.joined}
    if args.json:
        print_json(doc)
    else:
        if recording.joined:  # not only on stderr: the first lines of the walk say it too
            print(recording.describe())
        sys.stdout.write(walk_text(doc))
        if walk.status == "concluded" and recording.incident:
            print(f"diag: when it is resolved: diag incident close {recording.incident} "
                  "[--cause TEXT]", file=sys.stderr)
    if doc.get("resume"):
        node = doc["question"]["node"]
        print(f"diag: the walk stopped at question '{node}', which has no --answer; to go on, "
              "run one of:", file=sys.stderr)
        labels = {c["id"]: c["label"] for c in doc["question"]["choices"]}
        for line, choice in zip(doc["resume"], doc["question"]["choices"], strict=True):
            print(f"  {line}    # {labels[choice['id']]}", file=sys.stderr)
    conclusion = doc["conclusion"]
    return exit_code(doc["hosts"], walk.findings(), conclusion and conclusion["severity"],
                     status=walk.status, unmeasured=doc["unmeasured"])


def _interrupted(walk: Any, recording: Any, db: str | None) -> int:
    """Ctrl-C: the session is marked interrupted and the line that resumes it is printed."""
    from assistant.runbook.report import EXIT_INTERRUPTED, resume_command

    if recording is None:
        print("diag: interrupted before anything was recorded", file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        recording.interrupted()
    except Exception as exc:  # the store is busy or gone: still say how to go on
        print(f"diag: warning: could not mark the session interrupted: {exc}", file=sys.stderr)
    print(f"\ndiag: interrupted after {len(walk.steps)} step(s); session {recording.session} "
          "is kept. Continue it with:", file=sys.stderr)
    print(f"  {resume_command(recording.session, db=db)}", file=sys.stderr)
    return EXIT_INTERRUPTED


def _retry_dead(provider: object) -> None:
    """Hosts that could not be reached were skipped after their first failure; one retry at
    the end says whether they are still down, so a host that was only rebooting is not left
    out silently."""
    dead = sorted(getattr(provider, "dead", {}))
    if not dead:
        return
    from probes.hostfold import fold_counted

    back = provider.retry_dead()  # type: ignore[attr-defined]
    print(f"diag: {fold_counted(dead)} could not be reached and were skipped after their "
          f"first failure; retried at the end: "
          + (f"{fold_counted(back)} answer now (run again to include them)" if back
             else "still unreachable"), file=sys.stderr)


def _join_window(args: argparse.Namespace) -> Any:
    """--join-window, else $DIAG_JOIN_WINDOW, else the default (4h)."""
    from assistant.store.incidents import join_window

    if args.new_incident and args.incident:
        raise UsageError("--incident and --new-incident contradict each other")
    try:
        return join_window(args.join_window)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_probe(args: argparse.Namespace) -> int:
    import uuid

    from assistant.runbook.report import exit_code, probe_document
    from probes.base import get_probe
    from probes.hostfold import fold_counted

    try:
        get_probe(args.probe)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    options = fleet_options(args)
    target = open_target(options)
    try:
        outcome = options.provider(target).run_probe(args.probe, target.hosts, {},
                                                     lambda event: None)
    finally:
        target.close()
    doc = probe_document(outcome, uuid.uuid4().hex[:12])
    if args.json:
        print_json(doc)
    else:
        groups: dict[tuple[str, str], list[str]] = {}
        for host, result in outcome.hosts.items():
            groups.setdefault((result.state, result.reason), []).append(host)
        for (state, reason), hosts in groups.items():
            print(f"{fold_counted(hosts)}: {state}{' - ' + reason if reason else ''}")
        for f in outcome.findings:
            print(f"{f.severity:<8} {f.code:<24} {fold_counted(f.hosts)}  {f.message}")
    return exit_code(doc["hosts"], outcome.findings, unmeasured=doc["unmeasured"])


def register(sub: Any) -> None:
    """Add ``run`` and ``probe`` to diag's sub-command parser."""
    p = sub.add_parser("run", help="walk a runbook against hosts",
                       description="Walk a runbook: run its probes on the hosts, follow the "
                                   "branches, ask its questions (or take --answer), and print "
                                   "the findings, the path and the conclusion.")
    p.add_argument("runbook", nargs="?",
                   help="runbook id, e.g. hang, or a file: ./team-runbook.yaml (not with "
                        "--resume)")
    add_host_options(p)
    add_search_options(p)
    p.add_argument("--resume", metavar="SESSION",
                   help="continue a recorded session (id or unique prefix) where its record "
                        "ends; the hosts are reached as they were unless host options say "
                        "otherwise")
    p.add_argument("--db", metavar="PATH",
                   help="the incident store (default: $DIAG_DB, else "
                        "$XDG_DATA_HOME/diag/diag.duckdb)")
    p.add_argument("--incident", metavar="ID",
                   help="record the walk in this open incident (id or unique prefix); by "
                        "default a walk joins the open incident of the same Slurm job, or of "
                        "the same runbook on overlapping hosts within --join-window")
    p.add_argument("--new-incident", action="store_true",
                   help="always open a new incident (join none, not even the same job's)")
    p.add_argument("--join-window", metavar="AGE",
                   help="how recent an open incident's last walk must be for a new walk of "
                        "the same runbook on overlapping hosts to join it (default 4h, or "
                        "$DIAG_JOIN_WINDOW; 'off' joins only on the same Slurm job)")
    p.add_argument("--auto", action="store_true",
                   help="never prompt: stop at a question that has no --answer (a scenario's "
                        "own answers are used)")
    p.add_argument("--allow-active", action="store_true",
                   help="with --auto: run steps that load the nodes (acceptance tests) without "
                        "asking; actions are still never taken")
    p.add_argument("--answer", action="append", default=[], metavar="NODE=CHOICE",
                   help="answer a question up front (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    add_window_options(p)
    add_alert_option(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("probe", help="run one probe on hosts and show its findings",
                       description="Run one read-only probe (versions, gpu, topology, network, "
                                   "nccl, storage, ...) on the hosts; print states, findings "
                                   "and, with --json, every host's facts.")
    p.add_argument("probe", help="probe name")
    add_host_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_probe)
