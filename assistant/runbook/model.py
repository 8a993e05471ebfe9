"""The runbook model: what a validated YAML runbook becomes.

Only the validator builds these (see ``loader.load_runbook``), so the engine can trust that
every ``goto`` exists, every condition is well formed and every walk can reach a conclusion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

NodeKind = Literal["probe", "question", "action", "conclusion"]
# The step parameter the engine sets on an active probe once the walk confirmed its step; the
# provider reads it from the step's own params (never the operator's --param), and the
# validator refuses it in a runbook file.
CONFIRMED_ACTIVE = "confirmed_active"
Condition = dict[str, Any]  # structured YAML, see docs/runbook-format.md


@dataclass(frozen=True)
class Branch:
    goto: str
    when: Condition | None = None  # None: the fallback branch, taken when nothing else holds
    label: str = ""


@dataclass(frozen=True)
class Choice:
    id: str
    label: str
    goto: str
    # When this holds on the evidence, the walk answers with this choice itself (and says so).
    when: Condition | None = None


@dataclass(frozen=True)
class Node:
    id: str
    kind: NodeKind
    title: str
    explain: str
    kb: tuple[str, ...] = ()
    line: int = 0
    # probe / action: "all", {finding: CODE | [CODE, ...]} — the hosts with those findings —
    # or {without_finding: [CODE, ...]} — the walk's hosts that have none of them
    hosts: str | dict[str, Any] = "all"
    # probe
    probes: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    branches: tuple[Branch, ...] = ()
    # question / action
    text: str = ""
    choices: tuple[Choice, ...] = ()
    # action
    command: str | None = None
    next: str | None = None
    # conclusion
    cause: str = ""
    fix: str = ""
    severity: str = "info"
    evidence: tuple[str, ...] = ()
    accuses: str = "evidence"  # or "none": the cause is not the hosts' (code, configuration)
    # What must hold for this cause (confirming facts, findings, answers); None: nothing named.
    requires: Condition | None = None
    # "No cause found": a standing catalogued fault takes its place (docs/fault-format.md).
    unexplained: bool = False

    def successors(self) -> list[str]:
        """Every node this one can lead to, in the order the runbook lists them."""
        if self.kind == "probe":
            return [branch.goto for branch in self.branches]
        if self.kind == "question":
            return [choice.goto for choice in self.choices]
        if self.kind == "action":
            return [self.next] if self.next else []
        return []

    def choice(self, choice_id: str) -> Choice | None:
        return next((c for c in self.choices if c.id == choice_id), None)


@dataclass(frozen=True)
class Runbook:
    id: str
    title: str
    summary: str
    symptoms: tuple[str, ...]
    tags: tuple[str, ...]
    kb: tuple[str, ...]
    start: str
    nodes: dict[str, Node]
    path: Path | None = None
    # Tried by every probe step before its own branches: a condition that ends any walk the
    # same way wherever it shows up (diag cannot reach the fleet), written once per runbook.
    guards: tuple[Branch, ...] = ()

    def node(self, node_id: str) -> Node:
        if node_id == SWEEP and SWEEP not in self.nodes:
            return sweep_node(self.start)
        return self.nodes[node_id]

    def conclusions(self) -> list[Node]:
        return [node for node in self.nodes.values() if node.kind == "conclusion"]

    def successors(self, node: Node) -> list[str]:
        """Every node *node* can lead to in this runbook: a probe step's guards, then its own."""
        guards = [g.goto for g in self.guards] if node.kind == "probe" else []
        return [*guards, *node.successors()]


# The evidence sweep every walk starts with (runbook/sweeping.py): a step of every walk that is
# no node of the runbook file; front ends that show a step by its node get this one.
SWEEP = "sweep"


@lru_cache(maxsize=64)
def sweep_node(start: str) -> Node:
    return Node(id=SWEEP, kind="probe", title="Evidence sweep",
                explain=("Before the runbook's first step, every host is read once for every "
                         "family of faults (GPU, driver, NVLink, fabric, kernel, storage, job "
                         "logs): one round trip per host, passive, bounded in time. Its "
                         "findings count for every branch after it, and a catalogued fault of "
                         "a host is named whichever runbook is walked."),
                branches=(Branch(goto=start, label="evidence swept; the runbook starts"),))


def build_runbook(data: dict[str, Any], path: Path | None, lines: dict[str, int]) -> Runbook:
    """Turn schema-valid runbook data into the model (no checking happens here)."""
    nodes = {}
    for node_id, raw in data["nodes"].items():
        nodes[node_id] = Node(
            id=node_id,
            kind=raw["kind"],
            title=raw["title"],
            explain=raw["explain"],
            kb=tuple(raw.get("kb", ())),
            line=lines.get(node_id, 0),
            probes=tuple(raw.get("probes", ())),
            params=dict(raw.get("params") or {}),
            branches=tuple(
                Branch(goto=b["goto"], when=b.get("when"), label=b.get("label", ""))
                for b in raw.get("branches", ())
            ),
            text=raw.get("text", ""),
            choices=tuple(Choice(str(c["id"]), c["label"], c["goto"], c.get("when"))
                          for c in raw.get("choices", ())),
            command=raw.get("command"),
            hosts=raw.get("hosts", "all"),
            next=raw.get("next"),
            cause=raw.get("cause", ""),
            fix=raw.get("fix", ""),
            severity=raw.get("severity", "info"),
            evidence=tuple(raw.get("evidence", ())),
            accuses=raw.get("accuses", "evidence"),
            requires=raw.get("requires"),
            unexplained=bool(raw.get("unexplained", False)),
        )
    return Runbook(
        guards=tuple(Branch(goto=g["goto"], when=g.get("when"), label=g.get("label", ""))
                     for g in data.get("guards", ())),
        id=data["id"],
        title=data["title"],
        summary=data["summary"],
        symptoms=tuple(data["symptoms"]),
        tags=tuple(data.get("tags", ())),
        kb=tuple(data.get("kb", ())),
        start=data["start"],
        nodes=nodes,
        path=path,
    )


def runbook_plain(runbook: Runbook) -> dict[str, Any]:
    """*runbook* as plain data (the start cache keeps validated runbooks as data that cannot
    run, never pickles): every field by name, so a field added to the model is kept too."""
    from dataclasses import fields

    def plain(obj: Any) -> dict[str, Any]:
        return {f.name: getattr(obj, f.name) for f in fields(obj)}

    out = plain(runbook)
    out["path"] = None if runbook.path is None else str(runbook.path)
    out["guards"] = tuple(plain(guard) for guard in runbook.guards)
    out["nodes"] = {node_id: {**plain(node),
                              "branches": tuple(plain(b) for b in node.branches),
                              "choices": tuple(plain(c) for c in node.choices)}
                    for node_id, node in runbook.nodes.items()}
    return out


def runbook_from_plain(data: dict[str, Any]) -> Runbook:
    """The runbook ``runbook_plain`` made *data* from."""
    nodes = {node_id: Node(**{**node,
                              "branches": tuple(Branch(**b) for b in node["branches"]),
                              "choices": tuple(Choice(**c) for c in node["choices"])})
             for node_id, node in data["nodes"].items()}
    path = data["path"]
    return Runbook(**{**data, "nodes": nodes, "path": None if path is None else Path(path),
                      "guards": tuple(Branch(**g) for g in data["guards"])})
