"""Warnings (not errors): conclusions that name nothing confirming them.

A verdict must rest on evidence (docs/runbook-format.md, "Conclusions need confirming
evidence"): a conclusion names what confirms it with ``requires`` (facts, findings or answers
that must hold, checked when the walk reaches it) or ``evidence`` (the findings shown with it),
or says it found no cause (``unexplained``). One that does none of these is a cause asserted
on the path alone; the runbook still loads, and ``diag runbooks validate`` says so.
"""

from __future__ import annotations

from .model import Runbook


def warnings(runbook: Runbook, file: str) -> list[str]:
    out = []
    for node in runbook.nodes.values():
        if node.kind != "conclusion" or node.line == 0:  # built-in nodes carry no line
            continue
        if node.requires is None and not node.evidence and not node.unexplained:
            out.append(f"{file}:{node.line}:3: warning: node '{node.id}': the conclusion names "
                       "no confirming evidence (add 'requires:' with the facts, findings or "
                       "answers that must hold for it, or 'evidence:')")
    return out
