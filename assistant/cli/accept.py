"""``diag accept``: the acceptance runbook walked over nodes, level by level, ending in the
acceptance report and a confirmed RESUME for the nodes that passed.

A shorthand for ``diag run acceptance`` that answers "run level N?" from ``--levels`` and asks
the one thing that matters before each level that loads the nodes: confirm it. Under ``--auto``
nothing that loads a node runs unless ``--allow-active`` says so, and no node is resumed (a
resume is a change an operator confirms).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .accept_stop import RunningTests, TerminateAsInterrupt, Terminated, stop_tests
from .common import UsageError, find_runbook, parse_pairs, print_json
from .hostopts import add_host_options, fleet_options, open_target
from .monitoring import add_window_options

LEVELS = range(0, 5)
# The acceptance probes: each takes the site's --criteria file as its "criteria" param.
ACCEPT_PROBES = ("fitness", "dcgm-diag", "gpu-burn", "nvbandwidth", "nccl-node", "ib-loopback",
                 "nccl-multinode", "soak")


def parse_levels(text: str) -> set[int]:
    """``0-2``, ``1``, ``0,2-3`` -> the set of levels (UsageError on anything else)."""
    levels: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise UsageError(f"--levels {text!r}: expected levels 0-4 like 0-2 or 1,3")
        first, last = int(lo), int(hi or lo)
        if first > last or last > 4:
            raise UsageError(f"--levels {text!r}: levels run from 0 to 4, low to high")
        levels.update(range(first, last + 1))
    return levels


def parse_duration(text: str, flag: str) -> float:
    """``4h``, ``5m``, ``10s``, ``90`` (seconds) -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    raw = text.strip().lower()
    scale = units.get(raw[-1:])
    number = raw[:-1] if scale else raw
    try:
        value = float(number) * (scale or 1)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a duration like 4h, 5m or 30s") from None
    if value <= 0:
        raise UsageError(f"{flag} {text!r}: must be more than zero")
    return value


def _confirm_level(allow: bool, interactive: bool) -> Any:
    """The confirmer: active steps are asked level by level (or allowed by --allow-active);
    the resume is asked on a terminal only."""
    from .run import _confirm as confirm_action

    def confirm(node: Any, hosts: tuple[str, ...]) -> bool:
        if not interactive:
            return allow and node.kind == "probe"
        return confirm_action(node, hosts)

    return confirm


def cmd_accept(args: argparse.Namespace) -> int:
    from assistant import walks
    from assistant.runbook import acceptreport
    from assistant.runbook.engine import WalkError
    from assistant.runbook.report import exit_code, walk_document
    from assistant.store import Store, StoreError

    levels = parse_levels(args.levels)
    options = fleet_options(args)
    criteria: dict[str, Any] | None = None
    if args.criteria:
        from probes.criteria import CriteriaError, overrides_from_file

        try:
            criteria = overrides_from_file(args.criteria)
        except CriteriaError as exc:
            raise UsageError(str(exc)) from None
    soak = {"duration_s": parse_duration(args.duration, "--duration") if args.duration else None,
            "interval_s": parse_duration(args.interval, "--interval") if args.interval else None}
    for probe in ACCEPT_PROBES:
        values = options.params.setdefault(probe, {})
        if criteria:
            values["criteria"] = criteria
    if args.first:
        options.params["dcgm-diag"]["first"] = True
    options.params["soak"].update({k: v for k, v in soak.items() if v})
    answers = {f"want-l{n}": "yes" if n in levels else "no" for n in LEVELS}
    answers.update(parse_pairs(args.answer, "--answer"))
    interactive = not args.auto and not args.json and sys.stdin.isatty()
    store = Store(args.db)
    target = open_target(options)
    runner = None
    if interactive and target.scenario is None:
        from assistant.runbook.actions import transport_runner

        runner = transport_runner(target.transport)
    provider = options.provider(target)
    provider.override_idle = args.override_idle
    from .run import _progress

    running = RunningTests()
    walk = recording = None
    try:
        walk = walks.new_walk(find_runbook("acceptance"), target, provider, answers=answers,
                              listeners=[running] + ([] if args.json else [_progress]),
                              confirm=_confirm_level(args.allow_active, interactive),
                              run_action=runner)
        recording = walks.record(walk, target, options, provider, store=store,
                                 symptom="acceptance")
        with TerminateAsInterrupt():
            walk.run()
    except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM, SIGHUP: end the tests on the nodes
        return stop_tests(stop, provider, running, walk, recording, args.db)
    except (WalkError, StoreError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        target.close()
    recording.flush()
    doc = acceptreport.from_walk(walk)
    doc["session"] = recording.session
    doc["levels"] = sorted(levels)
    if args.json:
        print_json(doc)
    else:
        sys.stdout.write(acceptreport.markdown(doc))
        print(f"\nsession {recording.session} (diag history --host NODE shows each node's "
              "acceptance records)")
    if args.report:  # a file that is attached to tickets: redacted as the store is
        from assistant.store.redact import redact_data

        kept = redact_data(doc)
        with open(args.report, "w", encoding="utf-8") as out:
            out.write(json.dumps(kept, indent=2) if args.report.endswith(".json")
                      else acceptreport.markdown(kept))
    code = exit_code(walk_document(walk, recording.session)["hosts"], walk.findings())
    return _unconfirmed(walk.findings()) if code == 0 else code


def _watched_window(options: Any, started: float, hosts: Any) -> Any:
    """The monitoring step over the minutes the watch ran (from its start, or --from, to
    now), when a Prometheus is configured; None otherwise (said in one line)."""
    import time
    from dataclasses import replace

    plan = options.monitoring
    if plan is None:
        return None
    if plan.step is None:
        from assistant.monitoring.step import NOT_CONFIGURED

        plan.say(NOT_CONFIGURED)
        return None
    step = plan.step if plan.step.start is not None or plan.step.since_given else replace(
        plan.step, start=started, end=time.time())
    return step.run(list(hosts), plan.say)


def _unconfirmed(findings: Any) -> int:
    """A level that loads the nodes and was not confirmed ran nothing: exit 4 (as a walk that
    waits on a question does) with how to confirm, never 0 (issue 29 item 17)."""
    tests = sorted({f.probe for f in findings if f.code == "active-test-not-confirmed"})
    if not tests:
        return 0
    print(f"diag: not confirmed, so nothing that loads a node ran ({', '.join(tests)}); "
          "confirm each level by typing yes at a terminal (without --json or --auto), or pass "
          "--auto --allow-active", file=sys.stderr)
    return 4


def cmd_watch(args: argparse.Namespace) -> int:
    """Sample the hosts' XID, ECC, link and retransmit counters every interval for the
    duration (the L4 soak on its own); every round is recorded as it is taken."""
    import shlex
    import time

    from assistant import walks
    from assistant.runbook import events as ev
    from assistant.runbook.report import exit_code
    from assistant.store import Recorder, Store, StoreError

    store = Store(args.db)
    options = fleet_options(args)
    saved = _resumed_watch(store, args.resume) if args.resume else None
    plan = (saved["target"] or {}).get("soak") or {} if saved else {}
    if saved is not None:
        options = options.resumed(saved["target"])  # the same hosts again
    if not args.duration and "duration_s" not in plan:
        raise UsageError("--duration is required (how long to watch, e.g. 1h)")
    duration = (parse_duration(args.duration, "--duration") if args.duration
                else float(plan["duration_s"]))
    interval = (parse_duration(args.interval, "--interval") if args.interval
                else float(plan.get("interval_s") or 300.0))
    if interval > duration:
        raise UsageError(f"--interval {interval:g}s is longer than --duration {duration:g}s")
    options.params.setdefault("soak", {}).update(duration_s=duration, interval_s=interval)
    target = open_target(options)
    provider = options.provider(target)
    try:
        if saved is not None:  # its rounds count: the watch ends when its duration is over
            session = saved["id"]
            provider.prior_samples = walks.recorded_samples(store, session)
        else:
            session = store.open_session(
                "watch", target.hosts, target.attrs,
                symptom=f"watch {args.duration} every {args.interval or '5m'}",
                target=options.record_of(target))  # with the duration and interval
    except StoreError as exc:
        target.close()
        raise UsageError(str(exc)) from None
    recorder = Recorder(store, session)

    def emit(event: Any) -> None:
        recorder(event)
        if isinstance(event, ev.SampleTaken) and not args.json:
            answered = sum(1 for s in event.samples.values() if s["state"] == "ok")
            print(f"round {event.seq + 1}: {answered}/{len(event.samples)} host(s) sampled",
                  file=sys.stderr)

    started = time.time()
    try:
        with TerminateAsInterrupt():
            outcome = provider.run_probe("soak", target.hosts, {}, emit)
    except KeyboardInterrupt as stop:  # the rounds taken are recorded; say so and stop
        provider.cancel.set()
        # the session says it stopped (resumable), not "running" for ever
        recorder.submit({"op": "status", "status": "interrupted"})
        recorder.flush()
        db = f" --db {shlex.quote(args.db)}" if args.db else ""
        how = f"terminated ({stop.name})" if isinstance(stop, Terminated) else "interrupted"
        print(f"diag: watch {how}; the rounds taken are in session {session}. Continue "
              f"it (until the original end) with:\n  diag watch --resume {session}{db}",
              file=sys.stderr)
        return 128 + stop.signum if isinstance(stop, Terminated) else 130
    finally:
        target.close()
    outcomes = [outcome]
    window = _watched_window(options, started, target.hosts)
    if window is not None:  # what the cluster's monitoring saw over the same minutes
        outcomes.append(window)
        outcome.findings.extend(window.findings)
    step = {"node": "watch", "kind": "probe", "started": started, "ended": time.time(),
            "outcomes": [o.to_dict() for o in outcomes], "answer": None, "goto": None,
            "because": "", "action": None}
    recorder(ev.StepFinished("watch", 0, step, {"status": "concluded"}))
    recorder.flush()
    # "rose": counters that must not rise and did; "recorded": the others that rose (TCP
    # retransmits, corrected ECC), shown but never a failure by themselves.
    summary = {host: {"state": r.state, "reason": r.reason, "samples": r.facts.get("samples"),
                      "rose": {f["metric"]: f["value"] for f in r.facts.get("figures") or []
                               if f["verdict"] == "fail"},
                      "recorded": {f["metric"]: f["value"] for f in r.facts.get("figures") or []
                                   if f["verdict"] == "recorded" and f["value"]}}
               for host, r in outcome.hosts.items()}
    if args.json:
        print_json({"session": session, "hosts": summary,
                    "findings": [f.to_dict() for f in outcome.findings]})
    else:
        for host, row in summary.items():
            if row["state"] != "ok":
                print(f"{host}: {row['state']} {row['reason']}".rstrip())
                continue
            rose = ", ".join(f"{n} +{v}" for n, v in sorted(row["rose"].items()))
            also = ", ".join(f"{n} +{v}" for n, v in sorted(row["recorded"].items()))
            print(f"{host}: {row['samples']} sample(s); "
                  + (f"ROSE: {rose}" if rose else "nothing rose that must not")
                  + (f" (recorded: {also})" if also else ""))
        for f in outcome.findings:
            print(f"{f.severity:<8} {f.code:<22} {', '.join(f.hosts)}  {f.message}")
        print(f"session {session}")
    states = {h: {"state": r.state} for h, r in outcome.hosts.items()}
    return exit_code(states, outcome.findings)


def _resumed_watch(store: Any, ident: str) -> dict[str, Any]:
    """The recorded watch ``--resume`` continues (UsageError: unknown, not a watch, ended)."""
    from assistant.store import StoreError

    try:
        saved: dict[str, Any] = store.load_session(ident)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    if saved["runbook"] != "watch":
        raise UsageError(f"session {saved['id']} is a walk of '{saved['runbook']}', not a "
                         f"watch: continue it with `diag run --resume {saved['id']}`")
    if saved["status"] == "concluded":
        raise UsageError(f"session {saved['id']} is a watch that already ended; start a new one")
    return saved


def register(sub: Any) -> None:
    """Add ``accept`` and ``watch`` to diag's sub-command parser."""
    p = sub.add_parser("accept", help="acceptance tests of new or repaired nodes (L0-L4)",
                       description="Walk the acceptance runbook over the nodes: L0 fitness, L1 "
                                   "each GPU, L2 each node, L3 across nodes, L4 soak. Tests "
                                   "that load a node run only on idle nodes and after you "
                                   "confirm each level; nodes that pass are offered RESUME, "
                                   "the others stay drained with the failing test named. "
                                   "Prints the node x test matrix (docs/acceptance.md). "
                                   "A test with no result within its limit (its own, "
                                   "--timeout, or --param TEST.limit_s=S) is killed on the "
                                   "node and fails its level. Ctrl-C, SIGTERM or SIGHUP kill "
                                   "the running tests on the nodes and print the resume line "
                                   "(exit 130, 143, 129). Exit 4 when a level was not "
                                   "confirmed and nothing ran.")
    add_host_options(p)
    add_window_options(p)
    p.add_argument("--levels", default="0-2", metavar="RANGE",
                   help="levels to run, e.g. 0-2 (default), 1, 0-4")
    p.add_argument("--auto", action="store_true",
                   help="never prompt: levels that load nodes run only with --allow-active, "
                        "and no node is resumed")
    p.add_argument("--allow-active", action="store_true",
                   help="with --auto: run the tests that load the nodes without asking")
    p.add_argument("--override-idle", action="store_true",
                   help="run the tests even on nodes that are busy or schedulable (the facts "
                        "record the override)")
    p.add_argument("--first", action="store_true",
                   help="first acceptance of new hardware: dcgmi diag -r 4 instead of -r 3")
    p.add_argument("--criteria", metavar="FILE",
                   help="site criteria overriding probes/acceptance.yaml, each value with its "
                        "source (docs/acceptance.md)")
    p.add_argument("--duration", metavar="TIME", help="L4 soak duration, e.g. 4h (default 4h)")
    p.add_argument("--interval", metavar="TIME", help="L4 soak interval, e.g. 5m (default 5m)")
    p.add_argument("--answer", action="append", default=[], metavar="NODE=CHOICE",
                   help="answer a question of the runbook up front (repeatable)")
    p.add_argument("--report", metavar="FILE",
                   help="also write the acceptance report (.json: JSON, else Markdown)")
    p.add_argument("--db", metavar="PATH", help="the incident store (default: $DIAG_DB)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON document")
    p.set_defaults(func=cmd_accept)

    p = sub.add_parser("watch", help="sample XID, ECC, link and retransmit counters for a while",
                       description="Watch nodes: read their XIDs, ECC and row-remap counts, "
                                   "InfiniBand error counters and TCP retransmits every "
                                   "--interval for --duration (read-only), record every round, "
                                   "and say at the end which counters rose where.")
    add_host_options(p)
    add_window_options(p)
    p.add_argument("--duration", metavar="TIME",
                   help="how long, e.g. 1h, 2m (required unless --resume)")
    p.add_argument("--interval", metavar="TIME",
                   help="time between rounds, e.g. 10s (default 5m)")
    p.add_argument("--resume", metavar="SESSION",
                   help="continue an interrupted watch: the same hosts, its rounds counted, "
                        "ending when its original duration is over")
    p.add_argument("--db", metavar="PATH", help="the incident store (default: $DIAG_DB)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=cmd_watch)
