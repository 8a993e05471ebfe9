"""The batch step's output files from `scontrol show job` (no Slurm needed): job fields
expanded on the client as slurmstepd does, %N and %% left for the host, read as the logs
component's params."""

from __future__ import annotations

import pytest

from assistant.fleet.slurmjob import JobInfo, expand_output
from probes.parsers import parse
from tests.probes.probe_outputs import real

FIELDS = {"JobId": "48213", "WorkDir": "/home/alice/run", "Restarts": "1", "BatchFlag": "1"}


def job(**fields: str) -> JobInfo:
    return JobInfo(id="48213", state="RUNNING", nodes=["gpu-c05", "gpu-c06"], user="alice",
                   name="train", fields={**FIELDS, **fields}, batch_host="gpu-c05",
                   stdout="/logs/%x-%j-%N.out", stderr="/logs/%x-%j-%N.out")


@pytest.mark.parametrize(("pattern", "expanded"), [
    ("slurm-%j.out", "/home/alice/run/slurm-48213.out"),        # relative: under WorkDir
    ("/l/%x-%j-%N.out", "/l/train-48213-%N.out"),               # %N is the host's
    ("/l/%4j.%u.%s.%J.%r", "/l/48213.alice.batch.48213.1"),
    ("/l/%6j-%n-%2t.out", "/l/048213-0-00.out"),                # batch step: node 0, task 0
    ("/l/%A_%a.out", "/l/48213_4294967294.out"),                # not an array: NO_VAL
    ("/l/100%%-%N.out", "/l/100%%-%N.out"),
    ("/l/a\\%j.out", "/l/a%%j.out"),                            # a backslash: no expansion
    ("/l/%d%y", "/l/%d%y"),                                     # not Slurm's: as written
    ("/dev/null", None), ("(null)", None), ("", None),
])
def test_job_fields_are_expanded_like_slurmstepd(pattern: str, expanded: str | None) -> None:
    assert expand_output(pattern, job()) == expanded


def test_an_array_task_uses_its_array_ids() -> None:
    info = job(JobId="1241", ArrayJobId="1234", ArrayTaskId="7")
    assert expand_output("/l/%A_%a-%j-%b.out", info) == "/l/1234_7-1241-7.out"


def test_the_logs_components_params() -> None:
    params = job().logs_params()
    assert params == {"slurm_output": ["/logs/train-48213-%N.out"],
                      "slurm_nodes": ["gpu-c05", "gpu-c06"], "slurm_batch_host": "gpu-c05"}
    pending = job()
    pending.state = "PENDING"
    assert pending.logs_params() == {}
    devnull = job()
    devnull.stdout = devnull.stderr = "/dev/null"
    assert devnull.logs_params() == {}


def test_a_recorded_scontrol_record_gives_its_output() -> None:
    sample = real("scontrol-job__oneline-running-4-node-gres-gpu1")
    (record,) = parse("scontrol-job", sample)["jobs"]
    info = JobInfo(id=record["job_id"], state=record["state"], nodes=["gpu001"],
                   fields=record["fields"], batch_host=record["batch_host"],
                   stdout=record["fields"]["StdOut"], stderr=record["fields"]["StdErr"])
    assert info.output_patterns() == [] and info.logs_params() == {}  # sbatch -o /dev/null
    info.stdout = "/tmp/out/%x-%j-%N.out"
    info.name = record["name"]
    assert info.logs_params()["slurm_output"] == ["/tmp/out/pretrain-1-%N.out"]
    assert info.logs_params()["slurm_batch_host"] == "gpu001"
