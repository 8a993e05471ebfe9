"""The queue-idle runbook on a real Slurm: node states set with scontrol, a fragmented
allocation, and `diag run queue-idle --job ID --auto --json` reaching the right conclusions."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from assistant.cli import main
from tests.fleet.healthyfleet import NO_TEST_PROCESSES
from tests.slurm import slurmcluster

pytestmark = pytest.mark.slurm

# A drain for a GPU gone missing (hardware) and one for a read-only scratch mount (not).
HW_REASON = "healthcheck: NHC check_nv_gpu_count: expected 8 GPUs, found 7"
REASON = "healthcheck: NHC check_fs_mount_rw: /scratch is mounted read-only"


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    # The Slurm nodes are this machine: other tests' stand-in training processes (tests/probes/
    # test_logs.py's, with NCCL_* set and the default memlock limit) would be "the job's"
    # processes there, so the walks look for a training process no test starts.
    if argv[0] == "run":
        argv = [*argv, *NO_TEST_PROCESSES]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def fragmented_cluster(cluster: slurmcluster.SlurmCluster) -> tuple[str, str]:
    """The training job on all four nodes (1 GPU each), 2-GPU jobs on every node, and a job
    wanting a whole node's 8 GPUs: 20 GPUs free in total, at most 5 on any node."""
    job = cluster.sbatch("-N", "4", "--gres=gpu:h100:1", "-J", "pretrain")
    cluster.wait_state(job)
    small = [cluster.sbatch("-N", "1", "-w", n, "--gres=gpu:2", "-J", "sweep")
             for n in cluster.names]
    cluster.wait_all(small)
    whole = cluster.sbatch("-N", "1", "--gres=gpu:8", "-J", "whole-node")
    assert cluster.wait_pending_reason(whole) in ("Resources", "Priority")
    return job, whole


def wait_responding(cluster: slurmcluster.SlurmCluster, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while "not_responding" in cluster.run(["sinfo", "-N", "-h", "-O", "StateComplete"]).stdout:
        assert time.monotonic() < deadline, "nodes still not responding"
        time.sleep(0.1)


def findings(doc: dict) -> dict[str, list[str]]:
    return {f["code"]: f["hosts"] for f in doc["findings"]}


def test_drained_nodes_and_fragmented_gpus(cluster: slurmcluster.SlurmCluster,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    job, whole = fragmented_cluster(cluster)
    # Drained for a missing GPU: the passive checks on them come back clean (the fake nodes'
    # GPUs are all there), and still no RESUME is proposed: acceptance validation first.
    cluster.scontrol("update", "NodeName=gpu[003-004]", "State=DRAIN", f"Reason={HW_REASON}")
    code, doc, err = run_json(["run", "queue-idle", "--job", job, "--auto", "--json",
                               "--answer", "ask-drain-reason=health-check"], capsys)
    assert doc["path"] == ["check-scheduler", "check-drained-health",
                           "validate-before-resume"], err
    assert findings(doc)["drained-for-hardware"] == ["gpu003", "gpu004"]
    assert not any(step.get("action") for step in doc["steps"])
    cluster.scontrol("update", "NodeName=gpu[003-004]", "State=DRAIN", f"Reason={REASON}")

    # --auto with no answer: the walk checks the drained nodes' health (on them only, through
    # srun inside the job) and stops at the question only the operator can answer
    code, doc, err = run_json(["run", "queue-idle", "--job", job, "--auto", "--json"], capsys)
    assert doc["path"] == ["check-scheduler", "check-drained-health"], err
    assert doc["status"] == "waiting", doc.get("faults")
    assert doc.get("question", {}).get("id",
                                                                       "ask-drain-reason")
    found = findings(doc)
    assert found["nodes-drained"] == ["gpu003", "gpu004"]
    assert found["gpus-fragmented"] == ["gpu001", "gpu002"]  # usable nodes only
    drained = next(f for f in doc["findings"] if f["code"] == "nodes-drained")
    assert drained["evidence"]["health_check"] == ["gpu003", "gpu004"]
    assert drained["evidence"]["nodes"]["gpu003"]["reason"] == REASON
    assert all(state["state"] == "ok" for state in doc["hosts"].values())
    assert code == 4  # the walk stopped on its question (exit 4 wins over the findings' 1)

    # the operator says a health check drained them: resume (not run under --auto), conclude
    code, doc, _ = run_json(["run", "queue-idle", "--job", job, "--auto", "--json",
                             "--answer", "ask-drain-reason=health-check"], capsys)
    assert doc["path"] == ["check-scheduler", "check-drained-health", "ask-drain-reason",
                           "resume-nodes", "drained-nodes-resumed"]
    assert doc["conclusion"]["id"] == "drained-nodes-resumed"
    assert {h for f in doc["conclusion"]["evidence"] for h in f["hosts"]} == {"gpu003",
                                                                            "gpu004"}

    # once resumed, what is left is the scattered GPUs: 20 free, at most 5 on a node
    cluster.scontrol("update", "NodeName=gpu[003-004]", "State=RESUME")
    wait_responding(cluster)  # a resumed node is NOT_RESPONDING until slurmd answers a ping
    code, doc, _ = run_json(["run", "queue-idle", "--job", whole, "--auto", "--json"], capsys)
    assert doc["path"] == ["check-scheduler", "gpus-fragmented"]
    fragmented = next(f for f in doc["findings"] if f["code"] == "gpus-fragmented")
    assert fragmented["hosts"] == cluster.names
    assert fragmented["evidence"]["jobs"][0]["job_id"] == whole
    assert fragmented["evidence"]["jobs"][0]["free_in_partition"] == 20
    assert code == 0  # a warning conclusion: nothing is broken


def test_partition_limit_and_reservation(cluster: slurmcluster.SlurmCluster,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    too_big = cluster.sbatch("-N", "2", "-p", "small", "-J", "too-big")
    # PartitionNodeLimit or PartitionConfig, depending on what else the job asks for
    assert cluster.wait_pending_reason(too_big).startswith("Partition")
    _, doc, _ = run_json(["run", "queue-idle", "--job", too_big, "--auto", "--json"], capsys)
    assert doc["conclusion"]["id"] == "partition-limit", doc["findings"]
    # a pending job has no allocation for srun to run in: the evidence sweep could not reach
    # its nodes and says so, and the walk, which needs nothing from them, is not held by it
    assert {h: s["state"] for h, s in doc["hosts"].items()} == {"gpu001": "ok", "gpu002": "ok"}
    assert all("no allocation" in s["sweep"] for s in doc["hosts"].values()), doc["hosts"]
    assert "fleet-unreachable" not in {f["code"] for f in doc["findings"]}
    cluster.run(["scancel", too_big])
    # a reservation for another team holds gpu004 while a 4-node job waits for it
    cluster.scontrol("create", "reservation", "ReservationName=team-vision", "StartTime=now",
                     "Duration=60", "Nodes=gpu004", "Users=nobody", "Flags=IGNORE_JOBS")
    wide = cluster.sbatch("-N", "4", "-J", "wide")
    cluster.wait_pending_reason(wide)
    _, doc, _ = run_json(["run", "queue-idle", "--job", wide, "--auto", "--json"], capsys)
    assert doc["conclusion"]["id"] == "reservation-holds-nodes", doc["findings"]
    resv = next(f for f in doc["findings"] if f["code"] == "reservation-holds-nodes")
    assert resv["hosts"] == ["gpu004"] and "team-vision" in resv["message"]


def test_a_stopped_slurmd_is_a_timed_out_host(cluster: slurmcluster.SlurmCluster,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    job = cluster.sbatch("-N", "4")
    cluster.wait_state(job)
    pid = cluster.slurmd_pid("gpu002")
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        code, doc, _ = run_json(["probe", "versions", "--job", job, "--json", "--timeout", "3",
                                 "--deadline", "5"], capsys)
        took = time.monotonic() - start
    finally:
        os.kill(pid, signal.SIGCONT)
    assert doc["hosts"]["gpu002"]["state"] == "timeout" and took < 5.5, took
    assert [h for h, s in doc["hosts"].items() if s["state"] == "ok"] == [
        "gpu001", "gpu003", "gpu004"]
    assert code == 3


def test_history_names_the_job(cluster: slurmcluster.SlurmCluster,
                               capsys: pytest.CaptureFixture[str]) -> None:
    job = cluster.sbatch("-N", "2")
    cluster.wait_state(job)
    run_json(["run", "queue-idle", "--job", job, "--auto", "--json"], capsys)
    code, doc, _ = run_json(["history", "--job", job, "--json"], capsys)
    assert code == 0
    assert doc["counts"]["incidents"] == 1 and doc["incidents"][0]["job_id"] == job
    assert doc["filters"]["job"] == job
    code, doc, _ = run_json(["history", "--job", "424242", "--json"], capsys)
    assert doc["counts"]["incidents"] == 0
