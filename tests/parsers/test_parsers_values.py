"""Specific facts read from the real samples in fixtures/real/, per kind.

Expected values are copied from the sample text by eye, so a parser that drifts (a unit
conversion, a column shift, a dropped last line) fails here with the value it got.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probes.parsers import parse

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def facts(name: str) -> dict[str, Any]:
    """Parse fixtures/real/<name> with the KIND its file name starts with."""
    path = REAL / name
    return parse(name.split("__", 1)[0], path.read_text(encoding="utf-8"))


# --- nvidia-smi topo -m --------------------------------------------------------------------


def test_topo_8x_h100_matrix() -> None:
    # 8 GPUs on NV18 with 8 mlx5 NICs: GPU-GPU NV18, own NIC PIX, far-socket NIC SYS
    f = facts("nvidia-smi-topo__8x-h100-hbm3-nv18-8x-mlx5.txt")
    assert f["gpus"] == [f"GPU{i}" for i in range(8)]
    assert f["links"]["GPU0"]["GPU1"] == "NV18"
    assert f["links"]["GPU0"]["NIC0"] == "PIX"
    assert f["links"]["GPU0"]["NIC4"] == "SYS"
    assert f["nics"] == {f"NIC{i}": f"mlx5_{i}" for i in range(8)}


def test_topo_8x_h100_self_cell_and_nic_rows() -> None:
    # the X self cell is left out; NIC rows are parsed too, including the last one ("X " end)
    f = facts("nvidia-smi-topo__8x-h100-hbm3-nv18-8x-mlx5.txt")
    assert "GPU0" not in f["links"]["GPU0"]
    assert len(f["links"]) == 16
    assert f["links"]["NIC7"] == {
        **{f"GPU{i}": "SYS" for i in range(4)},
        "GPU4": "NODE",
        "GPU5": "NODE",
        "GPU6": "NODE",
        "GPU7": "PIX",
        **{f"NIC{i}": "SYS" for i in range(4)},
        "NIC4": "NODE",
        "NIC5": "NODE",
        "NIC6": "NODE",
    }


def test_topo_8x_h100_affinity() -> None:
    # CPU and NUMA affinity per GPU, both sockets; "GPU NUMA ID" N/A becomes null
    f = facts("nvidia-smi-topo__8x-h100-hbm3-nv18-8x-mlx5.txt")
    assert f["cpu_affinity"]["GPU0"] == "0-47,96-143"
    assert f["cpu_affinity"]["GPU7"] == "48-95,144-191"
    assert f["numa_affinity"] == {f"GPU{i}": "0" if i < 4 else "1" for i in range(8)}
    assert f["gpu_numa_id"]["GPU0"] is None


def test_topo_1x_h100_kvm_single_nic() -> None:
    # one GPU, one NIC behind the host bridge (PHB); trailing space after the NIC row's X
    f = facts("nvidia-smi-topo__1x-h100-pcie-kvm-1x-mlx5.txt")
    assert f["gpus"] == ["GPU0"]
    assert f["links"] == {"GPU0": {"NIC0": "PHB"}, "NIC0": {"GPU0": "PHB"}}
    assert f["cpu_affinity"] == {"GPU0": "0-251"}
    assert f["numa_affinity"] == {"GPU0": "0"}


def test_topo_2x_rtx6000_nic_pair() -> None:
    # the two ports of one ConnectX-7 are PIX to each other, NODE to the GPUs
    f = facts("nvidia-smi-topo__2x-rtx6000-ada-threadripper-1numa-2x-mlx5.txt")
    assert f["links"]["NIC0"]["NIC1"] == "PIX"
    assert f["links"]["GPU1"] == {"GPU0": "PHB", "NIC0": "NODE", "NIC1": "NODE"}
    assert f["nics"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}


# --- nvidia-smi default table ----------------------------------------------------------------


def test_nvidia_smi_8x_h100_rows() -> None:
    # 8 idle H100s; memory columns in MiB as printed; no trailing newline at end of file
    f = facts("nvidia-smi__default-8x-h100-hbm3-driver550.txt")
    assert (f["driver_version"], f["cuda_version"]) == ("550.90.07", "12.4")
    assert [g["index"] for g in f["gpus"]] == list(range(8))
    assert {g["memory_used_mib"] for g in f["gpus"]} == {1}
    assert {g["memory_total_mib"] for g in f["gpus"]} == {81559}
    assert [g["temperature_c"] for g in f["gpus"]] == [27, 24, 23, 23, 27, 22, 24, 23]
    assert f["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert f["gpus"][0]["utilization_pct"] == 0
    assert f["processes"] == []


def test_nvidia_smi_4x_rtx6000_rows() -> None:
    # truncated names kept as printed; fan % read from the first cell, not mistaken for util
    f = facts("nvidia-smi__default-4x-rtx6000-ada-pcie-driver575.txt")
    assert (f["driver_version"], f["cuda_version"]) == ("575.51.03", "12.9")
    assert [g["memory_used_mib"] for g in f["gpus"]] == [2, 2, 2, 2]
    assert [g["memory_total_mib"] for g in f["gpus"]] == [49140] * 4
    assert [g["temperature_c"] for g in f["gpus"]] == [31, 34, 30, 32]
    assert f["gpus"][3]["bus_id"] == "00000000:E1:00.0"
    assert f["gpus"][0]["name"] == "NVIDIA RTX 6000 Ada Gene..."
    assert f["gpus"][0]["fan_pct"] == 30
    assert f["gpus"][0]["utilization_pct"] == 0


# --- nvidia-smi -q -----------------------------------------------------------------------------


def test_nvidia_smi_q_a10_remapped_rows_pending() -> None:
    # "Pending: Yes" under Remapped Rows, not the "Pending" of MIG/ECC mode sections
    f = facts("nvidia-smi-q__1x-a10-driver535-remapped-rows-pending.txt")
    assert (f["driver_version"], f["cuda_version"]) == ("535.129.03", "12.2")
    (gpu,) = f["gpus"]
    assert gpu["name"] == "NVIDIA A10"
    assert gpu["bus_id"] == "00000000:07:00.0"
    assert gpu["remapped_rows_pending"] is True
    assert gpu["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 4,
        "pending": True,
        "failure_occurred": False,
    }


def test_nvidia_smi_q_a10_ecc_and_memory() -> None:
    # ECC counters by section, memory in MiB, temperature in C
    gpu = facts("nvidia-smi-q__1x-a10-driver535-remapped-rows-pending.txt")["gpus"][0]
    assert gpu["ecc"]["volatile"]["DRAM Uncorrectable"] == 0
    assert gpu["ecc"]["aggregate"]["SRAM Correctable"] == 0
    assert (gpu["memory_total_mib"], gpu["memory_used_mib"]) == (23028, 4)
    assert gpu["temperature_c"] == 33
    assert gpu["clocks_event_reasons"] == ["Idle"]


# --- nvidia-smi --query-gpu CSV --------------------------------------------------------------


def test_nvidia_smi_query_b300_rows() -> None:
    # 7 rows keyed by field; versions and compute capability stay strings
    f = facts("nvidia-smi-query__driver-name-computecap-7x-b300.csv.txt")
    assert len(f["rows"]) == 7
    assert f["rows"][0] == {
        "driver_version": "610.57.04",
        "name": "NVIDIA B300 SXM6 AC",
        "compute_cap": "10.3",
    }


# --- nvidia-smi nvlink --status ----------------------------------------------------------------


def test_nvlink_8x_a100_all_links_active() -> None:
    # 8 GPUs x 12 links at 25 GB/s; the last line has no trailing newline
    f = facts("nvidia-smi-nvlink__status-8x-a100-sxm4-80gb-12-links.txt")
    assert [g["index"] for g in f["gpus"]] == list(range(8))
    assert all(len(g["links"]) == 12 for g in f["gpus"])
    assert {(link["speed_gb_s"], link["active"]) for g in f["gpus"] for link in g["links"]} == {
        (25.0, True)
    }
    assert f["gpus"][7]["links"][11] == {"link": 11, "speed_gb_s": 25.0, "active": True}


def test_nvlink_tab_indented_excerpt() -> None:
    # older driver's TAB+space indentation; excerpt with GPU 0 and GPU 1 only
    f = facts("nvidia-smi-nvlink__status-a100-sxm4-80gb-tab-indented-older-driver-excerpt.txt")
    assert [g["index"] for g in f["gpus"]] == [0, 1]
    assert f["gpus"][1]["uuid"] == "GPU-0c512562-871f-8257-6187-b5ae1b986d5e"
    assert [link["link"] for link in f["gpus"][0]["links"]] == list(range(12))


# --- ibstat / ibv_devinfo / ibdev2netdev -------------------------------------------------------


def test_ibstat_b300_connectx8_down() -> None:
    # the ConnectX-8 ports are Down/Disabled at rate 10; CA order kept as printed
    f = facts("ibstat__11-cas-connectx8-down-connectx7-active-b300-host.txt")
    names = [ca["name"] for ca in f["cas"]]
    assert len(names) == 11
    assert names[:3] == ["mlx5_0", "mlx5_1", "mlx5_10"]
    cx8 = next(ca for ca in f["cas"] if ca["name"] == "mlx5_0")
    assert cx8["ca_type"] == "MT4131"
    assert cx8["ports"][0]["state"] == "Down"
    assert cx8["ports"][0]["physical_state"] == "Disabled"
    assert cx8["ports"][0]["rate_gbit_s"] == 10
    down = [ca["name"] for ca in f["cas"] if ca["ports"][0]["state"] == "Down"]
    assert len(down) == 7


def test_ibstat_b300_connectx7_active() -> None:
    # the ConnectX-7 ports are Active/LinkUp at 100 on InfiniBand
    f = facts("ibstat__11-cas-connectx8-down-connectx7-active-b300-host.txt")
    port = next(ca for ca in f["cas"] if ca["name"] == "mlx5_2")["ports"][0]
    assert (port["state"], port["physical_state"], port["rate_gbit_s"]) == ("Active", "LinkUp", 100)
    assert port["link_layer"] == "InfiniBand"
    assert port["base_lid"] == 1


def test_ibstat_h100_tabs_ndr400_and_ethernet() -> None:
    # tab-indented; NDR 400 IB ports, Ethernet ports of the CX6-Dx; last CA without newline
    f = facts("ibstat__12-cas-h100-node-8x-cx7-ndr400-plus-cx6dx-eth-tabs.txt")
    by_name = {ca["name"]: ca["ports"][0] for ca in f["cas"]}
    assert len(by_name) == 12
    assert by_name["mlx5_0"]["rate_gbit_s"] == 400
    assert by_name["mlx5_1"]["link_layer"] == "Ethernet"
    assert by_name["mlx5_2"]["state"] == "Down"
    assert by_name["mlx5_9"]["link_layer"] == "InfiniBand"
    assert by_name["mlx5_9"]["port_guid"] == "0x946dae0300cde9c8"


def test_ibstat_archwiki_dual_port_second_port_polling() -> None:
    # one CA with two ports (mlx4): port 1 Active at DDR 20, port 2 uncabled Down/Polling
    f = facts("ibstat__archwiki-mlx4-connectx-ddr-2-ports-port2-down-polling-spaces.txt")
    (ca,) = f["cas"]
    assert (ca["name"], ca["ca_type"], ca["number_of_ports"]) == ("mlx4_0", "MT25418", 2)
    assert ca["system_image_guid"] == "0x0002c90300002f7b"
    one, two = ca["ports"]
    assert (one["port"], one["state"], one["rate_gbit_s"], one["base_lid"]) == (1, "Active", 20, 3)
    assert (two["port"], two["state"], two["physical_state"]) == (2, "Down", "Polling")
    assert (two["rate_gbit_s"], two["base_lid"], two["sm_lid"]) == (10, 0, 0)
    assert f["errors"] == []


def test_ibstat_mlx4_fdr() -> None:
    # one ConnectX-3 port at FDR 56
    f = facts("ibstat__mlx4-connectx3-fdr56-1port.txt")
    assert f["cas"][0]["name"] == "mlx4_0"
    assert f["cas"][0]["ports"][0]["rate_gbit_s"] == 56


def test_ibv_devinfo_active_port() -> None:
    # verbs state keeps its spelling; the numeric code is separate; LIDs are ints
    f = facts("ibv_devinfo__ib-vf-4126-port-active-lid-single-hca-excerpt.txt")
    (dev,) = f["devices"]
    assert dev["name"] == "mlx5_3"
    assert dev["vendor_part_id"] == 4126
    (port,) = dev["ports"]
    assert (port["port"], port["state"], port["state_code"]) == (1, "PORT_ACTIVE", 4)
    assert (port["link_layer"], port["port_lid"], port["active_mtu"]) == ("InfiniBand", 1690, 4096)


def test_ibdev2netdev_pfs_and_vfs() -> None:
    # 16 lines: IB PFs, SR-IOV VFs and one Ethernet port; Up/Down as booleans
    f = facts("ibdev2netdev__cx6-ib-pfs-and-sriov-vfs-excerpt.txt")
    assert len(f["mappings"]) == 16
    assert f["mappings"][0] == {
        "device": "mlx5_19",
        "port": 1,
        "netdev": "ibp75s0v7",
        "up": False,
        "pci": None,
        "port_state": None,
        "description": None,
    }
    eth = next(m for m in f["mappings"] if m["device"] == "mlx5_4")
    assert (eth["netdev"], eth["up"]) == ("enp97s0f0", True)
    assert sum(m["up"] for m in f["mappings"]) == 3


def test_ibdev2netdev_single_line() -> None:
    # a grep-filtered single mapping
    f = facts("ibdev2netdev__roce-port-grep-single-line.txt")
    assert [(m["device"], m["port"], m["netdev"], m["up"]) for m in f["mappings"]] == [
        ("mlx5_1", 1, "ens1f1", True)
    ]


# --- NIC / HCA counters ------------------------------------------------------------------------


def test_ethtool_prio_counters() -> None:
    # grep-filtered listing (no banner): 32 counters, traffic on prio 0 only
    f = facts("ethtool-S__mlx5-grep-prio-byteps-rdma-host.txt")
    assert len(f["counters"]) == 32
    assert f["counters"]["rx_prio0_bytes"] == 88034564921216
    assert f["counters"]["tx_prio0_packets"] == 40177770079
    assert all(v == 0 for k, v in f["counters"].items() if "prio0" not in k)


def test_ib_sysfs_counters_saturated() -> None:
    # "=== ./file ===" loop dump; narrow counters stuck at their maximum are flagged
    f = facts("ib-sysfs-counters__mlx5_1-port1-counters-saturated-xmit-wait.txt")
    c = f["counters"]
    assert len(c) == 21
    assert (c["port_xmit_wait"], c["link_downed"], c["port_xmit_discards"]) == (
        4294967295,
        255,
        65535,
    )
    assert c["port_rcv_data"] == 205128687774249
    assert c["symbol_error"] == 0  # last entry, no trailing blank line
    assert set(f["saturated"]) == {
        "port_xmit_wait",
        "link_downed",
        "port_xmit_discards",
        "excessive_buffer_overrun_errors",
    }


def test_perfquery_extended_all_zero() -> None:
    # -x extended counters of LID 10 port 1; PortSelect/CounterSelect are not counters
    f = facts("perfquery__extended-x-lid10-rhel75-all-zero.txt")
    assert (f["lid"], f["port"], f["extended"]) == (10, 1, True)
    assert len(f["counters"]) == 22
    assert set(f["counters"].values()) == {0}
    assert "PortSelect" not in f["counters"]
    assert "CounterSelect" not in f["counters"]
    assert f["counters"]["PortXmitWait"] == 0


# --- nccl-tests --------------------------------------------------------------------------------


def test_nccl_tests_1node_avg_busbw() -> None:
    # avg bus bandwidth exactly as printed on the "Avg bus bandwidth" line; 8 ranks, 0 wrong
    f = facts("nccl-tests__allreduce-1node-8x-a100-sxm4-40gb-oci.txt")
    assert f["avg_busbw_gb_s"] == 231.793
    assert f["ranks"] == 8
    assert f["wrong"] == 0
    (row,) = f["rows"]
    assert row["size_bytes"] == 10737418240
    assert (row["busbw_oop_gb_s"], row["busbw_ip_gb_s"]) == (232.04, 231.54)
    assert (row["algbw_oop_gb_s"], row["root"]) == (132.60, -1)


def test_nccl_tests_old_layout_with_sharp_lines() -> None:
    # no root column, "error" floats instead of #wrong; SHARP log lines and a snip mark ignored
    f = facts("nccl-tests__allreduce-2node-16x-a100-40gb-ib-sharp-old-format-snipped.txt")
    assert f["old_layout"] is True
    assert len(f["rows"]) == 29
    assert f["rows"][0]["size_bytes"] == 8
    assert f["rows"][0]["root"] is None
    assert f["rows"][0]["error_oop"] == 4e-07
    assert (f["rows"][-1]["busbw_oop_gb_s"], f["rows"][-1]["busbw_ip_gb_s"]) == (105.46, 105.51)
    assert f["avg_busbw_gb_s"] == 29.0317
    assert f["ranks"] == 16
    assert f["hosts"] == ["a0000", "a0001"]
    assert f["wrong"] == 0  # from "Out of bounds values : 0"


def test_nccl_tests_2node_kubeflow() -> None:
    # two sizes, 16 ranks on two pods; NCCL version line inside the header
    f = facts("nccl-tests__allreduce-2node-16x-a100-40gb-kubeflow-mpijob-rdma-sriov.txt")
    assert [r["size_bytes"] for r in f["rows"]] == [1073741824, 10737418240]
    assert f["rows"][1]["busbw_ip_gb_s"] == 180.08
    assert f["avg_busbw_gb_s"] == 175.531
    assert f["ranks"] == 16
    assert f["nccl_version"] == "2.14.3"


def test_nccl_tests_wrong_cells_and_out_of_bounds_differ() -> None:
    # #wrong 96 / 32 on one row, but "Out of bounds values : 4 FAILED" (one per failing half
    # per rank): wrong is the summary's count; the trailing "Test failure" lines are kept
    f = facts("nccl-tests__allreduce-2node-2x-gh200-slingshot-wrong-96-32-oob-4-failed.txt")
    bad = [r for r in f["rows"] if r["wrong_oop"] or r["wrong_ip"]]
    assert [(r["size_bytes"], r["wrong_oop"], r["wrong_ip"]) for r in bad] == [(1048576, 96, 32)]
    assert (f["wrong"], f["out_of_bounds"], f["completed"]) == (4, 4, True)
    assert f["avg_busbw_gb_s"] == 4.79995 and len(f["rows"]) == 25
    assert f["test_failures"] == [".. gpu-1-1 pid 662195: Test failure common.cu:1189",
                                  ".. gpu-1-7 pid 2448661: Test failure common.cu:1189"]
    assert f["nccl_warns"] == [] and f["nccl_tests_version"] == "2.17.8"


def test_nccl_tests_aborted_run() -> None:
    # device list, then six CUDA failures each followed by its TESTCHECK line; no table
    f = facts("nccl-tests__allreduce-2node-8x-gh200-exclusive-process-cuda-busy-aborted.txt")
    assert f["completed"] is False and f["rows"] == [] and f["ranks"] == 8
    assert (f["wrong"], f["out_of_bounds"], f["avg_busbw_gb_s"]) == (None, None, None)
    assert len(f["test_failures"]) == 12
    assert f["test_failures"][0] == ("gpu-1-1: Test CUDA failure common.cu:1304 'CUDA-capable "
                                     "device(s) is/are busy or unavailable'")
    assert f["test_failures"][-1] == ".. gpu-1-1 pid 3617718: Test failure common.cu:1189"


def test_nccl_tests_all_gather_after_a_launcher_preamble() -> None:
    # ssh warnings, "Hello from" and the hostfile list before the header are ignored
    f = facts("nccl-tests__allgather-2node-2x-h200-gke-rdma-ssh-hostfile-preamble.txt")
    assert len(f["rows"]) == 24 and f["rows"][0]["redop"] == "none"
    assert f["rows"][-1]["busbw_ip_gb_s"] == 33.32 and f["rows"][-1]["size_bytes"] == 8589934592
    assert (f["wrong"], f["completed"], f["test_failures"]) == (0, True, [])
    assert f["hosts"] == ["nccl-gib-test-0", "nccl-gib-test-1"]
    assert f["nccl_version"] == "2.25.1"


# --- NCCL debug logs and watchdog timeouts ----------------------------------------------------


def test_nccl_debug_roce_bond() -> None:
    # RoCE over a bonded HCA is NCCL's IB network; TensorFlow lines interleaved; env overrides
    f = facts("nccl-debug__init-roce-bond-nccl2.8-tensorflow-interleaved-excerpt.txt")
    assert f["nccl_version"] == "2.8.3"
    assert f["nccl_version_full"] == "2.8.3+cuda10.2"
    assert f["networks"] == ["IB"]
    assert f["ib_devices"] == [{"index": 0, "name": "mlx5_bond_0", "port": 1, "type": "RoCE"}]
    assert f["env"]["NCCL_IB_GID_INDEX"] == "3"
    assert f["watchdog_timeouts"] == []


def test_nccl_debug_socket_fallback_behind_mpirun_prefix() -> None:
    # "NET/IB : No device found." is not a network; NET/Socket is; [1,N]<stdout>: prefixes
    f = facts("nccl-debug__init-socket-loopback-no-ib-nccl2.5-mpirun-prefix-excerpt.txt")
    assert f["nccl_version"] == "2.5.6"
    assert f["networks"] == ["Socket"]
    assert f["ib_devices"] == []


def test_nccl_debug_old_torch_watchdog() -> None:
    # one entry per timeout line, in order, with the rank that printed it
    f = facts("nccl-debug__watchdog-timeout-old-torch-8xv100-excerpt.txt")
    t = f["watchdog_timeouts"]
    assert [(x["op"], x["seq"], x["timeout_ms"]) for x in t] == [("ALLREDUCE", 469508, 1800000)] * 5
    assert [x["rank"] for x in t] == [1, 3, 2, 6, 7]
    assert t[0]["ran_for_ms"] == 1802212


def test_nccl_debug_reduce_scatter_timeouts() -> None:
    # torch 2.x "[rankN]:" prefix; "Exception ... detected by watchdog" lines are not timeouts
    f = facts("nccl-debug__watchdog-timeout-reduce-scatter-torch2x-excerpt.txt")
    t = f["watchdog_timeouts"]
    assert [(x["op"], x["seq"], x["timeout_ms"], x["rank"]) for x in t] == [
        ("_REDUCE_SCATTER_BASE", 7753, 600000, 0),
        ("_REDUCE_SCATTER_BASE", 7753, 600000, 4),
        ("_REDUCE_SCATTER_BASE", 7753, 600000, 3),
    ]
    assert t[0]["numel_in"] == 544997376


def test_nccl_debug_distbackenderror_trace() -> None:
    # the timeout inside a "terminate called ... what():" line of a C++ trace
    f = facts("nccl-debug__watchdog-terminate-distbackenderror-allgather-trace-excerpt.txt")
    (t,) = f["watchdog_timeouts"]
    assert (t["op"], t["seq"], t["timeout_ms"], t["rank"]) == ("_ALLGATHER_BASE", 9141, 600000, 5)
    assert f["nccl_version"] is None


# --- kernel log --------------------------------------------------------------------------------


def test_dmesg_xid_48_63_94() -> None:
    # Xid codes in order with PCI address, message text and dmesg timestamp
    f = facts("dmesg-xid__xid48-63-94-dbe-row-remap-contained.txt")
    assert [x["code"] for x in f["xids"]] == [48, 63, 94]
    assert f["codes"] == [48, 63, 94]
    assert {x["pci"] for x in f["xids"]} == {"0000:52:00"}
    assert f["xids"][1]["text"].startswith("Row Remapper: New row")
    assert f["xids"][0]["timestamp"] == "430954.509105"
    assert f["xids"][0]["pid"] == "<unknown>"
    assert f["fallen_off_bus"] is False


def test_dmesg_fallen_off_bus_legacy_wording() -> None:
    # old driver: no Xid number, "GPU at <pci> has fallen off the bus."
    f = facts("dmesg-xid__gpu-fallen-off-bus-old-laptop-driver.txt")
    assert f["fallen_off_bus"] is True
    assert f["xids"] == []
    assert f["fallen_off_bus_pci"] == ["0000:01:00.0"]


# --- CUDA OOM ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # PyTorch <= 2.0 parenthesised wording: GiB/MiB converted with binary units
        (
            "cuda-oom__torch20-legacy-parenthesized-format-14.56gb-gpu.txt",
            {
                "tried_to_allocate_bytes": round(1.69 * 2**30),
                "total_capacity_bytes": round(14.56 * 2**30),
                "free_bytes": round(1.31 * 2**30),
                "gpu": 0,
            },
        ),
        # PyTorch 2.1 "total capacty" typo still read
        (
            "cuda-oom__torch21-capacty-typo-4gb-gpu.txt",
            {
                "tried_to_allocate_bytes": 32 * 2**20,
                "total_capacity_bytes": 4 * 2**30,
                "free_bytes": round(41.56 * 2**20),
                "gpu": 0,
            },
        ),
        # PyTorch >= 2.4 wording (torch.OutOfMemoryError, expandable_segments hint)
        (
            "cuda-oom__torch24plus-expandable-segments-32gb-gpu.txt",
            {
                "tried_to_allocate_bytes": round(22.78 * 2**30),
                "total_capacity_bytes": round(31.47 * 2**30),
                "free_bytes": round(12.73 * 2**30),
                "gpu": 0,
            },
        ),
    ],
)
def test_cuda_oom_sizes(name: str, expected: dict[str, int]) -> None:
    f = facts(name)
    assert {k: f[k] for k in expected} == expected
    assert f["count"] == 1


def test_cuda_oom_new_wording_extra_sizes() -> None:
    # "this process has X in use" and "reserved but unallocated" of the newer wording
    f = facts("cuda-oom__torch24plus-expandable-segments-32gb-gpu.txt")
    assert f["process_in_use_bytes"] == round(18.73 * 2**30)
    assert f["reserved_unallocated_bytes"] == round(9.35 * 2**30)
    assert f["allocated_by_pytorch_bytes"] == round(9.08 * 2**30)


# --- storage -----------------------------------------------------------------------------------


def test_fio_json_randread() -> None:
    # read IOPS and clat p99 (ns -> us); the idle write side has no percentiles -> null
    (job,) = facts("fio-json__randread-128k-qd1-ceph-rbd-engine-pure-json.txt")["jobs"]
    assert job["name"] == "cbt-fio-128krandomread-o01-file-0"
    assert job["read_iops"] == 1507.908202
    assert job["read_clat_p99_us"] == 1187.84
    assert job["write_iops"] == 0.0
    assert job["write_clat_p99_us"] is None


def test_ioping_statistics() -> None:
    # the summary lines give requests (warmup excluded) and avg/max in us
    f = facts("ioping__c10-virtiofs-volume-per-request-and-stats.txt")
    assert (f["requests"], f["avg_us"], f["max_us"], f["min_us"]) == (9, 334.5, 396.4, 254.2)
    assert f["requests_generated"] == 10
    assert f["iops"] == 2990.0
    assert len(f["request_times"]) == 10
    assert f["request_times"][0] == {"request": 1, "time_us": 78.3, "warmup": True}


@pytest.mark.parametrize(
    ("name", "seconds", "rate"),
    [
        # read of 1 GiB at the printed 340 MB/s (SI units, as dd prints them)
        ("dd__read-1g-after-drop-caches-rpi4-sata-m2-ssd.txt", 3.15488, 340_000_000),
        # oflag=dsync write at 81.4 MB/s
        ("dd__write-1g-bs1g-oflag-dsync-linux-laptop.txt", 13.1838, 81_400_000),
    ],
)
def test_dd_summary(name: str, seconds: float, rate: int) -> None:
    f = facts(name)
    assert (f["bytes"], f["seconds"], f["bytes_per_s"]) == (1073741824, seconds, rate)


# --- host facts --------------------------------------------------------------------------------


def test_netstat_s_retransmitted_segments() -> None:
    # "1402 segments retransmitted" in the Tcp section; TcpExt "Name: value" lines kept
    f = facts("netstat-s__tcp-st-modern-retrans-lostretransmit-timeouts-excerpt.txt")
    assert f["tcp_retransmitted_segments"] == 1402
    assert f["counters"]["TcpOutSegs"] == 14178140
    assert f["counters"]["TcpExtTCPLostRetransmit"] == 96
    assert f["tcp_timeouts"] == 304
    assert f["tcp_fast_retransmits"] == 306


def test_nstat_retrans_and_absent_counters() -> None:
    # TcpRetransSegs as printed; counters nstat hid (zero) are absent/null, never 0
    f = facts("nstat__kernel-counters-tcp-retrans-stalled-backup-host.txt")
    assert f["tcp_retransmitted_segments"] == 40
    assert f["counters"]["TcpExtTCPFastRetrans"] == 40
    assert "TcpExtTCPTimeouts" not in f["counters"]
    assert f["tcp_timeouts"] is None
    assert f["tcp_in_errors"] is None
    assert f["rates"]["TcpRetransSegs"] == 0.0


@pytest.mark.parametrize(
    ("name", "version", "build"),
    [
        # CUDA 10.0 toolkit
        ("nvcc-version__cuda10.0-v10.0.130.txt", "10.0", "10.0.130"),
        # CUDA 10.1 toolkit (no "Build cuda_..." line in this generation)
        ("nvcc-version__cuda10.1-no-build-line.txt", "10.1", "10.1.243"),
    ],
)
def test_nvcc_version(name: str, version: str, build: str) -> None:
    f = facts(name)
    assert (f["cuda_version"], f["cuda_build"], f["build"]) == (version, build, None)


@pytest.mark.parametrize(
    ("name", "version", "open_module"),
    [
        # proprietary module, build date after the version
        ("proc-driver-nvidia-version__driver440-ubuntu18.04-gcc7.txt", "440.95.01", False),
        # open kernel module, locally built (no date), trailing spaces
        (
            "proc-driver-nvidia-version__open-kernel-module-525-archlinux-dkms.txt",
            "525.60.11",
            True,
        ),
    ],
)
def test_proc_driver_nvidia_version(name: str, version: str, open_module: bool) -> None:
    f = facts(name)
    assert (f["driver_version"], f["open_kernel_module"]) == (version, open_module)
    assert f["architecture"] == "x86_64"
