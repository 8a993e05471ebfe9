"""The kernel, process-limits and storage-mounts families judged on their components' facts.

The baseline node raises nothing; a few faults per family raise their signature on the host
that has them and not their healthy twin. The thresholds named here are the ones the families
reference (proposed for probes/thresholds.yaml in the merge note, with their sources).
"""

from __future__ import annotations

from typing import Any

import pytest

from probes import kernel, mounts, procs
from probes.faults.apply import attach_log_lines, judge
from probes.faults.catalogue import load_faults
from tests.probes.probe_outputs import baseline, edit, section_text

THRESHOLDS = {"memlock_min_bytes": 1 << 30, "shm_min_bytes": 1 << 30, "shm_used_pct_max": 90,
              "nofile_min": 65536, "cgroup_mem_anon_pct_max": 90,
              "cgroup_pids_used_pct_max": 90, "local_disk_used_pct_max": 95,
              "network_fs_used_pct_max": 95, "fault_log_window_minutes": 120}
FAMILIES = ("kernel", "process-limits", "storage-mounts")
JOB = "/system.slice/slurmstepd.scope/job_4471"


def _facts(component: str, text: str) -> dict[str, Any]:
    module = {"kernel": kernel, "procs": procs, "mounts": mounts}[component]
    facts = module.parse(text)
    if component == "kernel":
        attach_log_lines(text, {"kernel": "kernel"}, facts)
    return facts


def _found(component: str, text: str, everywhere: bool = False) -> set[str]:
    """The codes raised on h1 with *text*, the other hosts keeping the baseline (or all of
    them having *text*)."""
    base = _facts(component, baseline(component))
    mine = _facts(component, text)
    fleet = {"h1": mine, **{f"h{i}": mine if everywhere else base for i in (2, 3, 4)}}
    return {f.code for f in judge(component, fleet, THRESHOLDS) if "h1" in f.hosts}


def test_families_load_with_their_signatures() -> None:
    catalogue = load_faults()
    mine = [s for s in catalogue.signatures.values() if s.family in FAMILIES]
    assert {s.family for s in mine} == set(FAMILIES) and len(mine) >= 30
    assert catalogue.signatures["host-oom-killer"].raised_by == "check"
    for sig in mine:
        assert sig.source and sig.twin and (sig.when or sig.log or sig.raised_by)
        if sig.log:
            assert sig.log.streams == ("kernel",) and not sig.log.pattern.startswith("^")


@pytest.mark.parametrize("component", ["kernel", "procs", "mounts"])
def test_baseline_raises_nothing(component: str) -> None:
    assert _found(component, baseline(component)) == set()


def _kernel(*lines: str) -> str:
    base = baseline("kernel")
    return edit(base, "kernel", section_text(base, "kernel"),
                section_text(base, "kernel") + "".join(line + "\n" for line in lines))


@pytest.mark.parametrize(("code", "lines"), [
    ("kernel-hung-task", ["[1209402.881203] INFO: task python3:48233 blocked for more than 122 "
                          "seconds."]),
    ("kernel-soft-lockup", ["[1209518.220361] watchdog: BUG: soft lockup - CPU#93 stuck for 26s!"
                            " [kworker/93:1:1571]"]),
    ("kernel-mlx5-cmd-timeout", ["[1209280.445226] mlx5_core 0000:9a:00.0: wait_func:1132:(pid "
                                 "141181): CREATE_DCT(0x710) timeout. Will cause a leak of a "
                                 "command resource"]),
    ("kernel-pcie-aer-fatal", ["[1209577.000844] pcieport 0000:b7:01.0: AER: Multiple "
                               "Uncorrected (Fatal) error received: 0000:b7:01.0"]),
    ("kernel-fs-readonly", ["[1209423.107180] EXT4-fs (md0): Remounting filesystem read-only"]),
    ("storage-nfs-not-responding", ["[1209559.670000] nfs: server nfs01 not responding, still "
                                    "trying"]),
    ("storage-lustre-evicted", ["[1209500.118233] LustreError: 167-0: ckpt-OST0003-osc-ffff9f2b: "
                                "This client was evicted by ckpt-OST0003; in progress "
                                "operations using this service will fail."]),
])
def test_kernel_lines_raise_their_signature(code: str, lines: list[str]) -> None:
    assert code in _found("kernel", _kernel(*lines))


@pytest.mark.parametrize("lines", [
    # a hung task days ago, a single corrected AER line, harmless peermem, a loop device
    ["[  604.102938] INFO: task mount.nfs:2211 blocked for more than 120 seconds."],
    ["[1209500.615790] pcieport 0000:b7:01.0: AER: Corrected error received: 0000:b8:00.0"],
    ["[1209530.004112] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid "
     "context, skipping further processing"],
    ["[1209601.142107] I/O error, dev loop3, sector 0 op 0x0:(READ) flags 0x80700 phys_seg 1"],
])
def test_kernel_twins_raise_nothing(lines: list[str]) -> None:
    assert _found("kernel", _kernel(*lines)) == set()


MEMLOCK = "limit Max locked memory         unlimited            unlimited            bytes     "


def test_process_limit_faults_and_twins() -> None:
    base = baseline("procs")
    small = base.replace(MEMLOCK, "limit Max locked memory         8388608              8388608"
                                  "              bytes     ")
    assert "process-memlock-limited" in _found("procs", small)
    large = base.replace(MEMLOCK, "limit Max locked memory         68719476736          "
                                  "68719476736          bytes     ")
    assert _found("procs", large) == set()
    no_rdma = base.replace("devices uverbs=8 nvidia=8", "devices uverbs=0 nvidia=8")
    assert _found("procs", no_rdma) == {"process-no-rdma-devices"}
    ethernet_only = edit(no_rdma, "host", "uverbs 8", "uverbs 0")
    assert _found("procs", ethernet_only) == set()
    shm = base.replace("shm_statfs 4096 264183586 263890722", "shm_statfs 4096 16384 16089")
    assert _found("procs", shm) == {"process-shm-small"}


def test_cgroup_kills_count_at_the_limiting_level() -> None:
    # the job's memory.events (where memory.max is set) counts kills of every task below it;
    # a full memory.current made of page cache is not a fault
    base = baseline("procs")
    cgroups = section_text(base, "cgroups")
    at_job = cgroups.split(f"--- cgroup v2 {JOB}\n", 1)
    killed = at_job[0] + f"--- cgroup v2 {JOB}\n" + at_job[1].replace(
        "memory.events.oom_kill 0", "memory.events.oom_kill 2", 1)
    assert _found("procs", edit(base, "cgroups", cgroups, killed)) == {"process-cgroup-oom-kills"}
    cache = at_job[0] + f"--- cgroup v2 {JOB}\n" + at_job[1].replace(
        "memory.current 442866049024", "memory.current 2058879103712", 1)
    assert _found("procs", edit(base, "cgroups", cgroups, cache)) == set()


HOME_OK = ("result 4 0 1737368305900512337 1737368305903690158 1048576 60000000 41281004 "
           "41281004 1228800000 1204377911")


def test_storage_mount_hung_here_and_everywhere() -> None:
    base = baseline("mounts")
    hung = edit(base, "statfs", HOME_OK, "result 4 124 1737368305900512337 1737368310911690158 ")
    assert _found("mounts", hung) == {"storage-mount-hung", "storage-mount-hung-here"}
    # hung on every host: the storage's, no host accused by drift
    assert _found("mounts", hung, everywhere=True) == {"storage-mount-hung"}


def test_storage_mount_faults_and_twins() -> None:
    base = baseline("mounts")
    stale = edit(base, "statfs", HOME_OK, "result 4 1 1 2 stat: cannot read file system "
                 "information for '/home': Stale file handle")
    assert _found("mounts", stale) == {"storage-mount-stale", "storage-network-fs-stale"}
    denied = edit(base, "statfs", HOME_OK, "result 4 1 1 2 stat: cannot read file system "
                  "information for '/home': Permission denied")
    assert _found("mounts", denied) == set()
    lustre = section_text(base, "lustre")
    down = edit(base, "lustre", lustre, lustre.replace("current_state: IDLE", "current_state: "
                                                       "DISCONN", 1))
    assert _found("mounts", down) == {"storage-lustre-import-down"}
    ro = edit(base, "mounts", "- ext4 /dev/md0 rw,stripe=256", "- ext4 /dev/md0 ro,stripe=256")
    assert _found("mounts", ro) == {"storage-mount-readonly-here"}
    assert _found("mounts", ro, everywhere=True) == set()
