"""Each planted fault, walked as a new user would: `diag run RUNBOOK --inventory ... --auto` over a
fleet of real loopback sshd (no replay transport), asserting the diagnosis in the conclusion's
title and that the walk names exactly the planted hosts and drains only the ones it should.

The fleet is the session's 16 real sshd hosts named gpu001..gpu016 (tests/fleet/replayfleet.py,
shared with issue 11's planted faults). Their ForceCommand answers each of diag's probe scripts
(named on its first line) with what the scenario says that host prints (fixtures/scenarios/NAME:
its own output, the scenario default, or the healthy baseline); what a scenario says about hosts
that fail is made real there (a hang after login, a name that does not resolve, a refusal).

To add a fault, add its name to SCENARIOS: it needs ``expect.conclusion`` and ``expect.hosts``
(``[]`` for a healthy twin), and ``expect.drained`` when the walk must act on no host or on
exactly some. A healthy twin whose hosts all answer is walked by tests/test_scenarios.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.fleet.scenario import load_scenario, scenarios_dir
from assistant.runbook.library import get_runbook
from tests.fleet import replayfleet, sshfleet

pytestmark = pytest.mark.ssh

# Faults planted on a node, each walked over sshd. Their healthy twins are pure data (no host
# fails to answer): tests/test_scenarios.py walks every one of them on the replay transport with
# the same assertions (nothing named, nothing drained, exit 0); one walks here too, so a twin's
# outputs are also seen to accuse nobody when they come back over SSH.
SCENARIOS = [
    "hang-diag-cannot-resolve",
    "hang-diag-refused-everywhere",
    "hang-node-unreachable",  # one host of many: still that host, not diag's access
    "hang-gpu-driver-hung",
    "hang-healthy-old-gsp-timeout",  # the twin walked over SSH
    "checkpoint-stall-mount-hung",
    "checkpoint-stall-filesystem-hung",
    "checkpoint-stall-ckpt-in-container",
    "hang-nccl-version-drift-env",
    "low-bandwidth-ib-disabled-one-host",
    "hang-subnet-manager-down",
    "hang-ib-port-down",
    "launch-failure-peer-path-blocked",
]
# queue-idle reads Slurm from the machine diag runs on (the scheduler probe runs on the client),
# not over SSH: its drained-for-hardware walks run against a real Slurm in
# tests/slurm/test_slurm_queue_idle.py.
TIMEOUT_S = 4  # per probe: a planted hang is cut by the transport after this


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_walk_names_the_planted_hosts_and_only_them(
        name: str, replay_fleet: tuple[sshfleet.SSHFleet, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    ssh_fleet, replay = replay_fleet
    scenario = load_scenario(name)
    assert (scenarios_dir() / name).is_dir()
    inventory = replayfleet.stage(scenario, ssh_fleet, replay, tmp_path)
    params = [f"--param={probe}.{key}={json.dumps(value)}"
              for probe, values in scenario.params.items() for key, value in values.items()]
    answers = [f"--answer={node}={choice}" for node, choice in scenario.answers.items()]
    code = main(["run", scenario.runbook, "--inventory", str(inventory), "--auto", "--json",
                 "--timeout", str(TIMEOUT_S), "--deadline", "40", *replayfleet.CONNECT,
                 *params, *answers])
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "concluded", doc.get("question")
    expected = get_runbook(scenario.runbook).node(scenario.expect["conclusion"])
    assert (doc["conclusion"]["id"], doc["conclusion"]["title"]) == (expected.id,
                                                                    expected.title), doc["path"]
    named = {h for f in doc["conclusion"]["evidence"] for h in f["hosts"]}
    acted = {h for step in doc["steps"] for h in (step.get("action") or {}).get("hosts", [])}
    assert named == set(scenario.expect["hosts"]), doc["conclusion"]["evidence"]
    if "drained" in scenario.expect or not scenario.expect["hosts"]:
        assert acted == set(scenario.expect.get("drained", [])), doc["steps"]
    assert set(doc["hosts"]) == set(scenario.hosts)
    assert code == 0 if not scenario.expect["hosts"] else code in (1, 3)
