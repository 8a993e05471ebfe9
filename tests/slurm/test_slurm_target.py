"""--job / --transport option handling, without a Slurm: the job lookup is replaced by a
JobInfo, so these run everywhere and pin which transport reaches which host."""

from __future__ import annotations

from pathlib import Path

import pytest

import assistant.fleet.slurmjob as slurmjob
from assistant.cli import main
from assistant.fleet.routing import ClientSideTransport, RoutingTransport
from assistant.fleet.slurm import SlurmTransport
from assistant.fleet.slurmjob import JobInfo
from assistant.fleet.ssh import SSHTransport
from assistant.target import TargetError, open_target

RUNNING = JobInfo(id="1234", state="RUNNING", nodes=["gpu001", "gpu002", "gpu003"],
                  nodelist="gpu[001-003]", partition="h100", start_time="2026-11-30T08:57:31",
                  gres="gres:gpu:h100:8", num_nodes=3, user="alice", name="pretrain")
PENDING = JobInfo(id="1240", state="PENDING", nodes=["gpu001", "gpu002"], partition="h100",
                  reason="Resources")


@pytest.fixture()
def jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    def lookup(job_id: str, **kw: object) -> JobInfo:
        found = {"1234": RUNNING, "1240": PENDING}.get(job_id)
        if found is None:
            raise slurmjob.SlurmError(f"job {job_id} does not exist")
        return found

    monkeypatch.setattr(slurmjob, "lookup_job", lookup)


def inventory(tmp_path: Path, hosts: list[str]) -> str:
    path = tmp_path / "inventory.yaml"
    path.write_text("hosts:\n" + "".join(f"  {h}: {{address: 10.0.0.{i + 1}, rack: r01}}\n"
                                         for i, h in enumerate(hosts)))
    return str(path)


def inner(target: object) -> object:
    transport = target.transport  # type: ignore[attr-defined]
    assert isinstance(transport, ClientSideTransport)  # scheduler probes run here, once
    return transport.inner


def test_job_without_inventory_runs_everything_through_srun(jobs: None) -> None:
    target = open_target(job="1234")
    assert target.hosts == ["gpu001", "gpu002", "gpu003"] and target.job_id == "1234"
    transport = inner(target)
    assert isinstance(transport, SlurmTransport) and transport.nodes == RUNNING.nodes
    # the job's start (StartTime, this machine's local time): the log readers leave out the
    # files of an earlier run (probes/logfiles.py)
    start = RUNNING.start_epoch()
    assert start is not None
    assert target.params == {"scheduler": {"job": "1234"},
                             **{p: {"job_start_epoch": start}
                                for p in ("logs", "joblog", "nccl", "ranks")}}
    assert target.context()["slurm_job"]["gres"] == "gres:gpu:h100:8"
    assert target.context()["slurm_job"]["start_time"] == "2026-11-30T08:57:31"


def test_job_default_is_ssh_where_the_inventory_has_the_host(jobs: None,
                                                              tmp_path: Path) -> None:
    target = open_target(job="1234", inventory=inventory(tmp_path, ["gpu001", "gpu002"]))
    transport = inner(target)
    assert isinstance(transport, RoutingTransport)
    assert isinstance(transport.routes["gpu001"], SSHTransport)
    assert "gpu003" not in transport.routes and isinstance(transport.default, SlurmTransport)
    assert target.attrs["gpu001"] == {"rack": "r01"} and target.attrs["gpu003"] == {}
    every = open_target(job="1234", inventory=inventory(tmp_path, RUNNING.nodes))
    assert isinstance(inner(every), SSHTransport)


def test_forced_transports_and_narrowed_hosts(jobs: None) -> None:
    assert isinstance(inner(open_target(job="1234", transport="ssh")), SSHTransport)
    assert isinstance(inner(open_target(job="1234", transport="slurm")), SlurmTransport)
    assert inner(open_target(job="1234", transport="local")).name == "local"
    narrowed = open_target(job="1234", hosts="gpu[002-003]")
    assert narrowed.hosts == ["gpu002", "gpu003"]
    with pytest.raises(TargetError, match=r"not in job 1234 \(gpu\[001-003\]\): gpu009"):
        open_target(job="1234", hosts="gpu009")


def test_pending_job_cannot_run_steps(jobs: None) -> None:
    target = open_target(job="1240")
    transport = inner(target)
    assert isinstance(transport, SlurmTransport)
    result = transport.run("gpu001", "true", timeout=5)
    assert result.state == "auth-failed" and "job 1240 is PENDING" in result.reason


def test_option_errors_are_one_line(jobs: None, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in (
        (["probe", "versions", "--transport", "slurm", "--hosts", "gpu001"],
         "--transport slurm runs probes inside a job's allocation: give --job ID"),
        (["probe", "versions", "--job", "77"], "job 77 does not exist"),
        (["run", "hang", "--job", "1234", "--scenario", "demo"],
         "--scenario replays its own fleet; it does not take --job"),
    ):
        assert main(argv) == 2
        assert capsys.readouterr().err == f"diag: {message}\n"


def test_help_names_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["probe", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--job ID" in text and "{ssh,slurm,local}" in text and "--slurm-timeout S" in text
