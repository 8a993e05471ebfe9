"""The slurm transport against a real Slurm: per-host states, exact output, timeouts and
cancel in both fan-out modes, and client-side probes read once."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.fleet import slurm
from assistant.fleet.fanout import fan_out
from assistant.fleet.local import LocalTransport
from assistant.fleet.routing import ClientSideTransport, RoutingTransport
from assistant.fleet.slurm import SlurmTransport
from assistant.fleet.transport import CommandResult
from probes.scheduler import command as scheduler_command
from tests.slurm import slurmcluster

pytestmark = pytest.mark.slurm

# Output that srun's --label would mangle: a 3000-byte line (cut at 1024), no final newline,
# non-ASCII text, stderr, and a non-zero exit status.
COMMAND = ('echo "node $SLURMD_NODENAME"; head -c 3000 /dev/zero | tr "\\0" y; echo; '
           'printf "grüße\\nlast"; echo warn >&2; exit 3')


@pytest.fixture()
def job(cluster: slurmcluster.SlurmCluster) -> Iterator[str]:
    job = cluster.sbatch("-N", "4")
    cluster.wait_state(job)
    yield job


@pytest.mark.parametrize("mode", ["node", "step"])
def test_every_node_answers_with_its_exact_output(cluster: slurmcluster.SlurmCluster, job: str,
                                                  mode: str) -> None:
    transport = SlurmTransport(job, cluster.names, mode=mode)
    results = fan_out(transport, cluster.names, COMMAND, label="test", timeout=20)
    for host, result in results.items():
        assert result.state == "ok", result.reason
        expected = f"node {host}\n{'y' * 3000}\ngrüße\nlast"
        text = result.stdout if mode == "node" else result.stdout.replace("warn\n", "")
        assert text == expected, (host, result.stdout[:80], result.stdout[-40:])
        assert result.exit_status == 3
        # node mode keeps stderr apart (minus srun's own "Exited with exit code" line); step
        # mode merges it into stdout, as the probes' scripts do for each section anyway
        assert ("warn" in result.stderr) if mode == "node" else ("warn" in result.stdout)
        assert "Exited with exit code" not in result.stderr
    assert transport.steps_started == (4 if mode == "node" else 1)
    transport.close()


@pytest.mark.parametrize("mode", ["node", "step"])
def test_the_probe_sees_the_gpus_the_jobs_own_step_holds(cluster: slurmcluster.SlurmCluster,
                                                        mode: str) -> None:
    # --overlap: the probe's step shares the job's GRES with the running training step, so
    # nvidia-smi in it sees the job's GPUs (a step without it would wait for them forever)
    job = cluster.sbatch("-N", "2", "--gres=gpu:h100:2", wrap="srun sleep 300")
    cluster.wait_state(job)
    deadline = time.monotonic() + 10
    while f"{job}.0" not in cluster.run(["squeue", "-h", "-s", "-j", job, "-o", "%i"]).stdout:
        assert time.monotonic() < deadline, "the job's own step did not start"
        time.sleep(0.1)
    transport = SlurmTransport(job, ["gpu001", "gpu002"], mode=mode)
    results = fan_out(transport, ["gpu001", "gpu002"], "echo $CUDA_VISIBLE_DEVICES",
                      timeout=10)
    assert {h: r.stdout for h, r in results.items()} == {"gpu001": "0,1\n", "gpu002": "0,1\n"}


def test_hosts_outside_the_job_and_pending_jobs_are_refused(
        cluster: slurmcluster.SlurmCluster) -> None:
    job = cluster.sbatch("-N", "2", "-w", "gpu[001-002]")
    cluster.wait_state(job)
    transport = SlurmTransport(job, ["gpu001", "gpu002"])
    results = fan_out(transport, ["gpu001", "gpu003"], "true", timeout=10)
    assert results["gpu001"].state == "ok"
    assert results["gpu003"].state == "auth-failed"  # diag may not run there: not "down"
    assert "not a node of job" in results["gpu003"].reason
    # srun itself refusing (the allocation is gone) is classified the same way
    cluster.run(["scancel", job])
    time.sleep(0.5)
    gone = SlurmTransport(job, None, mode="node").run("gpu001", "true", timeout=10)
    assert gone.state == "auth-failed", gone.reason


@pytest.mark.parametrize("mode", ["node", "step"])
def test_a_stopped_slurmd_times_out_while_the_others_finish(
        cluster: slurmcluster.SlurmCluster, job: str, mode: str) -> None:
    # srun to a SIGSTOPped slurmd blocks forever: that host is "timeout" at its deadline and
    # the three others answer as usual; the srun is killed, nothing is left running
    transport = SlurmTransport(job, cluster.names, mode=mode)
    pid = cluster.slurmd_pid("gpu003")
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        results = fan_out(transport, cluster.names, "echo hi", label="test", timeout=2.0,
                          deadline=5.0)
        took = time.monotonic() - start
    finally:
        os.kill(pid, signal.SIGCONT)
    # ended at its time limit, well before the deadline (a loaded machine adds to both)
    assert results["gpu003"].state == "timeout" and took < 5.0, (results["gpu003"], took)
    assert results["gpu003"].reason == "command did not finish in 2s"
    for host in ("gpu001", "gpu002", "gpu004"):
        assert results[host].state == "ok" and results[host].stdout == "hi\n"
        # not held by the stopped host: done before its time limit came (1.52 s once, loaded)
        assert results[host].duration_s < 2.0
    deadline = time.monotonic() + 3
    while transport._procs and time.monotonic() < deadline:  # reaped in the background
        time.sleep(0.05)
    assert all(p.poll() is not None for p in transport._procs)


@pytest.mark.parametrize("mode", ["node", "step"])
def test_cancel_ends_every_host_promptly(cluster: slurmcluster.SlurmCluster, job: str,
                                         mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancel ends every host's srun and starts none after it. The step's hosts wait on its
    reader and look at the cancel every poll; when the reader saw the cancel first it ended
    the step and marked its hosts ``retry``, and each host then ran alone in node mode — a
    fresh srun interrupted while it started, whose step Slurm kept until its --time (this
    test's flake under load: a 'diag:test' step left). A slow poll makes that order certain."""
    monkeypatch.setattr(slurm, "_POLL_S", 0.5)
    transport = SlurmTransport(job, cluster.names, mode=mode)
    cancel = threading.Event()
    threading.Timer(0.8, cancel.set).start()
    start = time.monotonic()
    results = fan_out(transport, cluster.names, "sleep 30", label="test", timeout=30,
                      cancel=cancel)
    assert time.monotonic() - start < 2.0
    assert {r.state for r in results.values()} == {"cancelled"}
    for worker in threading.enumerate():  # the fan-out's workers return after it does
        if worker.name.startswith("fanout-test"):
            worker.join(10)
    assert transport.steps_started == (4 if mode == "node" else 1)
    transport.close()
    # srun was interrupted, so Slurm cancels the step on the nodes: no sleep left behind
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        steps = cluster.run(["squeue", "-h", "-s", "-j", job, "-o", "%i %j"]).stdout
        if "diag:test" not in steps:
            break
        time.sleep(0.1)
    assert "diag:test" not in steps


class CountingLocal(LocalTransport):
    """A local transport that counts what it runs (the client-side reading)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def run(self, host: str, command: str, **kw: object) -> CommandResult:
        self.calls.append(host)
        return super().run(host, command, **kw)  # type: ignore[arg-type]


def test_scheduler_probe_is_read_once_on_this_machine(cluster: slurmcluster.SlurmCluster,
                                                      job: str) -> None:
    # the walk's hosts are the job's nodes, but sinfo/squeue run once, here, not via srun
    slurm = SlurmTransport(job, cluster.names)
    local = CountingLocal()
    transport = ClientSideTransport(slurm, local)
    results = fan_out(transport, cluster.names, scheduler_command({}), label="scheduler",
                      timeout=20)
    assert len(local.calls) == 1 and slurm.steps_started == 0
    full = [h for h, r in results.items() if "diag:section nodes" in r.stdout]
    assert len(full) == 1 and {r.state for r in results.values()} == {"ok"}
    shared = [r.stdout for h, r in results.items() if h not in full]
    assert shared == [f"=== diag:section shared\n{full[0]}\n=== diag:rc shared 0\n"] * 3
    # other probes still go to the nodes
    other = fan_out(transport, cluster.names, "echo $SLURMD_NODENAME", label="versions",
                    timeout=20)
    assert {h: r.stdout.strip() for h, r in other.items()} == {h: h for h in cluster.names}
    assert len(local.calls) == 1


def test_routing_sends_each_host_to_its_transport(cluster: slurmcluster.SlurmCluster,
                                                  job: str) -> None:
    local = LocalTransport()
    routing = RoutingTransport({"gpu001": local}, SlurmTransport(job, cluster.names))
    results = fan_out(routing, cluster.names, 'echo "${SLURMD_NODENAME:-local $DIAG_HOST}"',
                      timeout=20)
    assert results["gpu001"].stdout == "local gpu001\n"
    assert results["gpu002"].stdout == "gpu002\n"
    assert routing.name == "local+slurm"


def test_no_srun_is_left_running(cluster: slurmcluster.SlurmCluster) -> None:
    # the tests above killed their sruns by process group; none may survive them. Only this
    # cluster's sruns count (SLURM_CONF in their environment): another worker's Slurm tests
    # may have an srun running at this moment (CI, stop 36).
    out = subprocess.run(["pgrep", "-f", "srun --jobid"], capture_output=True, text=True)
    mine = f"SLURM_CONF={cluster.conf}".encode()
    left = []
    for pid in out.stdout.split():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue  # ended meanwhile
        if mine in environ.split(b"\0"):
            left.append(pid)
    assert left == []
