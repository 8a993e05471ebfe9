"""The catalogued faults that only a runbook step reads (not the evidence sweep): the job
logs diag is pointed at (joblog: CUDA out of memory, a failed rendezvous, an import error, a
NaN loss) and the ranks' NCCL watchdog lines (ranks: a rank stuck in a collective), walked
over real loopback sshd from two runbooks each, one of them not the obvious one.

Each component's examples go in one fleet (each fault on a host of its own, its twin on the
next, the rest the healthy baseline); the verdict checks are those of every other catalogued
example (tests/test_signature_walks.py): each fault named on its host, no twin or baseline
host accused, no walk left waiting while a catalogued fault stands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assistant.cli import main
from assistant.fleet.scenario import load_scenario
from tests.fleet import replayfleet, sshfleet
from tests.signature_examples import component, examples, scenario_yaml, section_edits
from tests.test_signature_walks import check_verdicts

pytestmark = pytest.mark.ssh

# component -> the runbooks whose --auto walk reaches a step reading it: the first is not the
# obvious runbook of any of its examples (oom, launch-failure or loss-divergence for the job
# logs' lines; hang for a rank stuck in a collective)
RUNBOOKS = {"joblog": ("crash", "loss-divergence"), "ranks": ("low-utilization", "hang")}


def fleet_of(name: str) -> dict[str, Any]:
    chosen = [ex for _, ex in examples() if component(ex) == name]
    fleet: dict[str, Any] = {"hosts": [f"gpu{i:03d}" for i in range(1, 2 * len(chosen) + 3)],
                             "faults": {}, "twins": {}, "outputs": {name: {}}}
    for i, example in enumerate(chosen):
        fault, twin = f"gpu{2 * i + 1:03d}", f"gpu{2 * i + 2:03d}"
        fleet["faults"][fault] = fleet["twins"][twin] = example["signature"]
        fleet["outputs"][name][fault] = {"sections": section_edits(example["fault"])}
        fleet["outputs"][name][twin] = {"sections": section_edits(example["twin"])}
    return fleet


def test_every_example_not_swept_is_walked_here() -> None:
    from probes.catalog import load_catalog, sweep_components

    swept = set(sweep_components(load_catalog()))
    step_only = {component(ex) for _, ex in examples()} - swept - {"scheduler"}
    assert step_only == set(RUNBOOKS)  # the scheduler's: tests/fleet/test_job_sweep_ssh.py


@pytest.mark.parametrize(("name", "runbook"),
                         [(name, rb) for name, rbs in RUNBOOKS.items() for rb in rbs])
def test_a_fault_only_a_step_reads_is_named_over_ssh_and_no_twin_accused(
        name: str, runbook: str, replay_fleet: tuple[sshfleet.SSHFleet, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    ssh_fleet, replay = replay_fleet
    fleet = fleet_of(name)
    scenario_dir = tmp_path / f"step-{name}-{runbook}"
    scenario_dir.mkdir()
    (scenario_dir / "scenario.yaml").write_text(scenario_yaml(fleet, runbook))
    inventory = replayfleet.stage(load_scenario(str(scenario_dir)), ssh_fleet, replay, tmp_path)
    main(["run", runbook, "--inventory", str(inventory), "--auto", "--json",
          "--timeout", "20", "--deadline", "60", *replayfleet.CONNECT])
    doc = json.loads(capsys.readouterr().out)
    check_verdicts(fleet, doc)
    # named by the step's own probe, over SSH (not by the sweep's reading of other logs)
    for host, sig in fleet["faults"].items():
        assert any(f["code"] == sig and f["probe"] == name and host in f["hosts"]
                   for f in doc["findings"]), (host, sig)
