"""The acceptance report: a node x test matrix of what each test measured, against which
criterion (and its source), and the decision the walk ended in for each node.

Built from figures (``probes.active.figure``) wherever they come from: a walk in memory
(:func:`from_walk`) or the store's rows (``diag accept --report SESSION``), so the live view,
the terminal and the saved report say the same. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .model import SWEEP

if TYPE_CHECKING:
    from .engine import Walk

# Worst first: one failing GPU fails the node's cell.
_RANK = {"fail": 0, "not-run": 1, "pass": 2, "recorded": 3}
_MARK = {"fail": "FAIL", "not-run": "not run", "pass": "pass", "recorded": "recorded"}


def cell_verdict(figures: Iterable[Mapping[str, Any]]) -> str:
    """A cell's verdict: fail if any figure failed, else pass if any passed, else not-run
    or recorded. A cell with both passes and unjudged figures is a pass only for what was
    judged; the figures list says which were only recorded."""
    verdicts = {f.get("verdict", "recorded") for f in figures}
    for verdict in ("fail", "pass", "not-run", "recorded"):
        if verdict in verdicts:
            return verdict
    return "recorded"


def matrix(rows: Iterable[tuple[str, Mapping[str, Any]]], hosts: Iterable[str],
           decisions: Mapping[str, str] | None = None) -> dict[str, Any]:
    """(host, figure) pairs -> the report document: tests in level order, one cell per host
    and test (verdict, the figures), the first failure and the decision per host."""
    host_list = list(dict.fromkeys(hosts))
    cells: dict[str, dict[str, list[dict[str, Any]]]] = {h: {} for h in host_list}
    levels: dict[str, int] = {}
    for host, fig in rows:
        test = str(fig.get("test"))
        levels.setdefault(test, int(fig.get("level") or 0))
        cells.setdefault(host, {}).setdefault(test, []).append(dict(fig))
    tests = sorted(levels, key=lambda t: (levels[t], t))
    out_hosts = []
    for host in cells:
        failed = [f for t in tests for f in cells[host].get(t, []) if f.get("verdict") == "fail"]
        first = failed[0] if failed else None
        out_hosts.append({
            "host": host,
            "cells": {t: {"verdict": cell_verdict(cells[host][t]), "figures": cells[host][t]}
                      for t in tests if t in cells[host]},
            "first_failure": first and describe(first),
            "decision": (decisions or {}).get(host, ""),
        })
    return {"tests": [{"test": t, "level": levels[t]} for t in tests], "hosts": out_hosts}


def describe(fig: Mapping[str, Any]) -> str:
    """One figure in words: ``L1 dcgm-diag GPU 0 failed_tests 1 (<= 0; DCGM docs ...)``."""
    gpu = f" GPU {fig['gpu']}" if fig.get("gpu") is not None else ""
    value = fig.get("value")
    unit = f" {fig['unit']}" if fig.get("unit") else ""
    judged = ""
    if fig.get("op") and fig.get("threshold") is not None:
        judged = f" ({fig['op']} {fig['threshold']}{unit}"
        judged += f"; {fig['source']})" if fig.get("source") else ")"
    shown = "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
    return (f"L{fig.get('level')} {fig.get('test')}{gpu} {fig.get('metric')} "
            f"{shown}{unit}{judged}")


def from_walk(walk: Walk) -> dict[str, Any]:
    """The report of a walk in memory: figures from every probe step's host facts, decisions
    from its resume action (confirmed or not) and the findings that stopped the others."""
    rows = []
    for step in walk.steps:
        for outcome in step.outcomes:
            for host, result in outcome.hosts.items():
                for fig in (result.facts or {}).get("figures") or []:
                    rows.append((host, fig))
    return matrix(rows, walk.hosts, decisions(walk))


def _resumed(resume: Mapping[str, Any], host: str) -> str:
    """What the resume action really did on *host* (issue 29 item 15: a RESUME that failed on
    every node, ``scontrol: not found``, was reported "resume confirmed")."""
    if not resume.get("confirmed"):
        return "passed; resume not confirmed"
    ran = (resume.get("per_host") or {}).get(host)
    if ran is None:
        return f"passed; resume confirmed but not run ({resume.get('result') or 'no runner'})"
    if ran.get("state") == "done":
        return "resume confirmed"
    return f"passed; resume FAILED, stays drained: {ran.get('detail') or ran.get('state')}"


def decisions(walk: Walk) -> dict[str, str]:
    """Per host: resumed / offered for resume (not confirmed) / stays drained, and why."""
    out: dict[str, str] = {}
    resume = next((s.action for s in walk.steps if s.node == "offer-resume" and s.action),
                  None)
    offered = set(resume["hosts"]) if resume else set()
    # Why a node stays drained: its worst finding, a fault or refusal before a "not measured"
    # (the evidence sweep's blind spots on a node are the weakest reason); among equals what
    # acceptance's own steps found before what the sweep found (its extra evidence), then the
    # walk's order.
    rank = {"critical": 0, "error": 1, "warning": 2}
    worrying = [(f, step.kind == SWEEP) for step in walk.steps for o in step.outcomes
                for f in o.findings if f.severity in rank]
    stopping: dict[str, str] = {}
    for finding, _swept in sorted(worrying, key=lambda fs: (rank[fs[0].severity],
                                                           fs[0].code == "not-measured", fs[1])):
        for host in finding.hosts:
            stopping.setdefault(host, f"{finding.code}: {finding.message}")
    for host in walk.hosts:
        if host in offered:
            out[host] = _resumed(resume or {}, host)
        elif host in stopping:
            out[host] = "stays drained: " + stopping[host]
        else:
            out[host] = "not decided (the walk ended before the resume step)"
    return out


def markdown(doc: Mapping[str, Any]) -> str:
    """The matrix as a Markdown table, then each node's first failure and decision."""
    tests = [t["test"] for t in doc["tests"]]
    head = ["node", *[f"L{t['level']} {t['test']}" for t in doc["tests"]], "decision"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in doc["hosts"]:
        cells = []
        for test in tests:
            cell = row["cells"].get(test)
            cells.append(_cell_text(cell) if cell else "")
        lines.append("| " + " | ".join([row["host"], *cells, row["decision"] or ""])
                     .replace("\n", " ") + " |")
    failures = [(r["host"], r["first_failure"]) for r in doc["hosts"] if r["first_failure"]]
    if failures:
        lines += ["", "First failure per node:", ""]
        lines += [f"- {host}: {text}" for host, text in failures]
    return "\n".join(lines) + "\n"


def headline(cell: Mapping[str, Any]) -> Mapping[str, Any]:
    """The figure a cell is shown by: the first failure; for a pass the last figure (a
    test's headline comes last: busbw after #wrong). The TUI's live matrix shows the same."""
    verdict = cell["verdict"]
    shown = [f for f in cell["figures"] if f.get("verdict") == verdict] or cell["figures"]
    headline: Mapping[str, Any] = shown[0] if verdict == "fail" else shown[-1]
    return headline


def value_text(fig: Mapping[str, Any]) -> str:
    """A figure's value with its unit (``182.4 GB/s``); empty when it has none."""
    value = fig.get("value")
    if value is None:
        return ""
    unit = f" {fig['unit']}" if fig.get("unit") else ""
    return (f"{value:g}" if isinstance(value, float) else str(value)) + unit


def mark(verdict: str) -> str:
    """How a verdict is written in a cell: FAIL in capitals, the others as they are."""
    return _MARK.get(verdict, verdict)


def _cell_text(cell: Mapping[str, Any]) -> str:
    verdict = cell["verdict"]
    worst = headline(cell)
    if worst.get("value") is None:
        return _MARK[verdict]
    limit = (f" ({worst['op']} {worst['threshold']})" if worst.get("op")
             and worst.get("threshold") is not None else "")
    return f"{_MARK[verdict]} {worst.get('metric')} {value_text(worst)}{limit}"
