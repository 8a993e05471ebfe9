"""A walk as one JSON document (the contract in DESIGN.md) and as plain text for a terminal."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from probes.hostfold import fold_counted
from probes.model import SEVERITY_RANK, Finding, ProbeOutcome

from .engine import Walk

# When a host ends probes in different states, the one reported is the most telling.
_STATE_ORDER = ["host-key-refused", "auth-failed", "unreachable", "timeout", "cancelled",
                "parse-error", "ok"]


def host_states(hosts: Iterable[str],
                outcomes: Iterable[ProbeOutcome]) -> dict[str, dict[str, str]]:
    states: dict[str, dict[str, str]] = {h: {"state": "ok"} for h in hosts}
    for outcome in outcomes:
        for host, result in outcome.hosts.items():
            current = states.setdefault(host, {"state": "ok"})
            if _STATE_ORDER.index(result.state) < _STATE_ORDER.index(current["state"]):
                states[host] = {"state": result.state, "reason": result.reason}
    return states


def walk_document(walk: Walk, session: str) -> dict[str, Any]:
    outcomes = [o for step in walk.steps for o in step.outcomes]
    conclusion = walk.conclusion()
    doc: dict[str, Any] = {
        "runbook": walk.runbook.id,
        "session": session,
        "status": walk.status,
        "hosts": host_states(walk.hosts, outcomes),
        "findings": [f.to_dict() for f in walk.findings()],
        "path": walk.path(),
        "steps": [{"node": s.node, "kind": s.kind, "because": s.because,
                   **({"answer": s.answer} if s.answer else {}),
                   **({"action": s.action} if s.action else {})} for s in walk.steps],
        "conclusion": None,
    }
    if conclusion is not None:
        doc["conclusion"] = {"id": conclusion.id, "title": conclusion.title,
                             "cause": conclusion.cause, "fix": conclusion.fix,
                             "severity": conclusion.severity, "kb": list(conclusion.kb),
                             "evidence": [f.to_dict() for f in walk.evidence_for(conclusion)]}
    elif walk.status == "waiting" and walk.current:
        node = walk.runbook.node(walk.current)
        doc["question"] = {"node": node.id, "text": node.text,
                           "choices": [{"id": c.id, "label": c.label} for c in node.choices]}
    return doc


def probe_document(outcome: ProbeOutcome, session: str) -> dict[str, Any]:
    return {"probe": outcome.probe, "session": session,
            "hosts": {h: {"state": r.state, **({"reason": r.reason} if r.reason else {}),
                          "facts": r.facts} for h, r in outcome.hosts.items()},
            "findings": [f.to_dict() for f in outcome.findings]}


def exit_code(states: dict[str, dict[str, str]], findings: Iterable[Finding],
              conclusion_severity: str | None = None) -> int:
    """0 healthy, 1 findings (or a conclusion) of severity error or worse, 3 hosts could not
    be probed. A walk that concludes "input pipeline bound" from warnings alone still names a
    cause worth acting on, so the conclusion's own severity counts too."""
    if any(s["state"] not in ("ok", "parse-error") for s in states.values()):
        return 3
    severities = [f.severity for f in findings]
    if conclusion_severity:
        severities.append(conclusion_severity)
    if any(SEVERITY_RANK.get(s, 0) >= SEVERITY_RANK["error"] for s in severities):
        return 1
    return 0


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
    lines.append("")
    lines.append("path:")
    for step in doc.get("steps", []):
        lines.append(f"  {step['node']:<28} {step['because']}")
    findings = sorted(doc["findings"], key=lambda f: -SEVERITY_RANK.get(f["severity"], 0))
    if findings:
        lines += ["", "findings:"]
        for f in findings:
            lines.append(f"  {f['severity']:<8} {f['code']:<24} {fold_counted(f['hosts'])}")
            lines.append(f"           {f['message']}")
    if doc.get("conclusion"):
        c = doc["conclusion"]
        lines += ["", f"conclusion: {c['title']} [{c['severity']}]", f"  cause: {c['cause']}",
                  f"  fix:   {c['fix']}"]
        if c["kb"]:
            lines.append(f"  read:  {', '.join('diag kb show ' + k for k in c['kb'])}")
    elif doc.get("question"):
        q = doc["question"]
        lines += ["", f"waiting on a question ({q['node']}): {q['text']}"]
        lines += [f"  --answer {q['node']}={c['id']}   {c['label']}" for c in q["choices"]]
    return "\n".join(lines) + "\n"
