"""A walk as one JSON document (the contract in DESIGN.md) and as plain text for a terminal,
and the exit status that tells a script the truth about it."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from probes.hostfold import fold_counted, fold_findings
from probes.model import SEVERITY_RANK, Finding, ProbeOutcome

from .engine import Walk
from .model import SWEEP

# When a host ends probes in different states, the one reported is the most telling.
_STATE_ORDER = ["host-key-refused", "auth-failed", "unreachable", "timeout", "cancelled",
                "parse-error", "ok"]

# DESIGN.md's exit codes: what a cron check or a wrapper script branches on.
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_WAITING = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
# Action outcomes that mean the remediation did not happen on (every) host.
NOT_DONE = ("declined", "failed", "partly", "not-run", "simulated")


def host_states(hosts: Iterable[str],
                outcomes: Iterable[ProbeOutcome]) -> dict[str, dict[str, str]]:
    states: dict[str, dict[str, str]] = {h: {"state": "ok"} for h in hosts}
    for outcome in outcomes:
        for host, result in outcome.hosts.items():
            current = states.setdefault(host, {"state": "ok"})
            if _STATE_ORDER.index(result.state) < _STATE_ORDER.index(current["state"]):
                states[host] = {"state": result.state, "reason": result.reason}
    return states


def unmeasured_probes(outcomes: Iterable[ProbeOutcome]) -> list[str]:
    """Probes that ran on hosts and read none of them: every host's output unreadable (or
    the host unreachable). A check that read nothing must not pass for a healthy one."""
    return [o.probe for o in outcomes
            if o.hosts and all(r.state != "ok" for r in o.hosts.values())]


def resume_command(session: str, answer: tuple[str, str] | None = None,
                   db: str | None = None) -> str:
    """The exact line that continues a stopped walk, answering (node, choice) if given."""
    line = f"diag run --resume {session}"
    if db:
        line += f" --db {shlex.quote(db)}"
    if answer:
        line += f" --answer {answer[0]}={answer[1]}"
    return line


def walk_document(walk: Walk, session: str, db: str | None = None) -> dict[str, Any]:
    from .standing import CATALOGUED, catalogued_node, cause_and_fix, described

    # The hosts' states and the unmeasured probes are the runbook's steps': a host only the
    # evidence sweep could not reach (a pending job's nodes, for a walk that needs none of
    # them) is noted, not counted against the walk (its steps that need a host say so).
    outcomes = [o for step in walk.steps if step.kind != SWEEP for o in step.outcomes]
    conclusion = walk.conclusion()
    faults = walk.standing_faults()
    states = host_states(walk.hosts, outcomes)
    swept = [o for step in walk.steps if step.kind == SWEEP for o in step.outcomes
             if o.probe == SWEEP]
    for host, result in (swept[0].hosts.items() if swept else ()):
        if result.state != "ok" and host in states:
            states[host]["sweep"] = f"{result.state}: {result.reason}".rstrip(": ")
    doc: dict[str, Any] = {
        "runbook": walk.runbook.id,
        "session": session,
        "status": walk.status,
        "hosts": states,
        "findings": [f.to_dict() for f in fold_findings(walk.findings())],
        "path": walk.path(),
        "steps": [{"node": s.node, "kind": s.kind, "because": s.because,
                   # how long the step took: a deadline that held, or diag's own slowness
                   **({"seconds": round(s.ended - s.started, 3)} if s.ended else {}),
                   **({"answer": s.answer} if s.answer else {}),
                   **({"action": s.action} if s.action else {})} for s in walk.steps],
        "actions": walk.actions(),
        "unmeasured": unmeasured_probes(outcomes),
        # Every standing catalogued fault, named whatever the conclusion (runbook.standing)
        "faults": described(fold_findings(faults)),
        "conclusion": None,
    }
    if conclusion is not None:
        doc["conclusion"] = _conclusion(walk, conclusion)
        if conclusion.id == CATALOGUED:
            doc["conclusion"]["cause"], doc["conclusion"]["fix"] = cause_and_fix(faults)
            doc["conclusion"]["severity"] = _worst(faults)
    elif walk.status == "waiting" and walk.current:
        node = walk.runbook.node(walk.current)
        doc["question"] = {"node": node.id, "text": node.text,
                           "hosts": list(walk.question_hosts(node)),
                           "choices": [{"id": c.id, "label": c.label} for c in node.choices]}
        doc["resume"] = [resume_command(session, (node.id, c.id), db) for c in node.choices]
        if faults:  # evidence before questions: what the walk holds is its verdict so far
            provisional = walk.runbook.nodes.get(CATALOGUED) or catalogued_node()
            doc["status"] = "provisional"
            doc["conclusion"] = {**_conclusion(walk, provisional), "provisional": True}
            doc["conclusion"]["cause"], doc["conclusion"]["fix"] = cause_and_fix(faults)
            doc["conclusion"]["severity"] = _worst(faults)
    return doc


def _conclusion(walk: Walk, node: Any) -> dict[str, Any]:
    return {"id": node.id, "title": node.title, "cause": node.cause, "fix": node.fix,
            "severity": node.severity, "kb": list(node.kb),
            "hosts": list(walk.accused_hosts(node)),
            "evidence": [f.to_dict() for f in fold_findings(walk.cited_evidence(node))],
            "not_done": not_done(walk.actions())}


def _worst(findings: Sequence[Finding]) -> str:
    return max((f.severity for f in findings), key=lambda s: SEVERITY_RANK.get(s, 0),
               default="error")


def undone(action: Mapping[str, Any]) -> tuple[list[str], str] | None:
    """For an action that did not happen on (some of) its hosts: those hosts and why; None
    when it was done everywhere or was advice without a command."""
    outcome = action.get("outcome") or ("declined" if not action.get("confirmed") else "done")
    if not action.get("command") or outcome not in NOT_DONE:
        return None
    hosts = list(action.get("hosts") or [])
    per_host = action.get("per_host") or {}
    if outcome in ("failed", "partly"):
        hosts = [h for h in hosts if (per_host.get(h) or {}).get("state") != "done"]
    why = {"declined": "not confirmed", "failed": "the command failed",
           "partly": "the command failed", "not-run": action.get("result") or "not run",
           "simulated": "simulated: a replayed incident, nothing ran"}[outcome]
    return hosts, why


def not_done(actions: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per remediation that did not happen (declined, failed, simulated), naming
    the hosts, so a conclusion never implies a drain that was not done."""
    lines = []
    for action in actions:
        missing = undone(action)
        if missing is not None:
            hosts, why = missing
            lines.append(f"{action['node']} on {fold_counted(hosts)}: NOT done ({why})")
    return lines


def probe_document(outcome: ProbeOutcome, session: str) -> dict[str, Any]:
    return {"probe": outcome.probe, "session": session,
            "hosts": {h: {"state": r.state, **({"reason": r.reason} if r.reason else {}),
                          "facts": r.facts} for h, r in outcome.hosts.items()},
            "findings": [f.to_dict() for f in fold_findings(outcome.findings)],
            "unmeasured": unmeasured_probes([outcome])}


def exit_code(states: dict[str, dict[str, str]], findings: Iterable[Finding],
              conclusion_severity: str | None = None, *, status: str = "concluded",
              unmeasured: Sequence[str] = ()) -> int:
    """DESIGN.md's exit codes, the first that applies: 3 hosts could not be probed —
    unreachable, refused, timed out, or a probe that read no host's output (a cron check must
    not pass a node it could not read; whatever else the walk did rests on missing data);
    4 the walk stopped on a question it could not answer; 1 findings (or a conclusion) of
    severity error or worse; 0 healthy. A walk that concludes "input pipeline bound" from
    warnings alone still names a cause worth acting on, so the conclusion's own severity
    counts too."""
    if unmeasured or any(s["state"] not in ("ok", "parse-error") for s in states.values()):
        return EXIT_UNREACHABLE
    if status == "waiting" and not (conclusion_severity and SEVERITY_RANK.get(
            conclusion_severity, 0) >= SEVERITY_RANK["error"]):
        return EXIT_WAITING
    severities = [f.severity for f in findings]
    if conclusion_severity:
        severities.append(conclusion_severity)
    if any(SEVERITY_RANK.get(s, 0) >= SEVERITY_RANK["error"] for s in severities):
        return EXIT_FINDINGS
    return EXIT_OK


def walk_text(doc: dict[str, Any]) -> str:
    """The JSON document as an operator reads it in a terminal."""
    lines = [f"runbook {doc['runbook']}  session {doc['session']}", ""]
    by_state: dict[str, list[str]] = {}
    for host, state in doc["hosts"].items():
        by_state.setdefault(state["state"], []).append(host)
    lines.append("hosts: " + "; ".join(f"{state} {fold_counted(hs)}"
                                       for state, hs in by_state.items()))
    for host, state in doc["hosts"].items():
        if state["state"] != "ok":
            lines.append(f"  {host}: {state['state']} ({state.get('reason', '')})")
    if doc.get("unmeasured"):
        lines.append(f"  nothing measured by: {', '.join(doc['unmeasured'])} (no host's "
                     "output could be read)")
    lines.append("")
    lines.append("path:")
    for step in doc.get("steps", []):
        lines.append(f"  {step['node']:<28} {step['because']}")
        action = step.get("action")
        if action and action.get("command"):
            lines.append(f"  {'':<28} action {action.get('outcome', '')}: {action['result']}")
    findings = sorted(doc["findings"], key=lambda f: -SEVERITY_RANK.get(f["severity"], 0))
    if findings:
        lines += ["", "findings:"]
        for f in findings:
            lines.append(f"  {f['severity']:<8} {f['code']:<24} {fold_counted(f['hosts'])}")
            lines.append(f"           {f['message']}")
    named = [f for f in doc.get("faults", [])
             if not doc.get("conclusion") or f["code"] not in
             {e["code"] for e in doc["conclusion"].get("evidence", [])}]
    if named:
        lines += ["", "faults the evidence names (whatever the runbook concluded):"]
        for f in named:
            lines.append(f"  {f['severity']:<8} {f['code']:<24} {fold_counted(f['hosts'])}: "
                         f"{f['summary']} -> {f['action']}")
    if doc.get("conclusion"):
        c = doc["conclusion"]
        accused = f" — {fold_counted(c['hosts'])}" if c.get("hosts") else ""
        kind = "provisional conclusion" if c.get("provisional") else "conclusion"
        lines += ["", f"{kind}: {c['title']}{accused} [{c['severity']}]",
                  f"  cause: {c['cause']}", f"  fix:   {c['fix']}"]
        lines += [f"  {line}" for line in c.get("not_done", [])]
        if c["kb"]:
            lines.append(f"  read:  {', '.join('diag kb show ' + k for k in c['kb'])}")
    if doc.get("question"):
        q = doc["question"]
        about = f" about {fold_counted(q['hosts'])}" if q.get("hosts") else ""
        lines += ["", f"waiting on a question ({q['node']}){about}: {q['text']}"]
        lines += [f"  --answer {q['node']}={c['id']}   {c['label']}" for c in q["choices"]]
    return "\n".join(lines) + "\n"
