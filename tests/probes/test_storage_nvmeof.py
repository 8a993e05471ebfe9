"""NVMe over Fabrics paths in the kernel log: a remote namespace's path is not a local drive.

The fabrics transports (drivers/nvme/host/rdma.c, tcp.c) print an I/O timeout in the words
pci.c uses ("nvme nvmeN: I/O ... QID ... timeout") and then their own error recovery
("starting error recovery", "Reconnecting in N seconds...", "Successfully reconnected"),
which a local PCIe controller never prints; the multipath head says "no available path -
failing I/O" when every path is gone (drivers/nvme/host/multipath.c).
"""

from __future__ import annotations

from tests.probes.test_storage_kernel_resolved import _kernel_codes, _kernel_facts

RDMA_TIMEOUT = "[1209401.112233] nvme nvme1: I/O 98 QID 6 timeout"
TCP_TIMEOUT = ("[1209401.112233] nvme nvme1: I/O tag 14 (100e) type 4 opcode 0x1 (Write) "
               "QID 3 timeout")
RECOVERY = ["[1209401.112301] nvme nvme1: starting error recovery",
            "[1209401.120045] nvme nvme1: Reconnecting in 10 seconds..."]
RECONNECTED = "[1209411.372210] nvme nvme1: Successfully reconnected (1 attempts)"
FAILED = "[1209421.380112] nvme nvme1: Failed reconnect attempt 2"


def test_a_fabric_timeout_is_not_a_local_drive_and_a_lost_path_is_a_warning() -> None:
    for timeout in (RDMA_TIMEOUT, TCP_TIMEOUT):
        codes = _kernel_codes(timeout, *RECOVERY, FAILED)
        assert "kernel-nvme-timeout" not in codes
        assert "storage-nvmeof-path-lost" in codes


def test_a_path_that_reconnected_raises_nothing() -> None:
    for timeout in (RDMA_TIMEOUT, TCP_TIMEOUT):
        codes = _kernel_codes(timeout, *RECOVERY, RECONNECTED)
        assert not codes & {"kernel-nvme-timeout", "storage-nvmeof-path-lost",
                            "storage-nvmeof-no-path", "kernel-nvme-controller-down"}


def test_a_local_drive_timing_out_while_a_fabric_path_recovers_is_still_named() -> None:
    codes = _kernel_codes(
        "[1209380.001122] nvme nvme0: I/O tag 28 (401c) opcode 0x2 (Read) QID 5 timeout, "
        "aborting req_op:READ(0) size:131072", RDMA_TIMEOUT, *RECOVERY, RECONNECTED)
    assert "kernel-nvme-timeout" in codes
    assert "storage-nvmeof-path-lost" not in codes


def test_all_paths_lost_is_the_storages_error_not_a_dead_local_drive() -> None:
    codes = _kernel_codes(RDMA_TIMEOUT, *RECOVERY, FAILED,
                          "[1209422.000101] block nvme1n1: no available path - failing I/O")
    assert "storage-nvmeof-no-path" in codes
    assert "kernel-nvme-controller-down" not in codes
    assert "kernel-nvme-timeout" not in codes
    # a path coming back ends it
    assert "storage-nvmeof-no-path" not in _kernel_codes(
        "[1209422.000101] block nvme1n1: no available path - failing I/O", RECONNECTED)


def test_tasks_blocked_while_the_fabric_path_is_down_are_its_symptom() -> None:
    facts = _kernel_facts(RDMA_TIMEOUT, *RECOVERY, FAILED)
    assert facts["storage_waiting"] is True
    assert "kernel-hung-task" not in _kernel_codes(
        RDMA_TIMEOUT, *RECOVERY, "[1209530.552107] INFO: task python3:2318820 blocked for "
        "more than 122 seconds.")


def test_nvme_fc_connectivity_loss_and_its_reconnect() -> None:
    lost = ("[1209401.112301] nvme nvme10: NVME-FC{10}: controller connectivity lost. Awaiting "
            "Reconnect")
    assert "storage-nvmeof-path-lost" in _kernel_codes(lost)
    assert "storage-nvmeof-path-lost" not in _kernel_codes(
        lost, "[1209405.330112] nvme nvme10: NVME-FC{10}: controller connect complete")
