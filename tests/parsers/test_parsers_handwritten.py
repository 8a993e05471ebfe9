"""Hand-written inputs modelled on each tool's real format, for what the public samples lack.

Three kinds have no public sample at all (rdma-statistic, uname-r, ofed-info); the others get
the layouts the hold-out corpus and real fleets are likely to contain: older driver tables,
verbose/filtered variants, launcher prefixes, alternative tools' wording.
"""

from __future__ import annotations

import pytest

from probes.parsers import ParseError, parse

# --- rdma statistic show (no public sample) ----------------------------------------------------

RDMA_ONE_LINE = (
    "link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 rx_atomic_requests 0 out_of_buffer 12 "
    "out_of_sequence 0 duplicate_request 0 rnr_nak_retry_err 0 packet_seq_err 0 "
    "implied_nak_seq_err 0 local_ack_timeout_err 3 resp_local_length_error 0 resp_cqe_error 0 "
    "req_cqe_error 0 req_remote_invalid_request 0 req_remote_access_errors 0 "
    "resp_remote_access_errors 0 resp_cqe_flush_error 0 req_cqe_flush_error 0 roce_adp_retrans 0 "
    "roce_adp_retrans_to 0 roce_slow_restart 0 roce_slow_restart_cnps 0 "
    "roce_slow_restart_trans 0 rp_cnp_ignored 0 rp_cnp_handled 5 np_ecn_marked_roce_packets 7 "
    "np_cnp_sent 7 rx_icrc_encapsulated 0\n"
    "link mlx5_1/1 rx_write_requests 0 rx_read_requests 0 out_of_buffer 0 np_cnp_sent 0\n"
)


def test_rdma_statistic_one_line_per_port() -> None:
    # default output: all counters of a port on one "link dev/port" line
    f = parse("rdma-statistic", RDMA_ONE_LINE)
    assert [p["link"] for p in f["ports"]] == ["mlx5_0/1", "mlx5_1/1"]
    assert f["ports"][0]["counters"]["out_of_buffer"] == 12
    assert f["ports"][0]["counters"]["local_ack_timeout_err"] == 3
    assert len(f["ports"][0]["counters"]) == 28
    assert f["ports"][1]["counters"] == {
        "rx_write_requests": 0,
        "rx_read_requests": 0,
        "out_of_buffer": 0,
        "np_cnp_sent": 0,
    }


def test_rdma_statistic_pretty_multiline() -> None:
    # "-p" prints one counter per indented line under the link line
    text = "link mlx5_2/1\n    rx_write_requests 4\n    out_of_buffer 9\n    np_cnp_sent 1\n"
    f = parse("rdma-statistic", text)
    assert f["ports"] == [
        {
            "link": "mlx5_2/1",
            "counters": {"rx_write_requests": 4, "out_of_buffer": 9, "np_cnp_sent": 1},
            "attributes": {},
        }
    ]


def test_rdma_statistic_qp_mode_attributes() -> None:
    # "statistic qp show": cntn/pid/qp-type/comm/LQPN are attributes, not counters
    text = (
        "link mlx5_2/1 cntn 4 qp-type RC pid 30489 comm ib_send_bw rx_write_requests 0 "
        "rx_read_requests 0 rx_atomic_requests 0 out_of_buffer 0 LQPN: <178>\n"
    )
    (port,) = parse("rdma-statistic", text)["ports"]
    assert port["counters"] == {
        "rx_write_requests": 0,
        "rx_read_requests": 0,
        "rx_atomic_requests": 0,
        "out_of_buffer": 0,
    }
    assert port["attributes"] == {
        "cntn": "4",
        "qp-type": "RC",
        "pid": "30489",
        "comm": "ib_send_bw",
        "LQPN": "178",
    }


def test_rdma_statistic_json() -> None:
    # "rdma -j statistic show": ifname + port become the link name
    text = '[{"ifname":"mlx5_0","port":1,"rx_write_requests":0,"out_of_buffer":3}]'
    (port,) = parse("rdma-statistic", text)["ports"]
    assert (port["link"], port["counters"]) == (
        "mlx5_0/1",
        {"rx_write_requests": 0, "out_of_buffer": 3},
    )


# --- uname -r (no public sample) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "major", "minor", "patch"),
    [
        ("5.15.0-91-generic\n", 5, 15, 0),  # Ubuntu
        ("4.18.0-513.el8.x86_64", 4, 18, 0),  # RHEL 8, no trailing newline
        ("5.14.0-362.8.1.el9_3.x86_64\n", 5, 14, 0),  # RHEL 9
        ("6.8.0-1015-aws\n", 6, 8, 0),  # cloud kernel
        ("6.6.30+rpt-rpi-v8\n", 6, 6, 30),  # "+" separated local version
        ("\n3.10.0-1160.el7.x86_64\n\n", 3, 10, 0),  # blank lines around it
    ],
)
def test_uname_r_releases(text: str, major: int, minor: int, patch: int) -> None:
    f = parse("uname-r", text)
    assert f["kernel"] == text.strip()
    assert (f["major"], f["minor"], f["patch"]) == (major, minor, patch)


@pytest.mark.parametrize(
    "text",
    [
        # uname -a is another command's output
        "Linux gpu001 5.15.0-91-generic #101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023 x86_64\n",
        # two releases: cannot say which one runs
        "5.15.0-91-generic\n5.15.0-92-generic\n",
    ],
)
def test_uname_r_rejects_other_shapes(text: str) -> None:
    with pytest.raises(ParseError, match="not uname -r output"):
        parse("uname-r", text)


# --- ofed_info (no public sample) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "version", "distribution", "base"),
    [
        # ofed_info -s
        ("MLNX_OFED_LINUX-5.8-1.0.1.1:\n", "5.8-1.0.1.1", "MLNX_OFED_LINUX", None),
        # first lines of plain ofed_info, with the upstream base and a package list
        (
            "MLNX_OFED_LINUX-23.10-1.1.9.0 (OFED-23.10-1.1.9):\n\nclusterkit:\n"
            "mlnx_ofed_clusterkit/clusterkit-1.11.442-1.2310055.src.rpm\n",
            "23.10-1.1.9.0",
            "MLNX_OFED_LINUX",
            "OFED-23.10-1.1.9",
        ),
        # DOCA-OFED hosts
        ("OFED-internal-24.04-0.6.6:\n", "24.04-0.6.6", "OFED-internal", None),
    ],
)
def test_ofed_info(text: str, version: str, distribution: str, base: str | None) -> None:
    f = parse("ofed-info", text)
    assert (f["ofed_version"], f["distribution"], f["base"]) == (version, distribution, base)


def test_ofed_info_rejects_kernel_release() -> None:
    # a bare version line is not ofed_info output
    with pytest.raises(ParseError, match="not ofed_info output"):
        parse("ofed-info", "5.15.0-91-generic\n")


# --- nvidia-smi default table: older layouts ---------------------------------------------------

SMI_470 = """\
Thu Jan  6 10:00:00 2022
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  Tesla V100-SXM2...  On   | 00000000:00:1E.0 Off |                    0 |
| N/A   34C    P0    36W / 300W |   1234MiB / 16160MiB |     87%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|    0   N/A  N/A     12345      C   python                           1231MiB |
+-----------------------------------------------------------------------------+
"""

SMI_418 = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 418.87.00    Driver Version: 418.87.00    CUDA Version: 10.1     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla T4            Off  | 00000000:00:04.0 Off |                    0 |
| N/A   45C    P8    10W /  70W |      0MiB / 15079MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
|   1  Tesla T4            Off  | 00000000:00:05.0 Off |                    0 |
| N/A   44C    P8     9W /  70W |    500MiB / 15079MiB |     12%      Default |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|    1      4321      C   /usr/bin/python3                             500MiB |
+-----------------------------------------------------------------------------+
"""


def test_nvidia_smi_470_layout_with_process() -> None:
    # R470 layout (narrow columns, MIG line) with a running process
    f = parse("nvidia-smi", SMI_470)
    assert (f["driver_version"], f["cuda_version"]) == ("470.82.01", "11.4")
    (gpu,) = f["gpus"]
    assert (gpu["name"], gpu["memory_used_mib"], gpu["memory_total_mib"]) == (
        "Tesla V100-SXM2...",
        1234,
        16160,
    )
    assert (gpu["utilization_pct"], gpu["temperature_c"], gpu["fan_pct"]) == (87, 34, None)
    assert f["processes"] == [
        {"gpu": 0, "pid": 12345, "type": "C", "name": "python", "memory_mib": 1231}
    ]


def test_nvidia_smi_418_layout_two_row_gpus() -> None:
    # R418 layout: two rows per GPU (no MIG line), process table without GI/CI columns
    f = parse("nvidia-smi", SMI_418)
    assert [g["index"] for g in f["gpus"]] == [0, 1]
    assert [g["memory_used_mib"] for g in f["gpus"]] == [0, 500]
    assert [g["utilization_pct"] for g in f["gpus"]] == [0, 12]
    assert f["processes"][0]["pid"] == 4321
    assert f["processes"][0]["name"] == "/usr/bin/python3"


def test_nvidia_smi_without_cuda_version() -> None:
    # pre-R410 header has no "CUDA Version": null, not a guess
    text = SMI_418.replace("CUDA Version: 10.1", "               ")
    assert parse("nvidia-smi", text)["cuda_version"] is None


def test_nvidia_smi_no_devices() -> None:
    # nvidia-smi's own failure messages are its output: no GPUs, the message kept
    f = parse("nvidia-smi", "No devices were found\n")
    assert (f["gpus"], f["driver_version"], f["error"]) == ([], None, "No devices were found")


# --- nvidia-smi -q, filtered ------------------------------------------------------------------

SMI_Q_ECC_ONLY = """\

==============NVSMI LOG==============

Timestamp                                 : Mon Jan 20 10:18:26 2025
Driver Version                            : 550.90.07
CUDA Version                              : 12.4

Attached GPUs                             : 2
GPU 00000000:19:00.0
    ECC Mode
        Current                           : Enabled
        Pending                           : Enabled
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 0
            DRAM Correctable              : 3
            DRAM Uncorrectable            : 2
    Remapped Rows                         : N/A

GPU 00000000:3B:00.0
    ECC Mode
        Current                           : Enabled
        Pending                           : Enabled
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 0
        Pending                           : No
        Remapping Failure Occurred        : No
"""


def test_nvidia_smi_q_filtered_sections() -> None:
    # -d ECC,ROW_REMAPPER: no Product Name (null); "Remapped Rows: N/A" is null, not False
    f = parse("nvidia-smi-q", SMI_Q_ECC_ONLY)
    assert f["attached_gpus"] == 2
    first, second = f["gpus"]
    assert (first["name"], first["bus_id"]) == (None, "00000000:19:00.0")
    assert first["remapped_rows_pending"] is None
    assert first["ecc"]["volatile"]["DRAM Uncorrectable"] == 2
    assert second["remapped_rows_pending"] is False


# --- nvidia-smi --query-gpu with units ---------------------------------------------------------


def test_nvidia_smi_query_units_and_placeholders() -> None:
    # "[MiB]" dropped from keys, "1 MiB" -> 1, "[N/A]"/"[Not Supported]" -> null, bus id a string
    text = (
        "index, name, memory.used [MiB], utilization.gpu [%], power.draw [W], pci.bus_id, "
        "ecc.errors.uncorrected.volatile.total\n"
        "0, NVIDIA H100 80GB HBM3, 1 MiB, 0 %, 72.45 W, 00000000:19:00.0, 0\n"
        "1, NVIDIA H100 80GB HBM3, 1 MiB, [N/A], [Not Supported], 00000000:3B:00.0, [N/A]\n"
    )
    f = parse("nvidia-smi-query", text)
    assert f["rows"][0] == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "memory.used": 1,
        "utilization.gpu": 0,
        "power.draw": 72.45,
        "pci.bus_id": "00000000:19:00.0",
        "ecc.errors.uncorrected.volatile.total": 0,
    }
    assert f["rows"][1]["utilization.gpu"] is None
    assert f["rows"][1]["power.draw"] is None
    assert f["units"]["memory.used"] == "MiB"


# --- nvidia-smi topo -m, older layout ----------------------------------------------------------


def test_topo_old_layout_nic_named_columns_and_tabs() -> None:
    # older drivers: TAB separated, NICs labelled by device name, only "CPU Affinity"
    text = (
        "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
        "GPU0\t X \tNV2\tPIX\t0-19\n"
        "GPU1\tNV2\t X \tPIX\t0-19\n"
        "mlx5_0\tPIX\tPIX\t X \t\n"
        "\nLegend:\n\n  X    = Self\n"
    )
    f = parse("nvidia-smi-topo", text)
    assert f["gpus"] == ["GPU0", "GPU1"]
    assert f["nics"] == {"mlx5_0": "mlx5_0"}
    assert f["links"]["GPU1"] == {"GPU0": "NV2", "mlx5_0": "PIX"}
    assert f["cpu_affinity"] == {"GPU0": "0-19", "GPU1": "0-19"}
    assert f["numa_affinity"] == {}


def test_topo_without_nic_legend() -> None:
    # excerpt cut before "NIC Legend": the NIC is known but its device name is not (null)
    text = "\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tSYS\t0-7\t0\nNIC0\tSYS\t X \n"
    assert parse("nvidia-smi-topo", text)["nics"] == {"NIC0": None}


# --- nvidia-smi nvlink: inactive links ---------------------------------------------------------


def test_nvlink_inactive_link() -> None:
    # "<inactive>" -> active False, speed null; fractional speeds of newer drivers kept
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
        "\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
    )
    (gpu,) = parse("nvidia-smi-nvlink", text)["gpus"]
    assert gpu["links"] == [
        {"link": 0, "speed_gb_s": 26.562, "active": True},
        {"link": 1, "speed_gb_s": None, "active": False},
    ]


def test_nvlink_rejects_gpu_list() -> None:
    # "nvidia-smi -L" has the GPU lines but no links
    with pytest.raises(ParseError, match="no 'Link <n>:' lines"):
        parse("nvidia-smi-nvlink", "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5269b708)\n")


# --- ibstat / ibv_devinfo / ibdev2netdev variants ----------------------------------------------


def test_ibstat_single_port_query() -> None:
    # "ibstat mlx5_0 1" prints "CA: 'name'" and an unindented port block
    text = (
        "CA: 'mlx5_0'\nPort 1:\nState: Polling\nPhysical state: Polling\nRate: 2.5\n"
        "Base lid: 65535\nLMC: 0\nSM lid: 0\nCapability mask: 0x2651e848\n"
        "Port GUID: 0x0c42a10300a1b2c3\nLink layer: InfiniBand\n"
    )
    (ca,) = parse("ibstat", text)["cas"]
    assert ca["name"] == "mlx5_0"
    assert ca["ports"][0]["state"] == "Polling"
    assert ca["ports"][0]["rate_gbit_s"] == 2.5


def test_ibv_devinfo_two_devices_ethernet() -> None:
    # two HCAs, RoCE port with PORT_DOWN
    text = (
        "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t22.38.1002\n"
        "\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_DOWN (1)\n"
        "\t\t\tlink_layer:\t\tEthernet\n\n"
        "hca_id:\tmlx5_1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
        "\t\t\tlink_layer:\t\tInfiniBand\n"
    )
    f = parse("ibv_devinfo", text)
    assert [(d["name"], d["ports"][0]["state"]) for d in f["devices"]] == [
        ("mlx5_0", "PORT_DOWN"),
        ("mlx5_1", "PORT_ACTIVE"),
    ]
    assert f["devices"][0]["ports"][0]["link_layer"] == "Ethernet"
    assert f["devices"][0]["fw_ver"] == "22.38.1002"


def test_ibdev2netdev_verbose() -> None:
    # -v: PCI address, card description and IB port state before the netdev
    text = (
        "0000:3b:00.0 mlx5_0 (MT4119 - MCX556A-ECAT) CX556A - ConnectX-5 QSFP28 fw 16.27.2008 "
        "port 1 (ACTIVE) ==> ens1f0 (Up)\n"
        "0000:86:00.0 mlx5_2 (MT4123 - MCX653105A-HDAT) ConnectX-6 VPI adapter card, HDR IB "
        "(200Gb/s) and 200GbE, single-port QSFP56 fw 20.31.1014 port 1 (DOWN  ) ==> ib0 (Down)\n"
    )
    first, second = parse("ibdev2netdev", text)["mappings"]
    assert (first["pci"], first["device"], first["port"], first["netdev"], first["up"]) == (
        "0000:3b:00.0",
        "mlx5_0",
        1,
        "ens1f0",
        True,
    )
    assert (second["device"], second["port_state"], second["up"]) == ("mlx5_2", "DOWN", False)


# --- counters variants -------------------------------------------------------------------------


def test_ethtool_with_banner() -> None:
    # full "ethtool -S" listing starts with "NIC statistics:"
    text = (
        "NIC statistics:\n     rx_packets: 12345\n     rx_discards_phy: 3\n"
        "     rx_prio3_pause: 10\n"
    )
    f = parse("ethtool-S", text)
    assert f["counters"] == {"rx_packets": 12345, "rx_discards_phy": 3, "rx_prio3_pause": 10}


def test_ib_sysfs_grep_paths() -> None:
    # "grep -H . counters/* hw_counters/*": device and port read from the path
    text = (
        "/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed:0\n"
        "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:12\n"
        "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_buffer:42\n"
    )
    f = parse("ib-sysfs-counters", text)
    assert (f["device"], f["port"]) == ("mlx5_0", 1)
    assert f["counters"] == {"link_downed": 0, "symbol_error": 12, "out_of_buffer": 42}


def test_ib_sysfs_head_listing() -> None:
    # "head counters/*" separates files with "==> name <=="
    text = "==> port_rcv_data <==\n123\n\n==> link_downed <==\n1\n"
    assert parse("ib-sysfs-counters", text)["counters"] == {"port_rcv_data": 123, "link_downed": 1}


def test_perfquery_basic_counters() -> None:
    # non-extended perfquery: header without "extended", 32-bit data counters
    text = (
        "# Port counters: Lid 1 port 1 (CapMask: 0x1600)\nPortSelect:......................1\n"
        "CounterSelect:...................0x0000\nSymbolErrorCounter:..............7\n"
        "LinkDownedCounter:...............2\nPortXmitData:....................4294967295\n"
        "PortXmitWait:....................789\n"
    )
    f = parse("perfquery", text)
    assert (f["lid"], f["port"], f["extended"]) == (1, 1, False)
    assert f["counters"] == {
        "SymbolErrorCounter": 7,
        "LinkDownedCounter": 2,
        "PortXmitData": 4294967295,
        "PortXmitWait": 789,
    }


# --- nccl-tests variants -----------------------------------------------------------------------

NCCL_TESTS_MPIRUN = """\
[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 \
iters: 20 agg iters: 1 validation: 0 graph: 0
[1,0]<stdout>:#
[1,0]<stdout>:#  Rank  0 Group  0 Pid   1234 on      node1 device  0 [0x07] NVIDIA H100 80GB HBM3
[1,0]<stdout>:#  Rank  1 Group  0 Pid   1235 on      node2 device  0 [0x07] NVIDIA H100 80GB HBM3
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw \
#wrong     time   algbw   busbw #wrong
[1,0]<stdout>:           8             2     float     sum      -1    10.12    0.00    0.00    \
N/A    10.05    0.00    0.00    N/A
node1:1234:1234 [0] NCCL INFO comm 0x55 rank 0 nranks 2 cudaDev 0 busId 7000 - Init COMPLETE
[1,0]<stdout>:         128            32     float     sum      -1    10.50    0.01    0.01    \
N/A    10.40    0.01    0.01    N/A
"""


def test_nccl_tests_mpirun_prefix_validation_off_truncated() -> None:
    # Open MPI prefixes, an interleaved NCCL INFO line, "#wrong" N/A; no footer -> nulls
    f = parse("nccl-tests", NCCL_TESTS_MPIRUN)
    assert [r["size_bytes"] for r in f["rows"]] == [8, 128]
    assert f["rows"][0]["wrong_oop"] is None
    assert (f["avg_busbw_gb_s"], f["wrong"], f["ranks"]) == (None, None, 2)
    assert f["hosts"] == ["node1", "node2"]


def test_nccl_tests_wrong_total_from_rows() -> None:
    # with no "Out of bounds" footer, wrong is the sum of the #wrong cells
    text = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "        1024           256     float     sum      -1    20.00    0.05    0.10      5"
        "    20.00    0.05    0.10      3\n"
    )
    assert parse("nccl-tests", text)["wrong"] == 8


# --- NCCL debug variants -----------------------------------------------------------------------

NCCL_INFO_IB = """\
node1:1234:1234 [0] NCCL INFO NCCL version 2.18.5+cuda12.2
node1:1234:1300 [0] NCCL INFO NET/Plugin: Using internal network plugin.
node1:1234:1300 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB [2]mlx5_4:1/IB ; \
OOB ens9f0np0:10.0.0.1<0>
node1:1234:1300 [0] NCCL INFO Using network IB
node1:1234:1300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
node1:1234:1300 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/1/GDRDMA
node1:1234:1300 [0] NCCL INFO Channel 01/0 : 7[7] -> 8[0] [send] via NET/IB/2/GDRDMA
node1:1234:1300 [0] NCCL INFO comm 0x5581 rank 0 nranks 16 cudaDev 0 busId 18000 - Init COMPLETE
node1:1234:1301 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<51234> with error 12
[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: \
WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1806789 milliseconds before timing out.
"""


def test_nccl_debug_ib_devices_transports_warnings() -> None:
    # HCAs from "NET/IB : Using", transports without device indices, a WARN, nranks
    f = parse("nccl-debug", NCCL_INFO_IB)
    assert f["nccl_version"] == "2.18.5"
    assert f["networks"] == ["IB"]  # "NET/Plugin: Using internal ..." is no network
    assert [d["name"] for d in f["ib_devices"]] == ["mlx5_0", "mlx5_3", "mlx5_4"]
    assert f["transports"] == ["P2P/IPC/read", "NET/IB/GDRDMA"]
    assert f["nranks"] == 16
    assert len(f["warnings"]) == 1


def test_nccl_debug_timeout_without_seqnum() -> None:
    # torch 1.x timeout lines have no SeqNum: seq is null, op/timeout still read
    (t,) = parse("nccl-debug", NCCL_INFO_IB)["watchdog_timeouts"]
    assert (t["op"], t["seq"], t["timeout_ms"], t["rank"]) == ("BROADCAST", None, 1800000, 3)


def test_nccl_debug_aws_ofi_network() -> None:
    # multi-word network names from plugins are kept whole
    text = (
        "ip-10-0-0-1:99:99 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n"
        "ip-10-0-0-1:99:99 [0] NCCL INFO Using network AWS Libfabric\n"
    )
    assert parse("nccl-debug", text)["networks"] == ["AWS Libfabric"]


# --- kernel log variants ----------------------------------------------------------------------


def test_dmesg_t_xid79_fallen_off_bus() -> None:
    # dmesg -T timestamps; Xid 79 with pid/name; modern fallen-off wording
    text = (
        "[Mon Jan 20 10:18:26 2025] NVRM: GPU at PCI:0000:3b:00: GPU-5269b708-678a-b1a8\n"
        "[Mon Jan 20 10:18:26 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
        "GPU has fallen off the bus.\n"
        "[Mon Jan 20 10:18:26 2025] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
    )
    f = parse("dmesg-xid", text)
    (xid,) = f["xids"]
    assert (xid["pci"], xid["code"], xid["text"]) == (
        "0000:3b:00",
        79,
        "GPU has fallen off the bus.",
    )
    assert (xid["pid"], xid["process"], xid["timestamp"]) == (
        "1234",
        "python",
        "Mon Jan 20 10:18:26 2025",
    )
    assert f["fallen_off_bus"] is True


def test_dmesg_healthy_kernel_log_and_sxid() -> None:
    # a kernel log with no Xid is valid (no events); NVSwitch SXids are listed apart
    text = (
        "[    0.000000] Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045)\n"
        "[ 1234.567890] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 "
        "egress non-posted PRIV error (First)\n"
    )
    f = parse("dmesg-xid", text)
    assert (f["xids"], f["fallen_off_bus"]) == ([], False)
    assert f["sxids"][0]["code"] == 12028


# --- CUDA OOM variants -------------------------------------------------------------------------


def test_cuda_oom_two_gib() -> None:
    # "2.00 GiB" is 2147483648 bytes; GPU index other than 0
    text = (
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.15 GiB total "
        "capacity; 75.00 GiB already allocated; 1.50 GiB free; 76.00 GiB reserved in total by "
        "PyTorch)\n"
    )
    f = parse("cuda-oom", text)
    assert f["tried_to_allocate_bytes"] == 2147483648
    assert (f["gpu"], f["free_bytes"]) == (1, 1610612736)


def test_cuda_oom_other_processes_and_wrapped_lines() -> None:
    # newer wording lists other processes; a terminal-wrapped message still reads whole
    text = (
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3\n"
        "has a total capacity of 79.10 GiB of which 6.81 MiB is free. Process 1234 has 40.00 GiB "
        "memory in use. Process 5678 has 39.07 GiB memory in use.\n"
    )
    f = parse("cuda-oom", text)
    assert (f["gpu"], f["tried_to_allocate_bytes"]) == (3, 20 * 2**20)
    assert [p["pid"] for p in f["other_processes"]] == [1234, 5678]


def test_cuda_oom_bare_runtime_error() -> None:
    # "CUDA error: out of memory" carries no sizes: every size is null
    f = parse("cuda-oom", "RuntimeError: CUDA error: out of memory\n")
    assert f["tried_to_allocate_bytes"] is None
    assert (f["gpu"], f["total_capacity_bytes"]) == (None, None)


# --- storage variants --------------------------------------------------------------------------


def test_fio_json_after_warning_and_old_clat_usec() -> None:
    # a warning before the JSON; fio 2.x "clat" already in usec
    text = (
        "note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be "
        "capped at 1\n"
        '{"fio version": "fio-2.2.10", "jobs": [{"jobname": "w", '
        '"read": {"iops": 0, "clat": {"percentile": {}}}, '
        '"write": {"iops": 2500.5, "clat": {"percentile": {"99.000000": 1500}}}}]}\n'
    )
    (job,) = parse("fio-json", text)["jobs"]
    assert (job["write_iops"], job["write_clat_p99_us"], job["read_clat_p99_us"]) == (
        2500.5,
        1500.0,
        None,
    )


def test_fio_json_truncated_is_parse_error() -> None:
    # a cut-off JSON document says so
    with pytest.raises(ParseError, match="not fio JSON output: invalid or truncated JSON"):
        parse("fio-json", '{"fio version": "fio-3.28", "jobs": [{"jobname": "x", "read": {')


def test_fio_json_with_an_unconvertible_integer_says_so() -> None:
    # json raises a plain ValueError (not a JSONDecodeError) for an integer over Python's
    # digit limit: the message names it instead of failing on the missing .msg/.pos
    with pytest.raises(ParseError, match=r"not fio JSON output: invalid JSON \(Exceeds"):
        parse("fio-json", '{"fio version": "fio-3.28", "jobs": [], "x": ' + "9" * 5000 + "}")


def test_ioping_old_shared_unit_summary() -> None:
    # old ioping: "min/avg/max/mdev = 0.2/0.3/0.5/0.1 ms" with one unit for all four
    text = (
        "--- /tmp (ext4 /dev/sda1) ioping statistics ---\n"
        "10 requests completed in 9.0 s, 3.6 k iops, 14.1 MiB/s\n"
        "min/avg/max/mdev = 0.2/0.3/0.5/0.1 ms\n"
    )
    f = parse("ioping", text)
    assert (f["requests"], f["avg_us"], f["max_us"], f["iops"]) == (10, 300.0, 500.0, 3600.0)


def test_ioping_rejects_ping() -> None:
    # ping's "rtt min/avg/max/mdev" summary is not ioping's
    text = "--- 10.0.0.1 ping statistics ---\nrtt min/avg/max/mdev = 0.045/0.058/0.072/0.011 ms\n"
    with pytest.raises(ParseError, match="not ioping output"):
        parse("ioping", text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # BusyBox dd
        (
            "1024+0 records in\n1024+0 records out\n"
            "1073741824 bytes (1.0GB) copied, 3.154880 seconds, 324.6MB/s\n",
            (1073741824, 3.15488, 324_600_000),
        ),
        # BSD / macOS dd prints the exact rate in bytes/sec
        (
            "1024+0 records in\n1024+0 records out\n"
            "1073741824 bytes transferred in 3.154880 secs (340342516 bytes/sec)\n",
            (1073741824, 3.15488, 340342516),
        ),
        # status=progress: CR-separated progress lines, the final summary wins
        (
            "536870912 bytes (537 MB, 512 MiB) copied, 1 s, 537 MB/s\r"
            "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.9 s, 565 MB/s\n"
            "1024+0 records in\n1024+0 records out\n"
            "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.90212 s, 564 MB/s\n",
            (1073741824, 1.90212, 564_000_000),
        ),
        # a locale with decimal commas
        (
            "1073741824 bytes (1,1 GB, 1,0 GiB) copied, 2,5 s, 429 MB/s\n",
            (1073741824, 2.5, 429_000_000),
        ),
    ],
)
def test_dd_other_implementations(text: str, expected: tuple[int, float, int]) -> None:
    f = parse("dd", text)
    assert (f["bytes"], f["seconds"], f["bytes_per_s"]) == expected


# --- host facts variants -----------------------------------------------------------------------


def test_netstat_s_old_net_tools_spelling() -> None:
    # net-tools 1.60 printed "segments retransmited" and "segments send out"
    text = (
        "Tcp:\n    1234 active connections openings\n    500 segments send out\n"
        "    99 segments retransmited\n"
    )
    f = parse("netstat-s", text)
    assert (f["tcp_retransmitted_segments"], f["tcp_out_segments"]) == (99, 500)


def test_netstat_s_without_retrans_line() -> None:
    # an excerpt without the Tcp retransmit sentence: null, not 0
    text = "Ip:\n    Forwarding: 1\n    18674 total packets received\n"
    assert parse("netstat-s", text)["tcp_retransmitted_segments"] is None


def test_nstat_json() -> None:
    # "nstat -j"
    f = parse("nstat", '{"kernel":{"TcpRetransSegs":5,"TcpInSegs":100}}')
    assert (f["tcp_retransmitted_segments"], f["counters"]["TcpInSegs"]) == (5, 100)


def test_nstat_without_retrans_counter() -> None:
    # nstat hides zero counters: an absent TcpRetransSegs is null, not 0
    f = parse("nstat", "#kernel\nTcpInSegs                       18607              0.0\n")
    assert f["tcp_retransmitted_segments"] is None
    assert "TcpRetransSegs" not in f["counters"]


def test_proc_driver_open_module_aarch64() -> None:
    # Grace/arm64 hosts: open kernel module for aarch64
    text = (
        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  550.54.15  Release Build  "
        "(dvs-builder@U16-I1-N07-12-3)  Tue Mar  5 22:15:33 UTC 2024\n"
        "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n"
    )
    f = parse("proc-driver-nvidia-version", text)
    assert (f["driver_version"], f["open_kernel_module"], f["architecture"]) == (
        "550.54.15",
        True,
        "aarch64",
    )
    assert f["gcc_version"] == "11.4.0"


def test_nvcc_12_with_build_line() -> None:
    # CUDA 12 prints a "Build cuda_..." line after the release
    text = (
        "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2023 NVIDIA Corporation\n"
        "Built on Tue_Aug_15_22:02:13_PDT_2023\nCuda compilation tools, release 12.2, V12.2.140\n"
        "Build cuda_12.2.r12.2/compiler.33191640_0\n"
    )
    f = parse("nvcc-version", text)
    assert (f["cuda_version"], f["cuda_build"], f["build"]) == (
        "12.2",
        "12.2.140",
        "cuda_12.2.r12.2/compiler.33191640_0",
    )


def test_ib_sysfs_several_ports_are_not_mixed() -> None:
    # a glob over two ports: "counters" is the first port's, "by_port" has both
    text = (
        "/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed:1\n"
        "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0\n"
        "/sys/class/infiniband/mlx5_1/ports/1/counters/link_downed:7\n"
    )
    f = parse("ib-sysfs-counters", text)
    assert (f["device"], f["port"]) == ("mlx5_0", 1)
    assert f["counters"] == {"link_downed": 1, "symbol_error": 0}
    assert f["by_port"]["mlx5_1/1"] == {"link_downed": 7}
