"""--job against a real Slurm: the job's nodes and context, and one clear line (exit 2) within
seconds when the job does not exist, has ended, or Slurm does not answer."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from assistant.cli import main
from assistant.fleet.slurmjob import SlurmError, lookup_job
from tests.slurm import slurmcluster

pytestmark = pytest.mark.slurm


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, float]:
    start = time.monotonic()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err, time.monotonic() - start


def test_running_job_gives_its_nodes_and_context(cluster: slurmcluster.SlurmCluster) -> None:
    job = cluster.sbatch("-N", "4", "--gres=gpu:h100:1", "-J", "pretrain")
    cluster.wait_state(job)
    info = lookup_job(job)
    assert info.nodes == ["gpu001", "gpu002", "gpu003", "gpu004"]
    context = info.context()
    assert context["state"] == "RUNNING" and context["partition"] == "gpu"
    assert context["nodelist"] == "gpu[001-004]" and context["gres"] == "gres:gpu:h100:1"
    assert context["start_time"] and context["name"] == "pretrain"


def test_pending_job_waits_for_its_partitions_nodes(cluster: slurmcluster.SlurmCluster) -> None:
    # a pending job has no allocation: its hosts are the nodes it waits for
    held = cluster.sbatch("-H", "-p", "small", "-N", "1")
    cluster.wait_pending_reason(held)
    info = lookup_job(held)
    assert info.state == "PENDING" and info.nodes == ["gpu001", "gpu002"]
    pinned = cluster.sbatch("-H", "-N", "1", "-w", "gpu003")
    cluster.wait_pending_reason(pinned)
    assert lookup_job(pinned).nodes == ["gpu003"]


def test_missing_and_ended_jobs_are_one_line(cluster: slurmcluster.SlurmCluster,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, took = run_cli(["probe", "versions", "--job", "99999"], capsys)
    assert code == 2 and out == "" and took < 3
    assert err == ("diag: job 99999 does not exist (or ended long enough ago that Slurm no "
                   "longer lists it)\n")
    job = cluster.sbatch("-N", "1", wrap="true")
    deadline = time.monotonic() + 20
    while not cluster.run(["scontrol", "show", "job", "-o", job]).stdout.count("COMPLETED"):
        assert time.monotonic() < deadline, "the job did not complete"
        time.sleep(0.2)
    code, out, err, _ = run_cli(["run", "hang", "--job", job, "--auto"], capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert f"diag: job {job} has ended (COMPLETED at " in err and "give --hosts" in err
    code, _, err, _ = run_cli(["probe", "versions", "--job", "12; rm -rf /"], capsys)
    assert code == 2 and "takes a Slurm job id" in err


def test_slurm_that_does_not_answer_fails_within_seconds(
        cluster: slurmcluster.SlurmCluster, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a stopped slurmctld: scontrol would wait on it for a minute; diag gives up at its bound
    ctld = cluster.procs["slurmctld"].pid
    os.kill(ctld, signal.SIGSTOP)
    try:
        code, out, err, took = run_cli(["probe", "versions", "--job", "1",
                                        "--slurm-timeout", "1.5"], capsys)
    finally:
        os.kill(ctld, signal.SIGCONT)
    assert code == 2 and out == "" and took < 4, took
    assert err.startswith("diag: Slurm did not answer `scontrol show job -o 1` within 1.5s")
    # a wrong SLURM_CONF makes scontrol retry for ~60 s: the same bound applies
    monkeypatch.setenv("SLURM_CONF", "/nonexistent/slurm.conf")
    code, _, err, took = run_cli(["run", "queue-idle", "--job", "1", "--slurm-timeout", "1",
                                  "--auto"], capsys)
    assert code == 2 and took < 3.5 and "/nonexistent/slurm.conf" in err
    with pytest.raises(SlurmError, match="did not answer"):
        lookup_job("1", timeout=0.5)


def test_probe_versions_runs_on_the_jobs_nodes_over_srun(
        cluster: slurmcluster.SlurmCluster, capsys: pytest.CaptureFixture[str]) -> None:
    job = cluster.sbatch("-N", "4")
    cluster.wait_state(job)
    code, out, err, _ = run_cli(["probe", "versions", "--job", job, "--json"], capsys)
    doc = json.loads(out)
    assert {h: r["state"] for h, r in doc["hosts"].items()} == dict.fromkeys(
        cluster.names, "ok"), err
    assert {r["facts"]["kernel"] for r in doc["hosts"].values()} == {os.uname().release}
    assert code in (0, 1)  # no GPUs here: not-measured warnings, never unreachable
    # each node's slurmd launched a step of this job: the probe really ran there
    for name in cluster.names:
        log = (cluster.dir / "log" / f"slurmd-{name}.log").read_text()
        assert f"launch task StepId={job}." in log, name


def test_the_batch_output_is_kept_for_the_logs_component(
        cluster: slurmcluster.SlurmCluster) -> None:
    # sbatch -o %x-%j-%N.out: scontrol gives the pattern (job fields expanded by this Slurm or
    # by diag), the batch step writes it on the batch host, and its %N names that host
    out = cluster.dir / "out"
    job = cluster.sbatch("-N", "2", "-J", "train", "-o", f"{out}/%x-%j-%N.out",
                         "-e", f"{out}/%x-%j-%N.err", wrap="echo started; sleep 300")
    cluster.wait_state(job)
    info = lookup_job(job)
    assert info.batch_host in info.nodes
    params = info.logs_params()
    assert params["slurm_output"] == [f"{out}/train-{job}-%N.out", f"{out}/train-{job}-%N.err"]
    assert params["slurm_batch_host"] == info.batch_host and params["slurm_nodes"] == info.nodes
    deadline = time.monotonic() + 20
    while not list(out.glob(f"train-{job}-*.out")):
        assert time.monotonic() < deadline, "the batch step wrote no output"
        time.sleep(0.2)
    (written,) = out.glob(f"train-{job}-*.out")
    from probes.rankprogress.hosts import host_from_name

    node = host_from_name(str(written), f"{out}/%x-%j-%N.out")
    assert node and written.name == f"train-{job}-{node}.out"


def test_a_hang_walk_names_what_slurm_holds_against_the_jobs_nodes(
        cluster: slurmcluster.SlurmCluster, capsys: pytest.CaptureFixture[str]) -> None:
    # A running job; NHC drains one of its nodes mid-run (DRAINING: the job goes on). The hang
    # walk reads Slurm once in its evidence sweep and names that node, though hang asks
    # nothing of the scheduler; an operator's drain in words of their own is not held against
    # the node there (queue-idle reports it), nor is anything of the queue.
    from tests.fleet.healthyfleet import NO_TEST_PROCESSES

    job = cluster.sbatch("-N", "4", "--gres=gpu:h100:1", "-J", "pretrain")
    cluster.wait_state(job)
    cluster.scontrol("update", "NodeName=gpu003", "State=DRAIN",
                     "Reason=NHC: check_fs_mount: /scratch not mounted")
    argv = ["run", "hang", "--job", job, "--auto", "--json", *NO_TEST_PROCESSES]
    main(argv)
    doc = json.loads(capsys.readouterr().out)
    scheduler = {f["code"]: f["hosts"] for f in doc["findings"] if f["probe"] == "scheduler"}
    assert scheduler == {"slurm-nhc-drain": ["gpu003"]}, doc["findings"]

    cluster.scontrol("update", "NodeName=gpu003", "State=DRAIN",
                     "Reason=kernel 6.8 rollout once this job ends")
    main(argv)
    doc = json.loads(capsys.readouterr().out)
    assert [f for f in doc["findings"] if f["probe"] == "scheduler"] == []
    assert not any(s.get("probe") == "scheduler" or "scheduler" in s.get("probes", [])
                   for s in doc["steps"][1:])  # hang's own steps never asked Slurm
