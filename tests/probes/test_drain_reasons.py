"""Drain reasons that name a hardware fault keep a node out until it is validated; others do
not (probes/drain_reasons.py)."""

from __future__ import annotations

import pytest

from probes.drain_reasons import hardware_fault


@pytest.mark.parametrize(("reason", "kind"), [
    ("NHC: check_gpu_xid: XID 79 on GPU 4", "XID"),
    ("Xid 48 DBE on gpu2 INC-20331", "XID"),
    ("GPU 3 has fallen off the bus", "XID"),
    ("healthcheck: check_gpu_ecc: 2 uncorrectable (DBE) errors", "ECC"),
    ("dcgm: retired pages pending on GPU1", "ECC"),
    ("row remap failed GPU5", "row remap"),
    ("healthcheck: NHC check_nv_gpu_count: expected 8 GPUs, found 7", "GPU missing"),
    ("gres/gpu count reported lower than configured (7 < 8)", "GPU missing"),
    ("NHC: check_hw_ib: No IB port mlx5_2:1 is ACTIVE (LinkUp 400 Gb/sec)", "link"),
    ("check_ib_link_flapping: mlx5_4 flapped 3 times", "link"),
    ("nvlink down on GPU0", "link"),
    ("IB port down, ticket NET-881", "link"),
    # LBNL NHC scripts/lbnl_hw.nhc check_hw_mcelog and check_hw_physmem, as node-mark-offline
    # writes them ("NHC: " + the check's message)
    ("NHC: check_hw_mcelog:  MCEs detected - 2 UNcorrected memory errors detected (limit of "
     "0/day).", "MCE"),
    ("NHC: check_hw_mcelog:  MCEs detected - 14 corrected memory errors detected (limit of "
     "9/day).", "MCE"),
    ("NHC: check_hw_mcelog:  MCEs detected in log.", "MCE"),
    ("machine check on CPU1 bank 7, DIMM B2 - INC-4410", "MCE"),
    ("NHC: check_hw_physmem:  Actual RAM size (1979221932 kB) less than minimum allowed "
     "(2097152000 kB).", "memory missing"),
])
def test_hardware_drains(reason: str, kind: str) -> None:
    assert hardware_fault(reason) == kind


@pytest.mark.parametrize("reason", [
    "Kill task failed", "Not responding", "Prolog error", "epilog error",
    "healthcheck: NHC check_fs_mount_rw: /scratch is mounted read-only",
    "maint: BIOS update, back 18:00", "Low RealMemory", "batch job complete failure",
    "reboot requested by alice", "", None,
    # slurmd saw no GPU at all: the driver or the configuration (slurm-gpus-not-detected)
    "gres/gpu count reported lower than configured (0 < 8)", "expected 8 GPUs, found 0",
    # NHC checks that name no hardware: memory in use, a mount, a daemon
    "NHC: check_hw_mem_free:  Not enough free memory (1203112 kB < 2097152 kB).",
    "NHC: check_fs_mount:  /lustre not mounted",
    "NHC: check_ps_service:  Service sshd (process sshd) not running",
    "NHC: check_hw_physmem:  Actual RAM size (2113929216 kB) greater than maximum allowed "
    "(2097152000 kB).",
])
def test_other_drains(reason: str | None) -> None:
    assert hardware_fault(reason) is None
