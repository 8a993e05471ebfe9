"""Issue 11, tried as a new user would: a fleet over real sshd, one node planted with a fault.

Each fault scenario of issue 11's verdict items (XIDs by the catalog, power and heat, NCCL's
environment, link flap history, RDMA retransmits, PCIe, IB error counters) is replayed over the
session's loopback sshd fleet (tests/fleet/replayfleet.py): every host answers each probe
script with the scenario's recorded output for it (sshd ForceCommand), and ``diag run RUNBOOK
--inventory --auto --json`` walks it through real SSH. The walk must reach the scenario's
conclusion and its evidence must name the planted node and only that node.

The healthy twins (alarming but normal) are pure data: tests/test_scenarios.py walks each of
them on the replay transport with the same assertion (no finding of warning or worse names a
host). One twin walks here too, so a twin's outputs are also seen to accuse nobody when they
come back over SSH; walking all nine again cost ~75 s of the suite for nothing more.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.fleet.scenario import Scenario, load_scenario
from probes.catalog import load_catalog
from tests.fleet import replayfleet, sshfleet

pytestmark = pytest.mark.ssh

FAULTS = ["hang-xid109-ctx-switch-timeout", "low-utilization-power-limit-lowered",
          "low-utilization-thermal-throttle", "hang-nccl-hca-exclude-reversed",
          "hang-ib-link-flapped-recovered", "low-bandwidth-rdma-retransmits",
          "low-bandwidth-nic-pcie-x8", "low-bandwidth-ib-receive-errors"]
TWINS = ["hang-xid-stale-from-last-week"]  # the others: tests/test_scenarios.py


def walk(fleet: tuple[sshfleet.SSHFleet, Path], name: str, tmp_path: Path,
         capsys: pytest.CaptureFixture[str]) -> tuple[Scenario, int, dict]:
    ssh, replay = fleet
    scenario = load_scenario(name)
    inventory = replayfleet.stage(scenario, ssh, replay, tmp_path)
    argv = ["run", scenario.runbook, "--inventory", str(inventory), "--auto", "--json",
            "--timeout", "20", *replayfleet.CONNECT]
    for node, choice in scenario.answers.items():
        argv += ["--answer", f"{node}={choice}"]
    for probe, params in scenario.params.items():
        for key, value in params.items():
            argv += ["--param", f"{probe}.{key}={value}"]
    code = main(argv)
    return scenario, code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", FAULTS)
def test_the_planted_node_and_only_it_is_named(
        replay_fleet: tuple[sshfleet.SSHFleet, Path], name: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    scenario, code, doc = walk(replay_fleet, name, tmp_path, capsys)
    assert {h: s["state"] for h, s in doc["hosts"].items()} == dict.fromkeys(
        scenario.hosts, "ok")  # every host answered over SSH
    assert doc["status"] == "concluded", doc.get("question")
    assert doc["conclusion"]["id"] == scenario.expect["conclusion"], doc["path"]
    named = {h for f in doc["conclusion"]["evidence"] for h in f["hosts"]}
    assert named == set(scenario.expect["only_hosts"]), doc["conclusion"]["evidence"]
    assert code in (1, 3)


@pytest.mark.parametrize("name", TWINS)
def test_the_healthy_twin_names_no_node(
        replay_fleet: tuple[sshfleet.SSHFleet, Path], name: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    scenario, code, doc = walk(replay_fleet, name, tmp_path, capsys)
    assert doc["status"] == "concluded", doc.get("question")
    assert doc["conclusion"]["id"] == scenario.expect["conclusion"], doc["path"]
    blind = set(load_catalog().category("not-evidence"))
    accusing = [f for f in doc["findings"] if f["code"] not in blind and f["hosts"]
                and f["severity"] in ("warning", "error", "critical")]
    assert accusing == [] and code == 0
