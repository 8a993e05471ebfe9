"""Rehearsals: a runbook walked on recorded findings and facts, no hosts involved.

A rehearsal file says, for each case, what each probe would report and which answers the
operator gives, and the path and conclusion expected. It is how a runbook author proves every
conclusion is reachable for the right reason (after StackStorm's ``orquesta-rehearse``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant import yamlfile
from probes.catalog import load_catalog
from probes.model import Finding, HostResult, ProbeOutcome

from . import events as ev
from .engine import Walk
from .library import get_runbook


class RecordedProvider:
    """A probe provider that answers from recorded data instead of running anything.

    ``recorded`` maps probe -> {findings: [...], facts: {host: {...}}, states: {host: state}}.
    A probe with no record reports every host ok with no facts and no findings.
    """

    def __init__(self, recorded: Mapping[str, Mapping[str, Any]]) -> None:
        self.recorded = recorded
        self.calls: list[str] = []

    def run_probes(self, probes: Sequence[str], hosts: Sequence[str],
                   params: Mapping[str, Mapping[str, Any]],
                   emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        codes = load_catalog().codes
        outcomes = []
        for probe in probes:
            self.calls.append(probe)
            record = self.recorded.get(probe, {})
            states = record.get("states", {})
            facts = record.get("facts", {})
            outcome = ProbeOutcome(probe)
            for host in hosts:
                emit(ev.ProbeStarted(probe, host))
                state = states.get(host, "ok")
                outcome.hosts[host] = HostResult(host, state, dict(facts.get(host, {})),
                                                 reason="recorded" if state != "ok" else "")
                emit(ev.ProbeFinished(probe, host, state))
            for raw in record.get("findings", []):
                code = raw["code"]
                outcome.findings.append(Finding(
                    code=code,
                    severity=raw.get("severity", codes[code].severity if code in codes
                                     else "warning"),
                    hosts=tuple(raw.get("hosts", hosts)),
                    message=raw.get("message", codes[code].summary if code in codes else code),
                    probe=probe,
                    evidence=dict(raw.get("evidence", {}))))
            outcomes.append(outcome)
        return outcomes


@dataclass
class Case:
    name: str
    runbook: str
    hosts: list[str]
    probes: dict[str, Any]
    answers: dict[str, str]
    conclusion: str
    path: list[str] | None = None
    events: list[ev.Event] = field(default_factory=list)

    def walk(self) -> Walk:
        """Walk the case's runbook on its recorded data (clock frozen: results are exact)."""
        # Steps that load nodes are confirmed (nothing loads a node here); a case that wants
        # them refused says so with an active-test-not-confirmed finding. Actions are not.
        walk = Walk(get_runbook(self.runbook), self.hosts, RecordedProvider(self.probes),
                    answers=self.answers, listeners=[self.events.append], clock=lambda: 0.0,
                    confirm=lambda node, hosts: node.kind == "probe")
        walk.run()
        return walk


def load_cases(path: Path) -> list[Case]:
    data = yamlfile.load_file(path).data  # keeps `yes` as text
    default_hosts = data.get("hosts", ["gpu001", "gpu002", "gpu003", "gpu004"])
    return [Case(name=case["name"], runbook=data["runbook"],
                 hosts=case.get("hosts", default_hosts), probes=case.get("probes", {}),
                 answers={k: str(v) for k, v in (case.get("answers") or {}).items()},
                 conclusion=case["conclusion"], path=case.get("path"))
            for case in data["cases"]]
