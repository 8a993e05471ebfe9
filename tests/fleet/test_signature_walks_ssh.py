"""Catalogued fault examples walked over real loopback sshd: the same verdict checks as
tests/test_signature_walks.py (each fault named on its host with its action, no healthy twin
accused), with the outputs coming back through the evidence sweep's one SSH round trip per host.

The session's replay fleet has 16 hosts, so a fleet here holds one example per component (seven
faults, seven twins, two baseline hosts). The first fleets span every component of
fixtures/signatures; all examples are walked on the replay transport in the other test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.fleet.scenario import load_scenario
from tests.fleet import replayfleet, sshfleet
from tests.signature_examples import component, fleets, scenario_yaml, walked_examples
from tests.test_signature_walks import RUNBOOKS, check_verdicts

pytestmark = pytest.mark.ssh

FLEETS = fleets(hosts=len(replayfleet.HOSTS), per_component=1)[:3]


def test_the_fleets_walked_over_ssh_span_every_component() -> None:
    walked = {s for f in FLEETS for s in f["faults"].values()}
    components = {component(ex) for ex in walked_examples()}
    assert {component(ex) for ex in walked_examples() if ex["signature"] in walked} == components


@pytest.mark.parametrize("runbook", RUNBOOKS)
@pytest.mark.parametrize("index", range(len(FLEETS)))
def test_every_fault_is_named_over_ssh_and_no_twin_accused(
        index: int, runbook: str, replay_fleet: tuple[sshfleet.SSHFleet, Path],
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ssh_fleet, replay = replay_fleet
    fleet = FLEETS[index]
    scenario_dir = tmp_path / f"signatures-{index}-{runbook}"
    scenario_dir.mkdir()
    (scenario_dir / "scenario.yaml").write_text(scenario_yaml(fleet, runbook))
    inventory = replayfleet.stage(load_scenario(str(scenario_dir)), ssh_fleet, replay, tmp_path)
    code = main(["run", runbook, "--inventory", str(inventory), "--auto", "--json",
                 "--timeout", "20", "--deadline", "60", "--connect-timeout", "5"])
    doc = json.loads(capsys.readouterr().out)
    check_verdicts(fleet, doc)
    assert code != 0
