"""Whose fault a job log line names: a line the job's own stack causes, or one that names the
other end of a connection, raises its finding without making the printing host a standing
fault (docs/fault-format.md, "Standing faults")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.faults import load_faults
from probes.faults.apply import judge

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def _lines(text: str) -> list[dict[str, Any]]:
    return [{"stream": "job", "text": ln.strip(), "age_s": None}
            for ln in text.splitlines() if ln.strip()]


def test_exclusive_process_busy_gpus_of_the_jobs_own_stack_accuse_no_host() -> None:
    # NVIDIA/nccl-tests#369: GH200 nodes in Exclusive Process mode (the site's policy), every
    # rank of the job also opened GPU 0 (Open MPI's OFI mtl with HMEM): both hosts printed
    # "CUDA-capable device(s) is/are busy or unavailable" and were healthy
    sample = REAL / "nccl-tests__allreduce-2node-8x-gh200-exclusive-process-cuda-busy-aborted.txt"
    found = judge("logs", {"gpu-1-1": {"log_lines": _lines(sample.read_text())}}, {})
    assert "cuda-devices-busy" in {f.code for f in found}
    standing = load_faults().standing_codes()
    assert not [f.code for f in found if f.code in standing]


def test_a_queue_pair_that_cannot_reach_its_remote_gid_accuses_no_host() -> None:
    # NVIDIA/nccl#2013: ETIMEDOUT moving the QP to RTR, naming the remote GID; NCCL's own
    # hint is the fabric's rails (NCCL_CROSS_NIC), not the host that printed it
    line = ("host-01.example.com:XXXXXX [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp "
            "failed with 110 Connection timed out, on dev mlx_x:1, curr state INIT, next state "
            "RTR, local GID index 3, local GID ::ffff:10.0.0.11, remote GID ::ffff:10.0.0.12")
    found = judge("logs", {"h1": {"log_lines": _lines(line)}}, {})
    assert {f.code for f in found} == {"nccl-ib-qp-connect-failed"}
    assert not set(f.code for f in found) & load_faults().standing_codes()
