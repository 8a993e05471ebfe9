"""The evidence sweep and the rules that put evidence before questions (issue 25).

Every walk starts with one round trip per host running every passive component; the runbook's
steps reuse what it read; a catalogued fault of a host is named whichever runbook is walked; a
question the evidence answers is not asked; a conclusion whose confirming evidence does not
hold is not reached.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from assistant.cli import main
from assistant.fleet.replay import ReplayTransport
from assistant.fleet.scenario import load_scenario, patch_sections
from assistant.runbook.engine import Walk
from assistant.runbook.library import get_runbook
from assistant.runbook.provider import FleetProvider
from assistant.runbook.rehearsal import RecordedProvider
from probes import sweep
from probes.catalog import load_catalog, sweep_components

BASELINE = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios" / "_baseline"


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


# --- the sweep's wire format ------------------------------------------------------------------

def test_compose_and_split_are_inverse_and_a_cut_component_is_timed_out() -> None:
    parts = [("gpu", sweep.Part("=== diag:section a\nx\n=== diag:rc a 0\n", 0)),
             ("nvlink", sweep.Part("=== diag:section b\n", None, True)),
             ("host", sweep.Part("", 3))]
    back = sweep.split(sweep.compose(parts))
    assert back["gpu"] == sweep.Part("=== diag:section a\nx\n=== diag:rc a 0\n", 0)
    assert back["nvlink"].timed_out and back["nvlink"].text == "=== diag:section b\n"
    assert back["host"].rc == 3 and not back["host"].timed_out
    # the host's output was cut inside a component: what it printed, as timed out
    cut = sweep.split("=== diag:probe gpu\n=== diag:section a\npartial")
    assert cut["gpu"].timed_out and "partial" in cut["gpu"].text


def test_the_sweep_script_runs_components_concurrently_under_one_limit(tmp_path: Path) -> None:
    # Two components: one answers at once, one would take 30 s. The sweep ends after its limit
    # (2 s), with the first one's output and the second marked as having hit the limit.
    script = sweep.script([("quick", "echo fast; exit 3"), ("slow", "echo begun; sleep 30")], 2)
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=20)
    parts = sweep.split(done.stdout)
    assert parts["quick"] == sweep.Part("fast\n", 3)
    assert parts["slow"].timed_out and parts["slow"].text == "begun\n"


def test_the_sweep_returns_when_its_components_do_and_leaves_nothing_running() -> None:
    # The components end at once: the sweep waits for them, not for its 40 s limit, and its
    # limit watcher ends with it (nothing of the sweep's session is left on the host).
    script = sweep.script([("a", "echo one"), ("b", "sleep 0.2; echo two")], 40, first={"a"})
    run = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True,
                           start_new_session=True)
    out, _ = run.communicate(timeout=30)
    parts = sweep.split(out)
    assert parts["a"] == sweep.Part("one\n", 0) and parts["b"] == sweep.Part("two\n", 0)
    # what is left of the session, zombies aside (an orphan waits for init to reap it): the
    # watcher's sleep would stay 40 s; a loaded machine may take a moment to deliver its kill
    deadline = time.monotonic() + 5
    while True:
        ps = subprocess.run(["ps", "-s", str(run.pid), "-o", "stat=,args="],
                            capture_output=True, text=True).stdout.splitlines()
        left = [row for row in ps if not row.lstrip().startswith("Z")]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert left == [], left


def test_the_sweep_script_is_posix_sh() -> None:
    provider_script = sweep.script([(n, "true") for n in sweep_components(load_catalog())], 25)
    assert subprocess.run(["dash", "-n", "-c", provider_script]).returncode == 0


# --- a walk ---------------------------------------------------------------------------------

def test_a_walk_starts_with_the_sweep_and_steps_reuse_what_it_read() -> None:
    scenario = load_scenario("hang-xid79-fallen-off-bus")
    transport = ReplayTransport(scenario, delay_s=0)
    provider = FleetProvider(transport, attrs=scenario.attrs)
    walk = Walk(get_runbook("hang"), scenario.hosts, provider, answers=scenario.answers)
    walk.run()
    assert walk.steps[0].kind == "sweep" and walk.path()[0] == "check-ranks"
    asked = [label for _, label in transport.commands]
    # one sweep per host, and the gpu step (same script: the runbook's own 240-minute window)
    # never runs nvidia-smi again
    assert asked.count("sweep") == len(scenario.hosts) and "gpu" not in asked
    assert walk.conclusion().id == "gpu-hardware-fault"
    # a finding the gpu step found again is not counted twice
    codes = [(f.code, f.hosts) for f in walk.findings()]
    assert len(codes) == len(set(codes))


def test_a_component_that_hangs_costs_only_itself(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # gpu003's nvidia-smi hangs: its gpu component hits the sweep's limit, its other
    # components still answer, and the verdict names what hung (gpu-driver-hung), not the host.
    (tmp_path / "scenario.yaml").write_text(
        "title: t\nsymptom: s\nrunbook: hang\nhosts: gpu[001-004]\n"
        "states:\n  gpu003: {state: timeout, phase: command, probes: [gpu], "
        "reason: 'no answer in 30 s'}\n"
        "outputs:\n  gpu:\n    gpu003: \"=== diag:section query\\n\"\n")
    _code, doc = run_json(["run", "hang", "--scenario", str(tmp_path), "--auto", "--json"],
                         capsys)
    assert doc["conclusion"]["id"] == "gpu-driver-hung" and doc["conclusion"]["hosts"] == [
        "gpu003"]
    hung = [f for f in doc["findings"] if f["code"] == "gpu-driver-hung"]
    assert hung and hung[0]["hosts"] == ["gpu003"]


def test_a_runbook_that_finds_nothing_names_the_standing_fault() -> None:
    # The rehearsal shape of issue 25's "a dead NVLink found in a hang walk is still named".
    recorded = {"nvlink": {"findings": [{"code": "nvlink-crc-storm", "hosts": ["gpu002"]}]}}
    walk = Walk(get_runbook("hang"), ["gpu001", "gpu002", "gpu003"], RecordedProvider(recorded),
                answers={"ask-phase": "mid", "ask-change": "nothing"})
    walk.run()
    assert walk.conclusion().id == "catalogued-fault"
    assert walk.accused_hosts(walk.conclusion()) == ("gpu002",)
    assert "instead of 'No cause found'" in walk.steps[-2].because


def test_auto_never_ends_waiting_while_a_standing_fault_stands(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The fleet's NVLink counters storm on gpu002; the hang runbook finds nothing of its own and
    # reaches its question: --auto reports the fault as its provisional conclusion, with the
    # question and the lines that resume it.
    nvlink = (BASELINE / "nvlink.txt").read_text()
    (tmp_path / "storm.txt").write_text(nvlink)
    storm = _crc_storm(nvlink)
    (tmp_path / "scenario.yaml").write_text(
        "title: t\nsymptom: s\nrunbook: hang\nhosts: gpu[001-004]\n"
        "outputs:\n  nvlink:\n    gpu002: storm.txt\n")
    (tmp_path / "storm.txt").write_text(storm)
    code, doc = run_json(["run", "hang", "--scenario", str(tmp_path), "--auto", "--json"],
                         capsys)
    assert doc["status"] == "provisional" and doc["conclusion"]["provisional"] is True
    assert doc["conclusion"]["hosts"] == ["gpu002"] and doc["question"]["node"] == "ask-phase"
    assert doc["resume"] and code == 1
    assert [f["code"] for f in doc["faults"]] == ["nvlink-crc-storm"]
    assert doc["faults"][0]["action"] == "reset-gpu"


def _crc_storm(nvlink: str) -> str:
    """The baseline nvlink output with GPU 0 link 0's CRC errors rising by 5,000 in the 2 s
    between its two samples (2,500/s, past DCGM's 100/s)."""
    sections = {}
    current = None
    for line in nvlink.splitlines():
        if line.startswith("=== diag:section "):
            current = line.split()[-1]
            sections[current] = []
        elif line.startswith("=== diag:"):
            current = None
        elif current:
            sections[current].append(line)
    second = "\n".join(sections["errors_2"])
    first_crc = next(line for line in sections["errors_2"] if "CRC" in line)
    number = int(first_crc.rsplit(":", 1)[1])
    second = second.replace(first_crc, first_crc.rsplit(":", 1)[0] + f": {number + 5000}", 1)
    return patch_sections(nvlink, {"errors_2": (second + "\n", 0)})


def test_a_question_the_evidence_answers_is_not_asked() -> None:
    # crash: "does the XID follow the node?" while the node's GPU has a pending row remap.
    recorded = {"gpu": {"findings": [{"code": "xid-application", "hosts": ["gpu002"]},
                                     {"code": "row-remap-pending", "hosts": ["gpu002"]}]}}
    walk = Walk(get_runbook("crash"), ["gpu001", "gpu002"], RecordedProvider(recorded))
    walk.run()
    asked = [s for s in walk.steps if s.kind == "question"]
    assert not asked or all(s.answered_by == "evidence" for s in asked)


def test_a_conclusion_whose_confirming_evidence_does_not_hold_is_not_reached() -> None:
    # low-utilization: the host is CPU-saturated, but every GPU is 98% busy: not "input
    # pipeline too slow" (issue 25: concluded on hosts whose GPUs were at 98-100%).
    busy = {h: {"utilization_avg_pct": 98.0} for h in ("gpu001", "gpu002")}
    recorded = {"gpu": {"facts": busy},
                "host": {"findings": [{"code": "cpu-saturated", "hosts": ["gpu001"]}]}}
    walk = Walk(get_runbook("low-utilization"), ["gpu001", "gpu002"],
                RecordedProvider(recorded))
    walk.run()
    assert "input-pipeline-bound" not in walk.path()
    assert walk.conclusion() is None or walk.conclusion().id != "input-pipeline-bound"


def test_a_wrong_nic_verdict_needs_the_ports_up() -> None:
    # low-bandwidth: NCCL_IB_HCA names mlx5_3, whose port is down: the port is the cause.
    recorded = {"nccl": {"findings": [{"code": "nccl-hca-mismatch", "hosts": ["gpu002"]}]},
                "network": {"findings": [{"code": "ib-port-down", "hosts": ["gpu002"]}]}}
    walk = Walk(get_runbook("low-bandwidth"), ["gpu001", "gpu002", "gpu003"],
                RecordedProvider(recorded))
    walk.run()
    assert walk.conclusion() is not None and walk.conclusion().id != "nccl-wrong-nic"
    assert "gpu002" in walk.accused_hosts(walk.conclusion())
