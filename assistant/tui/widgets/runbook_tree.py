"""The runbook as a tree: the path so far, the current node, and the road ahead.

A runbook is a graph (several branches lead to the same drain action or conclusion, question
loops are legal), so it is not drawn whole: the steps taken are a list of ✓ rows, the current
node is expanded to show where each of its branches goes, and every node ahead can be opened
to look further down the road (children are added when a node is expanded, so loops are fine).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from assistant.runbook.conditions import describe
from assistant.runbook.model import Node, Runbook

from ..look import KIND_MARK, SEVERITY_STYLE


@dataclass(frozen=True)
class Item:
    node: str
    role: str  # "done" | "current" | "ahead"


class RunbookTree(Tree[Item]):
    """Call ``show(steps, current, status)`` whenever the walk moves."""

    def __init__(self, runbook: Runbook, **kwargs: Any) -> None:
        super().__init__(Text(runbook.title), **kwargs)
        self.runbook = runbook
        self.show_root = False
        self.guide_depth = 2
        self.current_item: TreeNode[Item] | None = None

    def on_mount(self) -> None:
        self.show([], self.runbook.start, "ready")

    def show(self, steps: Sequence[dict[str, Any]], current: str | None, status: str) -> None:
        """Rebuild from the walk's steps (``Walk.to_dict()["steps"]``) and its current node."""
        self.clear()
        for step in steps:
            node = self.runbook.node(step["node"])
            if node.kind == "conclusion":
                label = Text.assemble(("■ ", SEVERITY_STYLE.get(node.severity, "")),
                                      (node.title, "bold"))
            else:
                label = Text.assemble(("✓ ", "green"), node.title)
                action = step.get("action") or {}
                if action.get("command"):
                    label.append(" · confirmed" if action.get("confirmed") else " · not run",
                                 style="dim")
                elif step.get("because"):
                    label.append(f" · {step['because']}", style="dim")
            self.root.add_leaf(label, data=Item(node.id, "done"))
        self.current_item = None
        if status != "concluded" and current:
            node = self.runbook.node(current)
            mark = {"cancelled": "✗ ", "failed": "✗ "}.get(status, "◆ ")
            label = Text.assemble((mark + node.title, "bold reverse"),
                                  (f"  {KIND_MARK[node.kind]}", "dim"))
            self.current_item = self.root.add(label, data=Item(node.id, "current"), expand=True)
            self._add_road(self.current_item, node)
        target = self.current_item or (self.root.children[-1] if self.root.children else None)
        if target is not None:
            self.call_after_refresh(self.move_cursor, target)

    def _add_road(self, parent: TreeNode[Item], node: Node) -> None:
        """The branches out of *node*: where each leads, and why it would be taken."""
        for label, goto in _exits(node):
            target = self.runbook.node(goto)
            text = Text(target.title)
            if target.kind == "conclusion":
                text.stylize(SEVERITY_STYLE.get(target.severity, ""))
            if label:
                text.append(f"  if {label}", style="dim")
            parent.add(text, data=Item(goto, "ahead"), allow_expand=bool(target.successors()))

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[Item]) -> None:
        item = event.node.data
        if item is not None and item.role == "ahead" and not event.node.children:
            self._add_road(event.node, self.runbook.node(item.node))


def _exits(node: Node) -> list[tuple[str, str]]:
    """(why, goto) for every way out of *node*."""
    if node.kind == "probe":
        return [(b.label or (describe(b.when) if b.when else "otherwise"), b.goto)
                for b in node.branches]
    if node.kind == "question":
        return [(f"answer: {c.label}", c.goto) for c in node.choices]
    if node.kind == "action" and node.next:
        return [("then", node.next)]
    return []
