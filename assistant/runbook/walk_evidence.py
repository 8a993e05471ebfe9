"""What a walk knows, asked of it by the engine, the report and every front end: its findings
and facts as evidence, what a conclusion cites and whom it accuses, the hosts a step is aimed
at. A mixin of ``Walk`` (runbook.engine): it reads the walk's steps and changes nothing, so the
engine's own module keeps to moving the walk on.
"""

from __future__ import annotations

from typing import Any

from probes.catalog import load_catalog
from probes.model import SEVERITY_RANK, Finding

from .conditions import Evidence, code_matches
from .evidence_rules import EvidenceRules
from .model import SWEEP, Node
from .step import Step

# Findings about diag's access to hosts: once a host did not let diag in, every later step
# skips it with the same verdict in other words ("during ranks"); it is said once.
ACCESS_CODES = frozenset({"host-unreachable", "host-access-failed", "fleet-unreachable"})


class WalkEvidence(EvidenceRules):
    """The queries of a walk's evidence (see the module doc)."""

    hosts: tuple[str, ...]
    steps: list[Step]
    status: str

    def findings(self) -> list[Finding]:
        """Every finding of the walk, each once: a step that reuses the sweep's output of a
        probe raises the same findings again, which are not new evidence."""
        seen: set[tuple[str, str, tuple[str, ...], str]] = set()
        found = []
        for step in self.steps:
            for outcome in step.outcomes:
                for f in outcome.findings:
                    if finding_key(f) not in seen:
                        seen.add(finding_key(f))
                        found.append(f)
        return found

    def evidence(self) -> Evidence:
        facts: dict[str, dict[str, dict[str, Any]]] = {}
        for step in self.steps:
            for outcome in step.outcomes:
                per_host = facts.setdefault(outcome.probe, {})
                for host, result in outcome.hosts.items():
                    if result.state == "ok":
                        per_host[host] = result.facts
        answers = {s.node: s.answer for s in self.steps if s.answer is not None}
        return Evidence(self.findings(), facts, answers, len(self.hosts))

    def evidence_for(self, node: Node) -> list[Finding]:
        """The findings a conclusion names as its evidence."""
        if not node.evidence:
            return []
        return [f for f in self.findings()
                if any(code_matches(f.code, pat) for pat in node.evidence)]

    def cited_evidence(self, node: Node) -> list[Finding]:
        """The evidence a conclusion shows: its findings, less the info-level ones about hosts
        it does not accuse (an ignorable XID 43 on a healthy host is no evidence against the
        host that has an XID 79, and listed beside it, it reads as an accusation)."""
        found = self.evidence_for(node)
        accused = set(self.accused_hosts(node))
        if not accused:
            return found
        return [f for f in found if not f.hosts or set(f.hosts) & accused
                or SEVERITY_RANK.get(f.severity, 0) >= SEVERITY_RANK["warning"]]

    def accused_hosts(self, node: Node) -> tuple[str, ...]:
        """The hosts a conclusion blames: those its evidence names with a finding of warning
        or worse that is about the host (not one that only says diag could not look). A
        conclusion of severity info ("nothing found") accuses nobody, nor one whose cause is
        not the hosts' (``accuses: none``: the application's code, the job's settings)."""
        if node.kind != "conclusion" or node.severity == "info" or node.accuses == "none":
            return ()
        blind = set(load_catalog().category("not-evidence"))
        named = {h for f in self.evidence_for(node) if f.code not in blind
                 and SEVERITY_RANK.get(f.severity, 0) >= SEVERITY_RANK["warning"]
                 for h in f.hosts}
        return tuple(h for h in self.hosts if h in named)

    def question_hosts(self, node: Node) -> tuple[str, ...]:
        """The hosts a question is about: those its ``hosts`` selector names, else all."""
        return (self.target_hosts(node) or self.hosts) if isinstance(node.hosts, dict) \
            else self.hosts

    def actions(self) -> list[dict[str, Any]]:
        """Every action step of the walk so far: its node and what was done."""
        return [{"node": s.node, **s.action} for s in self.steps if s.action]

    def target_hosts(self, node: Node) -> tuple[str, ...]:
        """The hosts a probe or action node names: all, or those with some findings."""
        if isinstance(node.hosts, dict):
            evidence = self.evidence()
            exclude = excludes(node)
            codes = node.hosts["without_finding" if exclude else "finding"]
            chosen = set().union(*(evidence.hosts_with(c) for c in
                                   ([codes] if isinstance(codes, str) else codes)))
            return tuple(h for h in self.hosts if (h in chosen) != exclude)
        return self.hosts

    def path(self) -> list[str]:
        """The runbook's nodes the walk went through (the sweep before them is a step, not a
        node of the runbook)."""
        return [step.node for step in self.steps if step.kind != SWEEP]

    def conclusion(self) -> Node | None:
        if self.status == "concluded" and self.steps:
            return self.runbook.node(self.steps[-1].node)
        return None


def finding_key(finding: Finding) -> tuple[str, str, tuple[str, ...], str]:
    if finding.code in ACCESS_CODES:
        return (finding.code, finding.severity, finding.hosts, "")
    return (finding.code, finding.severity, finding.hosts, finding.message)


def excludes(node: Node) -> bool:
    """A ``{without_finding: [...]}`` selector: the hosts still standing (maybe none)."""
    return isinstance(node.hosts, dict) and "without_finding" in node.hosts
