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
