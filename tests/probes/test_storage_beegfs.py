"""BeeGFS client connection lines in the kernel log (client_module NodeConnPool.c).

"Connect failed on all available routes: <type> <id> [ID: n]" is logged once when every route
to a server failed; "Connected: <type>@<addr> (protocol: ...)" when a connection to a server of
that type succeeds again. Tasks blocked while a server is unreachable wait for it: the
storage's outage, not a hung host.
"""

from __future__ import annotations

from tests.probes.test_storage_kernel_resolved import _kernel_codes, _kernel_facts

PREFIX = "beegfs: 5E2F-6523B1A4-gpu001: NodeConn (acquire stream): "
LOST = (f"[1209300.104702] {PREFIX}Connect failed on all available routes: beegfs-storage "
        "stor03 [ID: 3]")
BACK = f"[1209391.330112] {PREFIX}Connected: beegfs-storage@10.12.0.31:8003 (protocol: RDMA)"
HUNG = "[1209430.552107] INFO: task python3:2318820 blocked for more than 122 seconds."


def test_a_server_unreachable_on_all_routes_is_the_storages() -> None:
    assert "storage-beegfs-server-unreachable" in _kernel_codes(LOST)
    assert "storage-beegfs-server-unreachable" not in _kernel_codes(LOST, BACK)


def test_tasks_blocked_on_an_unreachable_beegfs_server_are_its_symptom() -> None:
    assert _kernel_facts(LOST)["storage_waiting"] is True
    codes = _kernel_codes(LOST, HUNG)
    assert "kernel-hung-task" not in codes and "storage-beegfs-server-unreachable" in codes


def test_one_route_failing_with_a_fallback_that_connects_is_not_a_fault() -> None:
    codes = _kernel_codes(
        f"[1209300.104221] {PREFIX}Connect failed: beegfs-storage@10.12.0.31:8003 (protocol: "
        "RDMA)",
        f"[1209300.104590] {PREFIX}Connected: beegfs-storage@10.12.1.31:8003 (protocol: TCP; "
        "fallback route)")
    assert "storage-beegfs-server-unreachable" not in codes
