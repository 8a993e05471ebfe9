"""Catalogued fault examples walked over real loopback sshd: the same verdict checks as
tests/test_signature_walks.py (each fault named on its host with its action, no healthy twin
accused), with the outputs coming back through the evidence sweep's one SSH round trip per host.

Every example of the swept components is walked here, from two runbooks: the session's replay
fleet has 64 hosts, so a fleet holds up to eight examples of a component (each fault and its
twin on hosts of their own, the baseline the majority of every component).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assistant.cli import main
from assistant.fleet.scenario import load_scenario
from tests.fleet import replayfleet, sshfleet
from tests.signature_examples import fleets, scenario_yaml, walked_examples
from tests.test_signature_walks import RUNBOOKS, check_verdicts

pytestmark = pytest.mark.ssh

FLEETS = fleets(hosts=len(replayfleet.HOSTS), per_component=8)


def test_the_fleets_walked_over_ssh_hold_every_swept_example() -> None:
    held = {s for f in FLEETS for s in f["faults"].values()}
    assert held == {ex["signature"] for ex in walked_examples()}


def walk_over_ssh(index: int, runbook: str, replay_fleet: tuple[sshfleet.SSHFleet, Path],
                  tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: int = 1
                  ) -> dict[str, Any]:
    """Fleet *index* staged on the session's replay fleet and walked from *runbook* (its hosts
    sharded over *workers* processes); the walk's --json document."""
    ssh_fleet, replay = replay_fleet
    fleet = FLEETS[index]
    scenario_dir = tmp_path / f"signatures-{index}-{runbook}"
    scenario_dir.mkdir()
    (scenario_dir / "scenario.yaml").write_text(scenario_yaml(fleet, runbook))
    inventory = replayfleet.stage(load_scenario(str(scenario_dir)), ssh_fleet, replay, tmp_path)
    code = main(["run", runbook, "--inventory", str(inventory), "--auto", "--json",
                 "--timeout", "20", "--deadline", "60", "--workers", str(workers),
                 *replayfleet.CONNECT])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    check_verdicts(fleet, doc)
    assert code != 0
    return doc


# From hang here; from checkpoint-stall in test_signature_walks_ssh_checkpoint.py (a file of
# its own, so that the suite's workers each take one of the two sets: tests/conftest.py).
@pytest.mark.parametrize("index", range(len(FLEETS)))
def test_every_fault_is_named_over_ssh_and_no_twin_accused(
        index: int, replay_fleet: tuple[sshfleet.SSHFleet, Path],
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    walk_over_ssh(index, RUNBOOKS[0], replay_fleet, tmp_path, capsys)
