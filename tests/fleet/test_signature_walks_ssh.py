"""Catalogued fault examples walked over real loopback sshd: the same verdict checks as
tests/test_signature_walks.py (each fault named on its host with its action, no healthy twin
accused), with the outputs coming back through the evidence sweep's one SSH round trip per host.

Every example of the swept components is walked here, each fleet from one of the two runbooks
(tests/test_signature_walks.py walks it from the other through replay): the session's replay
fleet has 64 hosts, so a fleet holds up to eight examples of a component (each fault and its
twin on hosts of their own, the baseline the majority of every component).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.fleet.scenario import load_scenario
from tests.fleet import replayfleet, sshfleet
from tests.signature_examples import fleets, scenario_yaml, walked_examples
from tests.test_signature_walks import check_verdicts, over_ssh

pytestmark = pytest.mark.ssh

FLEETS = fleets(hosts=len(replayfleet.HOSTS), per_component=8)


def test_the_fleets_walked_over_ssh_hold_every_swept_example() -> None:
    held = {s for f in FLEETS for s in f["faults"].values()}
    assert held == {ex["signature"] for ex in walked_examples()}


@pytest.mark.parametrize("index", range(len(FLEETS)))
def test_every_fault_is_named_over_ssh_and_no_twin_accused(
        index: int, replay_fleet: tuple[sshfleet.SSHFleet, Path],
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ssh_fleet, replay = replay_fleet
    fleet, runbook = FLEETS[index], over_ssh(index)
    scenario_dir = tmp_path / f"signatures-{index}-{runbook}"
    scenario_dir.mkdir()
    (scenario_dir / "scenario.yaml").write_text(scenario_yaml(fleet, runbook))
    inventory = replayfleet.stage(load_scenario(str(scenario_dir)), ssh_fleet, replay, tmp_path)
    code = main(["run", runbook, "--inventory", str(inventory), "--auto", "--json",
                 "--timeout", "20", "--deadline", "60", *replayfleet.CONNECT])
    doc = json.loads(capsys.readouterr().out)
    check_verdicts(fleet, doc)
    assert code != 0
