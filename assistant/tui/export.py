"""A concluded walk as Markdown, for the ticket or the incident channel.

Built from ``report.walk_document`` (the same JSON document ``diag run --json`` prints), so the
export says exactly what the CLI would. Host-derived text is passed through ``visible`` here too:
someone will ``cat`` this file in a terminal. (Pure; could move to ``assistant.runbook.report``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.hostfold import fold_counted
from probes.model import SEVERITY_RANK

from .safe_text import visible


def _line(text: Any) -> str:
    return visible(text, newlines=False)


def walk_markdown(doc: dict[str, Any], runbook_title: str = "",
                  kb_titles: dict[str, str] | None = None) -> str:
    """The walk document as Markdown: conclusion first, then evidence, hosts and path."""
    kb_titles = kb_titles or {}
    conclusion = doc.get("conclusion")
    title = conclusion["title"] if conclusion else "walk not concluded"
    accused = list(conclusion.get("hosts") or []) if conclusion else []
    if accused:
        title += f" — {_line(fold_counted(accused))}"
    lines = [f"# {title}", "",
             f"- runbook: `{doc['runbook']}` {runbook_title}".rstrip(),
             f"- session: `{doc['session']}`", f"- status: {doc['status']}"]
    if conclusion:
        lines.append(f"- severity: **{conclusion['severity']}**")
        if conclusion.get("not_done"):
            lines += ["", "## Not done", ""]
            lines += [f"- {_line(line)}" for line in conclusion["not_done"]]
        lines += ["", "## Cause", "", conclusion["cause"], "", "## Fix", "", conclusion["fix"]]
        if conclusion["evidence"]:
            lines += ["", "## Evidence", ""]
            lines += [_finding(f) for f in conclusion["evidence"]]
        if conclusion["kb"]:
            lines += ["", "## Read", ""]
            lines += [f"- `diag kb show {k}` {kb_titles.get(k, '')}".rstrip()
                      for k in conclusion["kb"]]
    lines += ["", "## Hosts", ""]
    if accused:
        lines.append(f"- accused: {_line(fold_counted(accused))}")
    by_state: dict[str, list[str]] = {}
    for host, state in doc["hosts"].items():
        if host in accused and state["state"] == "ok":
            continue  # reachable, but not "ok": the conclusion is about it
        by_state.setdefault(state["state"], []).append(host)
    lines += [f"- {'reachable, nothing against them' if state == 'ok' and accused else state}: "
              f"{_line(fold_counted(hosts))}" for state, hosts in by_state.items()]
    lines += [f"  - {_line(h)}: {_line(s.get('reason', ''))}" for h, s in doc["hosts"].items()
              if s["state"] != "ok"]
    lines += ["", "## Path", ""]
    for i, step in enumerate(doc["steps"], 1):
        because = f" — {_line(step['because'])}" if step.get("because") else ""
        lines.append(f"{i}. `{step['node']}`{because}")
        action = step.get("action")
        if action and action.get("command"):
            lines.append(f"   - action `{_line(action['command'])}` on "
                         f"{_line(fold_counted(action['hosts']))}: "
                         f"{_line(action.get('outcome') or '')} — {_line(action['result'])}")
    findings = sorted(doc["findings"], key=lambda f: -SEVERITY_RANK.get(f["severity"], 0))
    if findings:
        lines += ["", "## All findings", ""]
        lines += [_finding(f) for f in findings]
    return "\n".join(lines) + "\n"


def _finding(f: dict[str, Any]) -> str:
    return (f"- **{f['severity']}** `{_line(f['code'])}` {_line(fold_counted(f['hosts']))}: "
            f"{_line(f['message'])}")


def export_path(directory: Path, session: str) -> Path:
    """``diag-conclusion-<session>.md`` in *directory* (the cwd by default)."""
    return directory / f"diag-conclusion-{session}.md"
