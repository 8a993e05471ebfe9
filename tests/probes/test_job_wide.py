"""A job's setting prints the same error on every rank: raised on most hosts of the walk, a
signature marked ``on_most_hosts: job`` is one finding of the job naming no host, and the walk
names it as the job's (docs/fault-format.md, "One cause on most hosts")."""

from __future__ import annotations

from typing import Any

import pytest

from assistant.runbook.standing import cause_and_fix, described, standing_faults
from probes.faults import load_faults
from probes.faults.apply import judge
from probes.faults.catalogue import FaultCatalogueError, read_files

# NCCL User Guide, Troubleshooting, "Shared memory": a container's 64 MB /dev/shm
SHM = ("gpu{n:03d}:2045:2290 [0] NCCL WARN Error: failed to extend /dev/shm/nccl-03v824 to "
       "4194660 bytes")
# NVIDIA/nccl-tests#206: ulimit -l 8192 in the container
MEMLOCK = ("gpu{n:03d}:1011:1234 [3] NCCL WARN Call to ibv_reg_mr_iova2 failed with error "
           "Cannot allocate memory")
# src/bootstrap.cc: NCCL_SOCKET_IFNAME naming an interface no host has
NO_IF = "gpu{n:03d}:4321:4321 [0] NCCL WARN Bootstrap : no socket interface found"


def _fleet(line: str, bad: int, total: int, stream: str = "job",
           age_s: float | None = None) -> dict[str, dict[str, Any]]:
    return {f"gpu{n:03d}": {"log_lines": ([{"stream": stream, "text": line.format(n=n),
                                            "age_s": age_s}] if n <= bad else [])}
            for n in range(1, total + 1)}


def _one_signature(action: str, wide: str, stream: str) -> dict[str, Any]:
    """A catalogue file of one log signature of *action* that says ``on_most_hosts: wide``."""
    return {"family": "x", "title": "x", "signatures": [{
        "id": "x-sig", "probe": "logs" if stream == "job" else "kernel", "scope": "host",
        "severity": "critical", "action": action, "summary": "s", "cause": "c", "source": "s",
        "twin": "t", "on_most_hosts": wide, "log": {"streams": [stream], "pattern": "boom"}}]}


@pytest.mark.parametrize("line, code", [(SHM, "nccl-shm-too-small"),
                                        (MEMLOCK, "nccl-ib-memlock-limit"),
                                        (NO_IF, "nccl-no-socket-interface")])
def test_the_same_setting_on_every_host_is_one_finding_of_the_job(line: str, code: str) -> None:
    found = [f for f in judge("logs", _fleet(line, 8, 8), {}) if f.code == code]
    assert len(found) == 1
    job = found[0]
    assert job.hosts == ()  # no host accused
    assert job.evidence["job_wide"] and job.evidence["scope"] == "job"
    assert job.evidence["hosts_raised"] == 8 and job.evidence["hosts_read"] == 8
    assert job.evidence["action"] == "reconfigure"
    # the walk still names it, once, as the job's (runbook.standing), not as eight hosts
    faults = standing_faults(found)
    assert faults == found
    (item,) = described(faults)
    assert item["hosts"] == [] and item["scope"] == "job"
    cause, fix = cause_and_fix(faults)
    assert cause.startswith("the job (on gpu[001-008] (8))")
    assert "reconfigure" in fix


def test_on_most_hosts_is_a_majority_of_at_least_three() -> None:
    # 5 of 8: the job's; 4 of 8 (not more than half) and 2 of 2 (under 3): host by host
    five = [f for f in judge("logs", _fleet(SHM, 5, 8), {}) if f.code == "nccl-shm-too-small"]
    assert [f.hosts for f in five] == [()]
    four = [f for f in judge("logs", _fleet(SHM, 4, 8), {}) if f.code == "nccl-shm-too-small"]
    assert sorted(h for f in four for h in f.hosts) == [f"gpu{n:03d}" for n in range(1, 5)]
    two = [f for f in judge("logs", _fleet(SHM, 2, 2), {}) if f.code == "nccl-shm-too-small"]
    assert len(two) == 2 and all(f.hosts for f in two)


def test_a_single_host_raising_it_is_still_that_hosts_fault() -> None:
    found = [f for f in judge("logs", _fleet(SHM, 1, 8), {}) if f.code == "nccl-shm-too-small"]
    assert [f.hosts for f in found] == [("gpu001",)]
    assert standing_faults(found) == found


def test_a_fact_signature_on_most_hosts_is_the_jobs_too() -> None:
    # every rank of the job runs with the container's 8 MiB memlock (/proc/PID/limits)
    proc = {"pid": 4242, "comm": "python", "memlock_unlimited": False,
            "memlock_soft_bytes": 8 << 20}
    facts = {f"gpu{n:03d}": {"processes": [dict(proc)]} for n in range(1, 5)}
    found = [f for f in judge("procs", facts, {"memlock_min_bytes": 1 << 30})
             if f.code == "process-memlock-limited"]
    assert [f.hosts for f in found] == [()]
    assert found[0].evidence["hosts_raised"] == 4


def test_hardware_signatures_are_never_turned_into_the_jobs() -> None:
    # an HCA's catastrophic error on every host stays every host's (reboot, not reconfigure)
    assert load_faults().signatures["nccl-ib-device-fatal"].on_most_hosts is None
    with pytest.raises(FaultCatalogueError, match="on_most_hosts"):
        read_files([("x.yaml", _one_signature("reboot", "job", "job"))])


# lustre/ptlrpc/import.c: "This client was evicted by %s; in progress operations using this
# service will fail." (Lustre Operations Manual, "Lustre Client Eviction")
EVICTED = ("[12345.678901] LustreError: 167-0: scratch-OST0003-osc-ffff9a: This client was "
           "evicted by scratch-OST0003; in progress operations using this service will fail.")


def _kernel_fleet(bad: int, total: int) -> dict[str, dict[str, Any]]:
    return _fleet(EVICTED, bad, total, stream="kernel", age_s=60.0)


def test_every_client_evicted_at_once_is_the_storages_not_each_hosts() -> None:
    # an aborted recovery on the server evicts every client: one finding of the storage
    found = [f for f in judge("kernel", _kernel_fleet(6, 8), {}) if f.code ==
             "storage-lustre-evicted"]
    assert [f.hosts for f in found] == [()]
    wide = found[0]
    assert wide.evidence["wide"] == "storage" and wide.evidence["scope"] == "fabric"
    assert wide.message.startswith("the shared storage, on 6 of 8 hosts")
    cause, _ = cause_and_fix(standing_faults(found))
    assert cause.startswith("the shared storage (on gpu[001-006] (6))")
    # the twin: one client evicted (its own network, too busy to answer lock callbacks) is
    # that host's, as before
    one = [f for f in judge("kernel", _kernel_fleet(1, 8), {}) if f.code ==
           "storage-lustre-evicted"]
    assert [f.hosts for f in one] == [("gpu001",)]


def test_a_shared_systems_reading_never_takes_a_hardware_action() -> None:
    with pytest.raises(FaultCatalogueError, match="on_most_hosts"):
        read_files([("x.yaml", _one_signature("drain-rma", "storage", "kernel"))])
