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
from .library import get_runbook, is_path


class RecordedProvider:
    """A probe provider that answers from recorded data instead of running anything.

    ``recorded`` maps probe -> {findings: [...], facts: {host: {...}}, states: {host: state}}.
    A state is a host state ("unreachable"), or a mapping {state, reason, phase, section} when
    the case depends on why (a DNS failure on every host; a probe that hung in nvidia-smi).
    A probe with no record reports every host ok with no facts and no findings.
    """

    def __init__(self, recorded: Mapping[str, Mapping[str, Any]]) -> None:
        self.recorded = recorded
        self.calls: list[str] = []

    def run_sweep(self, components: Sequence[str], hosts: Sequence[str],
                  params: Mapping[str, Mapping[str, Any]],
                  emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        """The evidence sweep answered from the record: what the case says each component
        found (a component the case does not record found nothing)."""
        return self.run_probes([c for c in components if c in self.recorded], hosts, params,
                               emit)

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
                raw_state = states.get(host, "ok")
                spec = raw_state if isinstance(raw_state, Mapping) else {"state": raw_state}
                state = spec["state"]
                outcome.hosts[host] = HostResult(
                    host, state, dict(facts.get(host, {})),
                    reason=spec.get("reason", "recorded" if state != "ok" else ""),
                    phase=spec.get("phase", ""), section=spec.get("section", ""))
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


class RehearsalError(ValueError):
    """A rehearsal file that cannot be used; the message names the file and the problem."""


def load_cases(path: Path) -> list[Case]:
    """The cases of a rehearsal file. Its ``runbook`` is an id on the search path or a file
    (relative to the rehearsal file), so a team rehearses its own runbook where it keeps it."""
    try:
        data = yamlfile.load_file(path).data  # keeps `yes` as text
    except yamlfile.YamlFileError as exc:
        raise RehearsalError(str(exc)) from None
    if not isinstance(data, dict) or "runbook" not in data or not data.get("cases"):
        raise RehearsalError(f"{path}: a rehearsal file is a mapping with `runbook` and a "
                             "list of `cases` (docs/runbook-format.md, Rehearsals)")
    runbook = str(data["runbook"])
    if is_path(runbook):
        runbook = str((path.parent / runbook).resolve())
    default_hosts = list(data.get("hosts") or ["gpu001", "gpu002", "gpu003", "gpu004"])
    cases = []
    for number, case in enumerate(data["cases"], 1):
        if not isinstance(case, dict) or "name" not in case or "conclusion" not in case:
            raise RehearsalError(f"{path}: case {number} needs `name` and `conclusion`")
        cases.append(Case(name=str(case["name"]), runbook=runbook,
                          hosts=list(case.get("hosts") or default_hosts),
                          probes=case.get("probes") or {},
                          answers={k: str(v) for k, v in (case.get("answers") or {}).items()},
                          conclusion=str(case["conclusion"]), path=case.get("path")))
    return cases


def rehearse(case: Case) -> tuple[bool, str]:
    """Walk one case: (passed, what happened) — the conclusion reached and, on a mismatch,
    what was expected."""
    walk = case.walk()
    if walk.status != "concluded":
        return False, f"stopped at '{walk.current}' ({walk.status}): answer it in the case"
    reached = walk.conclusion()
    got = reached.id if reached else "-"
    if got != case.conclusion:
        return False, f"reached '{got}', expected '{case.conclusion}' (path: " \
                      f"{' -> '.join(walk.path())})"
    if case.path is not None and walk.path() != case.path:
        return False, f"path {' -> '.join(walk.path())}, expected {' -> '.join(case.path)}"
    return True, f"{got} via {' -> '.join(walk.path())}"
