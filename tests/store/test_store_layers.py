"""The store's modules import one another in one direction: no circle, ``base`` at the bottom.

A circle between two store modules is what forced imports inside functions before; this reads
every module's imports (function-level ones included) so a new circle fails here, not later as
an ImportError that depends on which module happened to be imported first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

STORE = Path(__file__).resolve().parents[2] / "assistant" / "store"


def store_imports() -> nx.DiGraph:
    """module -> the sibling store modules it imports (``from . import x``, ``from .x import``,
    ``import assistant.store.x``, ``from assistant.store.x import``)."""
    names = {p.stem for p in STORE.glob("*.py")} - {"__init__"}
    graph = nx.DiGraph()
    for path in STORE.glob("*.py"):
        module = path.stem
        graph.add_node(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level == 1 or base == "assistant.store":
                    base = base.removeprefix("assistant.store")
                    targets = [base.lstrip(".")] if base.strip(".") else \
                        [a.name for a in node.names]
                elif base.startswith("assistant.store."):
                    targets = [base.split(".")[2]]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".")[2] for a in node.names
                           if a.name.startswith("assistant.store.")]
            for target in targets:
                if target in names and target != module:
                    graph.add_edge(module, target)
    return graph


def test_store_modules_import_each_other_without_a_circle() -> None:
    graph = store_imports()
    assert graph.has_edge("db", "writes")  # the reader sees the graph was really built
    cycles = list(nx.simple_cycles(graph))
    assert cycles == [], f"store modules import each other in a circle: {cycles}"


def test_base_is_the_leaf() -> None:
    graph = store_imports()
    assert list(graph.successors("base")) == []
    assert {"db", "writes", "recorder", "drills"} <= set(graph.predecessors("base"))
