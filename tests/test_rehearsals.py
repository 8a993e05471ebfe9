"""Rehearsals: every runbook walked on recorded findings, one case per conclusion at least."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.runbook.library import all_runbooks
from assistant.runbook.rehearsal import Case, load_cases

REHEARSALS = Path(__file__).parent / "rehearsals"
CASES = [case for path in sorted(REHEARSALS.glob("*.yaml")) for case in load_cases(path)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.runbook}: {c.name}" for c in CASES])
def test_case_reaches_expected_conclusion(case: Case) -> None:
    walk = case.walk()
    # The walk must end, not wait on a question the case forgot to answer.
    assert walk.status == "concluded", f"stopped at {walk.current} ({walk.status})"
    assert walk.conclusion().id == case.conclusion
    if case.path is not None:
        assert walk.path() == case.path


def test_every_conclusion_is_rehearsed() -> None:
    covered = {(c.runbook, c.conclusion) for c in CASES}
    # catalogued-fault (every runbook's) is reached only from an unexplained conclusion
    missing = [f"{r.id}:{n.id}" for r in all_runbooks() for n in r.conclusions()
               if (r.id, n.id) not in covered and not (
                   n.id == "catalogued-fault"
                   and not any(c.unexplained for c in r.conclusions()))]
    assert not missing, f"conclusions without a rehearsal case: {missing}"


# The one pair allowed to differ: crash's cuda-oom says the crash was a CUDA out-of-memory;
# the oom runbook, walked next, refines it (fragmentation, activations, batch, plan).
REFINED = {frozenset({("crash", "cuda-oom"), ("oom", "fragmentation")})}


def test_the_same_fault_has_the_same_code_in_every_runbook() -> None:
    # A port down is ib-link-fault whether the job hung, crashed or crawled: history and
    # correlate count one code per fault, not one per runbook that met it. Two runbooks'
    # conclusions resting on the same evidence are the same fault, so they share the id.
    seen: dict[frozenset[str], list[tuple[str, str]]] = {}
    for book in all_runbooks():
        for node in book.conclusions():
            if node.evidence:
                seen.setdefault(frozenset(node.evidence), []).append((book.id, node.id))
    # (within one runbook, conclusions on the same evidence are told apart by answers)
    split = [(a, b) for named in seen.values() for a in named for b in named
             if a[0] < b[0] and a[1] != b[1] and frozenset({a, b}) not in REFINED]
    assert not split, f"one fault, several codes: {split}"


@pytest.mark.parametrize("runbook", ["hang", "crash", "low-bandwidth"])
def test_a_port_down_is_an_ib_link_fault_in_every_runbook(runbook: str) -> None:
    named = {c.conclusion for c in CASES if c.runbook == runbook
             and any(f.get("code") == "ib-port-down" for p in c.probes.values()
                     for f in p.get("findings", []))}
    assert named == {"ib-link-fault"}, (runbook, named)
