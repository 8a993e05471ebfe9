"""Runbooks as text: an indented outline for the terminal, DOT and Mermaid for diagrams."""

from __future__ import annotations

import json

from .conditions import describe
from .model import Node, Runbook

_SHAPES = {"probe": "box", "question": "diamond", "action": "parallelogram",
           "conclusion": "doubleoctagon"}


def edges(runbook: Runbook) -> list[tuple[str, str, str]]:
    """(from, to, label) for every edge, in file order."""
    result = []
    for node in runbook.nodes.values():
        if node.kind == "probe":
            result += [(node.id, b.goto, b.label or describe(b.when))
                       for b in (*runbook.guards, *node.branches)]
        elif node.kind == "question":
            result += [(node.id, c.goto, c.label) for c in node.choices]
        elif node.kind == "action" and node.next:
            result.append((node.id, node.next, "then"))
    return result


def to_dot(runbook: Runbook) -> str:
    lines = [f"digraph {json.dumps(runbook.id)} {{", "  rankdir=TB;",
             f"  label={json.dumps(runbook.title)};"]
    for node in runbook.nodes.values():
        label = f"{node.title}\\n({node.kind})"
        lines.append(f"  {json.dumps(node.id)} [shape={_SHAPES[node.kind]}, "
                     f"label=\"{_dot_escape(label)}\"];")
    for src, dst, label in edges(runbook):
        lines.append(f"  {json.dumps(src)} -> {json.dumps(dst)} "
                     f"[label=\"{_dot_escape(label)}\"];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\\\\n", "\\n")


_MERMAID = {"probe": ("[", "]"), "question": ("{", "}"), "action": ("[/", "/]"),
            "conclusion": ("([", "])")}


def to_mermaid(runbook: Runbook) -> str:
    ids = {node_id: f"n{i}" for i, node_id in enumerate(runbook.nodes)}
    lines = ["flowchart TD"]
    for node in runbook.nodes.values():
        left, right = _MERMAID[node.kind]
        lines.append(f"  {ids[node.id]}{left}\"{_mermaid_text(node.title)}\"{right}")
    for src, dst, label in edges(runbook):
        lines.append(f"  {ids[src]} -->|\"{_mermaid_text(label)}\"| {ids[dst]}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("|", "#124;")


def outline(runbook: Runbook) -> str:
    """The tree as indented text; a node seen before is referenced, not repeated."""
    lines = [f"{runbook.title} ({runbook.id})", runbook.summary, ""]
    seen: set[str] = set()

    def visit(node: Node, depth: int, via: str) -> None:
        pad = "  " * depth
        prefix = f"{pad}[{via}] " if via else pad
        if node.id in seen:
            lines.append(f"{prefix}-> {node.id} (see above)")
            return
        seen.add(node.id)
        tag = {"probe": "probe " + ",".join(node.probes), "question": "ask",
               "action": "action", "conclusion": f"CONCLUSION, {node.severity}"}[node.kind]
        lines.append(f"{prefix}{node.id}: {node.title}  <{tag}>")
        if node.kind == "conclusion":
            lines.append(f"{pad}    cause: {node.cause}")
            lines.append(f"{pad}    fix:   {node.fix}")
        for src, dst, label in edges(runbook):
            if src == node.id:
                visit(runbook.node(dst), depth + 1, label)

    visit(runbook.node(runbook.start), 0, "")
    return "\n".join(lines) + "\n"
