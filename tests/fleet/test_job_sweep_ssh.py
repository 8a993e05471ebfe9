"""Slurm's view of a job's nodes in every walk of that job: the scheduler signatures
(probes/faults/scheduler.yaml) walked over real sshd, with ``--job``.

The nodes answer over the session's replay fleet (loopback sshd, every probe the healthy
baseline); Slurm's commands are stand-ins on PATH that print each example's recorded ``sinfo``,
``squeue`` and ``scontrol`` output and a real running job's record
(fixtures/real/scontrol-job__oneline-running-4-node-gres-gpu1.txt: job 1 on gpu[001-004]).
What a real slurmctld says about drained nodes is tested against a real Slurm in
tests/slurm/; here each example's exact wording meets the walk.

A node-level signature (Slurm marks a job node not responding, rebooted, missing GPUs, drained
by a health check) is named on its host from a runbook that is not queue-idle (hang, where the
evidence sweep reads Slurm once) and from queue-idle; its twin accuses nobody. The queue's own
signatures (limits, priority, fragmentation, reservations) belong to queue-idle alone and are
walked there.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from assistant.cli import main
from assistant.fleet.scenario import load_scenario, patch_sections
from probes.base import split_sections
from probes.catalog import load_catalog
from probes.faults.catalogue import load_faults
from tests.fleet import replayfleet, sshfleet
from tests.fleet.healthyfleet import accusations
from tests.signature_examples import BASELINE, examples, patches, scenario_yaml

pytestmark = pytest.mark.ssh

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "fixtures" / "real" / "scontrol-job__oneline-running-4-node-gres-gpu1.txt"
HOSTS = ["gpu001", "gpu002", "gpu003", "gpu004"]
# Every example's faulty node is gpu003: the combined walk moves example i's fault to
# gpu{005+2i} and its twin to the next host, over a job whose node list holds them all.
PLANTED_FROM = "gpu003"

# Each stand-in prints the file of the section its arguments ask for, with its exit status.
STANDIN = r"""#!/bin/sh
dir="$DIAG_STANDIN_SLURM"
emit() {{ cat "$dir/$1.txt" 2>/dev/null; exit "$(cat "$dir/$1.rc" 2>/dev/null || echo 0)"; }}
{body}
"""
BODIES = {
    "sinfo": 'case "$1" in --version) emit version;; *) emit nodes;; esac',
    "squeue": "emit pending",
    "scontrol": 'case "$2" in job) emit job;; reservation*) emit reservations;; '
                '*) echo "stand-in scontrol: $*" >&2; exit 1;; esac',
}

SIGNATURES = load_faults().signatures
SCHEDULER = [ex for _, ex in examples() if SIGNATURES.get(ex["signature"]) is not None
             and SIGNATURES[ex["signature"]].probe == "scheduler"]
LEFT_OUT = set(load_catalog().probes["scheduler"].sweep_leaves_out)
NODE_LEVEL = [ex for ex in SCHEDULER if SIGNATURES[ex["signature"]].scope == "host"]


def standins(tmp: Path) -> Path:
    bin_dir = tmp / "slurm-bin"
    bin_dir.mkdir()
    for name, body in BODIES.items():
        path = bin_dir / name
        path.write_text(STANDIN.format(body=body))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


def slurm_says(edits: dict[str, Any], where: Path, job: str | None = None) -> None:
    """Write what Slurm's commands print for an example's edits of the baseline."""
    where.mkdir(exist_ok=True)
    text = patch_sections((BASELINE / "scheduler.txt").read_text(), patches(edits))
    for name, section in split_sections(text).items():
        (where / f"{name}.txt").write_text(section.text)
        (where / f"{name}.rc").write_text(str(section.rc or 0))
    (where / "job.txt").write_text(job or JOB.read_text())
    (where / "job.rc").write_text("0")


def walk(runbook: str, edits: dict[str, Any], hosts: list[str],
         replay: tuple[sshfleet.SSHFleet, Path], tmp: Path, monkeypatch: pytest.MonkeyPatch,
         capsys: pytest.CaptureFixture[str], job: str | None = None) -> dict[str, Any]:
    fleet, replay_dir = replay
    said = tmp / "slurm-says"
    slurm_says(edits, said, job)
    monkeypatch.setenv("DIAG_STANDIN_SLURM", str(said))
    monkeypatch.setenv("PATH", f"{standins(tmp)}{os.pathsep}{os.environ['PATH']}")
    scenario_dir = tmp / f"job-{runbook}"
    scenario_dir.mkdir()
    (scenario_dir / "scenario.yaml").write_text(scenario_yaml(
        {"hosts": hosts, "outputs": {}, "faults": {}, "twins": {}}, runbook))
    inventory = replayfleet.stage(load_scenario(str(scenario_dir)), fleet, replay_dir, tmp)
    main(["run", runbook, "--job", "1", "--inventory", str(inventory), "--auto", "--json",
          "--timeout", "20", "--deadline", "60", *replayfleet.CONNECT])
    return dict(json.loads(capsys.readouterr().out))


def _rows(table: str, node: str) -> list[str]:
    return [line for line in table.splitlines()[1:] if line.split("|", 1)[0] == node]


def combined() -> tuple[dict[str, str], dict[str, str], dict[str, Any], str]:
    """Every node-level example in one Slurm: (fault host -> signature, twin host ->
    signature, the section edits, the job's record naming every host)."""
    base = split_sections((BASELINE / "scheduler.txt").read_text())["nodes"].text
    header, *rows = base.splitlines()
    pending: list[str] = []
    reservations: list[str] = []
    faults: dict[str, str] = {}
    twins: dict[str, str] = {}
    for i, example in enumerate(NODE_LEVEL):
        for offset, side, into in ((0, "fault", faults), (1, "twin", twins)):
            host = f"gpu{5 + 2 * i + offset:03d}"
            into[host] = example["signature"]
            edits = example[side]
            rows += [row.replace(PLANTED_FROM, host, 1)
                     for row in _rows(edits["nodes"], PLANTED_FROM)]
            pending += (edits.get("pending") or "").splitlines()[1:]
            reservations += [line.replace(f"Nodes={PLANTED_FROM} ", f"Nodes={host} ")
                             for line in (edits.get("reservations") or "").splitlines()]
    last = 4 + 2 * len(NODE_LEVEL)
    edits: dict[str, Any] = {"nodes": "\n".join([header, *rows]) + "\n"}
    if pending:
        edits["pending"] = "\n".join([
            split_sections((BASELINE / "scheduler.txt").read_text())["pending"].text
            .splitlines()[0], *pending]) + "\n"
    if reservations:
        edits["reservations"] = "\n".join(reservations) + "\n"
    # the real record of a running job, over all these nodes
    job = (JOB.read_text().replace("NodeList=gpu[001-004]", f"NodeList=gpu[001-{last:03d}]")
           .replace("NumNodes=4", f"NumNodes={last}"))
    return faults, twins, edits, job


def on_host(doc: dict[str, Any], code: str) -> set[str]:
    return {h for f in doc["findings"] if f["code"] == code for h in f["hosts"]}


def test_every_scheduler_signature_is_walked_here() -> None:
    assert {ex["signature"] for ex in SCHEDULER} == {
        s.id for s in SIGNATURES.values() if s.probe == "scheduler"}
    assert len(NODE_LEVEL) >= 10 and {"nodes-drained"} == LEFT_OUT


@pytest.mark.parametrize("runbook", ["hang", "queue-idle"])
def test_a_job_node_slurm_holds_a_fault_against_is_named_from_any_runbook(
        runbook: str, replay_fleet: tuple[sshfleet.SSHFleet, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    faults, twins, edits, job = combined()
    hosts = [f"gpu{i:03d}" for i in range(1, 5 + len(faults) + len(twins))]
    doc = walk(runbook, edits, hosts, replay_fleet, tmp_path, monkeypatch, capsys, job)
    assert set(doc["hosts"]) == set(hosts)
    assert {h for h, s in doc["hosts"].items() if s["state"] != "ok"} == set()
    for host, sig_id in faults.items():
        sig = SIGNATURES[sig_id]
        if runbook == "hang" and sig_id in LEFT_OUT:
            assert host not in on_host(doc, sig_id), host
            continue
        assert host in on_host(doc, sig_id), (host, sig_id, sorted(
            f["code"] for f in doc["findings"] if host in f["hosts"]))
        if sig.standing:
            fault = [f for f in doc["faults"] if f["code"] == sig_id and host in f["hosts"]]
            assert fault and fault[0]["action"] == sig.action, (host, sig_id, doc["faults"])
    for host, sig_id in twins.items():
        assert host not in on_host(doc, sig_id), (host, sig_id)
    if runbook == "hang":
        # nothing of the queue in a walk that is not about it, and nobody accused but the
        # planted faults (a twin that is another example's fault, 7 of 8 GPUs registered
        # against none, is that fault)
        queue = {s.id for s in SIGNATURES.values() if s.probe == "scheduler" and s.scope != "host"}
        assert queue & {f["code"] for f in doc["findings"]} == set()
        faulty = set(faults) | {h for h, sig_id in twins.items() if any(
            ex["fault"] == next(e for e in NODE_LEVEL if e["signature"] == sig_id)["twin"]
            for ex in NODE_LEVEL)}
        against = accusations(doc)
        accused = {h for code, named in against.get("faults", []) + against.get("findings", [])
                   for h in named}
        assert accused <= faulty, sorted(accused - faulty)
        assert accused & set(HOSTS) == set()


@pytest.mark.parametrize("example", [ex for ex in SCHEDULER if ex not in NODE_LEVEL],
                         ids=lambda ex: ex["signature"])
def test_the_queue_signatures_are_named_by_queue_idle(
        example: dict[str, Any], replay_fleet: tuple[sshfleet.SSHFleet, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sig = example["signature"]
    doc = walk("queue-idle", example["fault"], HOSTS, replay_fleet, tmp_path, monkeypatch,
               capsys)
    assert sig in {f["code"] for f in doc["findings"]}
    assert on_host(doc, sig) == set(example["hosts"])
    twin_dir = tmp_path / f"{tmp_path.name}-twin"  # the replay stages by this name
    twin_dir.mkdir()
    twin = walk("queue-idle", example["twin"], HOSTS, replay_fleet, twin_dir, monkeypatch,
                capsys)
    assert sig not in {f["code"] for f in twin["findings"]}
