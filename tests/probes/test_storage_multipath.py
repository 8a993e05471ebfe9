"""Block and filesystem errors on device-mapper volumes whose remote paths were all lost
(probes/storage_paths.py): the storage's symptom, never a local disk's.

Line formats: drivers/md/dm-mpath.c fail_path / reinstate_path ("device-mapper: multipath:
254:0: Failing path 8:16."), drivers/scsi/scsi_transport_iscsi.c (" session13: session
recovery timed out after 5 secs") and scsi_transport_fc.c ("rport-4:0-0: blocked FC remote
port time out: removing target and saving binding"), block/blk-mq.c and fs/buffer.c error
lines, as recorded in published initiator logs (open-iscsi and Debian/Arch reports).
"""

from __future__ import annotations

import re

import pytest

from probes import faults
from probes.storage_paths import sd_name
from tests.probes.test_storage_kernel_resolved import _kernel_codes, _kernel_facts

HOST_CODES = {"kernel-block-io-error", "kernel-fs-readonly", "kernel-fs-corruption"}
SESSION = "[1209475.976977]  session13: session recovery timed out after 5 secs"
SESSION2 = "[1209476.976977]  session14: session recovery timed out after 5 secs"
FAIL_B = "[1209475.990031] device-mapper: multipath: 254:0: Failing path 8:16."
FAIL_C = "[1209476.990031] device-mapper: multipath: 254:0: Failing path 8:32."
REJECT = "[1209475.984660] sd 6:0:0:0: rejecting I/O to offline device"
SDB_ERR = ("[1209475.984883] I/O error, dev sdb, sector 401408 op 0x1:(WRITE) flags 0x2004000 "
           "phys_seg 128 prio class 2")
DM0_ERR = "[1209477.100000] Buffer I/O error on dev dm-0, logical block 0, lost async page write"
DM0_RO = "[1209477.200000] EXT4-fs (dm-0): Remounting filesystem read-only"


@pytest.mark.parametrize(("major", "minor", "name"), [
    (8, 0, "sda"), (8, 16, "sdb"), (8, 240, "sdp"), (65, 0, "sdq"), (65, 160, "sdaa"),
    (259, 3, None), (253, 0, None)])
def test_sd_name_from_dev_t(major: int, minor: int, name: str | None) -> None:
    assert sd_name(major, minor) == name


def test_the_new_lines_leave_the_host() -> None:
    ere = re.compile(faults.stream_ere("kernel"))
    for line in (SESSION, FAIL_B, DM0_ERR, DM0_RO, SDB_ERR,
                 "[1209409.100000] device-mapper: multipath: 254:0: Reinstating path 8:16.",
                 " rport-4:0-0: blocked FC remote port time out: removing target and saving "
                 "binding"):
        assert ere.search(line), line


def test_iscsi_multipath_volume_with_every_path_lost_is_the_storages() -> None:
    lines = [SESSION, REJECT, SDB_ERR, FAIL_B, SESSION2, FAIL_C, DM0_ERR, DM0_RO]
    assert _kernel_facts(*lines)["nvmeof_lost_errors_only"] is True
    codes = _kernel_codes(*lines)
    assert "storage-multipath-io-failed" in codes and not codes & HOST_CODES
    assert {"storage-san-session-lost", "storage-multipath-path-failed"} <= codes


def test_iscsi_failover_path_errors_with_a_path_left_are_not_a_disk() -> None:
    codes = _kernel_codes(SESSION, REJECT, SDB_ERR, FAIL_B)
    assert not codes & HOST_CODES and "storage-multipath-io-failed" not in codes
    assert "storage-multipath-path-failed" in codes


def test_fc_ports_timed_out_under_a_multipath_volume() -> None:
    rport = ("[1209500.{0}00000]  rport-{0}:0-0: blocked FC remote port time out: removing "
             "target and saving binding")
    xfs = ("[1209500.900000] XFS (dm-0): Log I/O Error (0x2) detected at xlog_ioend_work+0x3e"
           "/0x60 [xfs] (fs/xfs/xfs_log.c:1264).  Shutting down filesystem.")
    codes = _kernel_codes(rport.format(4), rport.format(5), FAIL_B, FAIL_C, DM0_ERR, xfs)
    assert "storage-multipath-io-failed" in codes and not codes & HOST_CODES


def test_local_dual_path_disks_without_a_lost_transport_stay_the_hosts() -> None:
    codes = _kernel_codes(FAIL_B, FAIL_C, DM0_ERR, DM0_RO)  # SAS multipath, no session lost
    assert {"kernel-block-io-error", "kernel-fs-readonly"} <= codes
    assert "storage-multipath-io-failed" not in codes


def test_errors_after_the_paths_were_reinstated_stay_the_hosts() -> None:
    back = ["[1209476.500000] device-mapper: multipath: 254:0: Reinstating path 8:16.",
            "[1209476.600000] device-mapper: multipath: 254:0: Reinstating path 8:32."]
    codes = _kernel_codes(SESSION, FAIL_B, SESSION2, FAIL_C, *back, DM0_ERR)
    assert "kernel-block-io-error" in codes
    assert "storage-multipath-path-failed" not in codes


def test_dm_multipath_over_nvme_tcp_namespaces_whose_controllers_were_torn_down() -> None:
    codes = _kernel_codes(
        "[1209450.100000] nvme nvme2: starting error recovery",
        "[1209450.200000] nvme nvme3: starting error recovery",
        "[1209450.300000] device-mapper: multipath: 253:1: Failing path 259:3.",
        "[1209450.400000] device-mapper: multipath: 253:1: Failing path 259:5.",
        "[1209450.500000] Buffer I/O error on dev dm-1, logical block 0, async page read")
    assert "storage-multipath-io-failed" in codes and not codes & HOST_CODES


def test_lvm_over_a_native_nvme_head_without_paths_is_the_storages() -> None:
    lines = ["[1209580.602118] block nvme1n1: no available path - failing I/O",
             "[1209580.610221] XFS (dm-3): log I/O error -5",
             "[1209580.611230] XFS (dm-3): Log I/O Error (0x2) detected at xlog_ioend_work+0x3e"
             "/0x60 [xfs] (fs/xfs/xfs_log.c:1264).  Shutting down filesystem."]
    codes = _kernel_codes(*lines)
    assert "storage-nvmeof-no-path" in codes and not codes & HOST_CODES


def test_a_local_disk_failing_under_lvm_during_a_remote_outage_stays_the_hosts() -> None:
    codes = _kernel_codes(
        "[1209580.602118] block nvme1n1: no available path - failing I/O",
        "[1209580.605000] critical medium error, dev nvme0n1, sector 1024 op 0x0:(READ) flags "
        "0x80700 phys_seg 1 prio class 2",
        "[1209580.610221] Buffer I/O error on dev dm-1, logical block 128, async page read")
    assert "kernel-block-io-error" in codes and "storage-multipath-io-failed" not in codes
