"""Hand-written outputs of the acceptance tools, for the layouts the public samples do not show.

Each text is built from the tool's own print statements in the release named next to it (DCGM
dcgmi/Diag.cpp and nvvs/include/NvvsJsonStrings.h; wilicc/gpu-burn gpu_burn-drv.cpp;
NVIDIA/nvbandwidth output.cpp and inline_common.h; linux-rdma/perftest perftest_parameters.[ch];
rdma-core infiniband-diags/ibstat.c and libibmad/mad.h), so a parser is checked against the
format, not against one machine's numbers. Shared by the value tests and the robustness tests.
"""

from __future__ import annotations

import json

# --- dcgmi diag table: the stencils of dcgmi/Diag.cpp (all releases) --------------------------

HEADER = (
    "+---------------------------+------------------------------------------------+\n"
    "| Diagnostic                | Result                                         |\n"
    "+===========================+================================================+\n"
)
METADATA = "|-----  Metadata  ----------+------------------------------------------------|\n"
DEPLOYMENT = "|-----  Deployment  --------+------------------------------------------------|\n"
HARDWARE = "+-----  Hardware  ----------+------------------------------------------------+\n"
INTEGRATION = "+-----  Integration  -------+------------------------------------------------+\n"
STRESS = "+-----  Stress  ------------+------------------------------------------------+\n"
FOOTER = "+---------------------------+------------------------------------------------+\n"


def row(name: str, info: str) -> str:
    """One DIAG_DATA row: "| <name, 25 wide> | <info, 46 wide> |"; longer info cut with "..."."""
    if len(info) > 46:
        info = info[:43] + "..."
    return f"| {name:<25} | {info:<46} |\n"


def wrapped(name: str, message: str) -> str:
    """DisplayVerboseInfo: the message in 45-character pieces, the name on the first only."""
    pieces = [message[i : i + 45] for i in range(0, len(message), 45)]
    return "".join(row(name if i == 0 else "", piece) for i, piece in enumerate(pieces))


# DCGM 3.3 (dcgmi/Diag.cpp v3.3.9): device ids joined with "," (no space); split rows per status
# in the order Pass, Fail, Warn, Skip with three trailing spaces; per-GPU Warning rows (no GPU in
# the name) after the split rows; "Warn - All" on the Diagnostic test prints a "Code: (...)" row.
THERMAL = (
    "GPU 2 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for "
    "GPU 2 Verify that the cooling on this machine is functional, including external, thermal "
    "material interface, fans, and any other components."
)
DCGM33_TABLE = (
    "Successfully ran diagnostic for group.\n"
    + HEADER
    + METADATA
    + row("DCGM Version", "3.3.9")
    + row("Driver Version Detected", "550.90.07")
    + row("GPU Device IDs Detected", "2330,2330,2330,2330")
    + DEPLOYMENT
    + row("Denylist", "Pass")
    + row("NVML Library", "Pass")
    + row("CUDA Main Library", "Pass")
    + row("Permissions and OS Blocks", "Pass")
    + row("Persistence Mode", "Fail")
    + wrapped("Error", "Persistence mode for GPU 1 is disabled. Enable persistence mode by "
              "running \"nvidia-smi -i <gpuId> -pm 1 \" as root.")
    + row("Environment Variables", "Pass")
    + row("Page Retirement/Row Remap", "Pass")
    + row("Graphics Processes", "Pass")
    + row("Inforom", "Skip")
    + INTEGRATION
    + row("PCIe", "Pass - All")
    + HARDWARE
    + row("GPU Memory", "Pass - GPUs: 0, 1, 3   ")
    + row("", "Fail - GPU: 2   ")
    + wrapped("Warning", THERMAL)
    + row("Diagnostic", "Warn - All")
    + wrapped("Warning", "Detected clocks event due to thermal violation in GPU 0.")
    + row("", "  Code: (000000000007)")
    + STRESS
    + row("Targeted Stress", "Pass - GPUs: 0, 1   ")
    + row("", "Warn - GPU: 3   ")
    + row("", "Skip - GPU: 2   ")
    + wrapped("Warning", "There were thermal violations totaling 2.0 seconds for GPU 3")
    + row("Targeted Power", "Skip - All")
    + FOOTER
)

# DCGM 4.x (dcgmi/Diag.cpp v4.0.0 and later): the test's own result ("Warn" kept for the test,
# entity rows show Warn as Fail), "GPUn: <result>" entity rows, "Warning: GPUn" / "Info: GPUn"
# rows (Info with -v), global warnings named "Warning", and "Not Run" for an uncovered entity.
ECC = "Detected 2 volatile double-bit ECC error(s) in GPU 1."
DCGM4_TABLE = (
    "Successfully ran diagnostic for group.\n"
    + HEADER
    + METADATA
    + row("DCGM Version", "4.2.3")
    + row("Driver Version Detected", "570.124.06")
    + row("GPU Device IDs Detected", "2330, 2330")
    + DEPLOYMENT
    + row("software", "Warn")
    + wrapped("Warning", "Persistence Mode: Persistence mode for GPU 0 is disabled.")
    + row("", "GPU0: Fail")
    + wrapped("Info: GPU0", "Error getting the SRAM Threshold Count for GPU 0. SRAM Threshold "
              "checking was skipped.")
    + row("", "GPU1: Pass")
    + HARDWARE
    + row("memory", "Fail")
    + row("", "GPU0: Pass")
    + row("", "GPU1: Fail")
    + wrapped("Warning: GPU1", ECC)
    + INTEGRATION
    + row("pcie", "Pass")
    + row("", "GPU0: Pass")
    + row("", "GPU1: Not Run")
    + STRESS
    + row("targeted_stress", "Skip")
    + row("", "GPU0: Skip")
    + row("", "GPU1: Skip")
    + FOOTER
)

# A message whose first 45-character piece ends in a space: the space is the message's, not
# padding ("... so DCGM " | "stopped the memory test.").
SPACE_AT_CUT = "Row remappings are pending on GPU 5, so DCGM stopped the memory test."
SPACE_AT_CUT_TABLE = (
    HEADER
    + HARDWARE
    + row("GPU Memory", "Fail - GPU: 5   ")
    + wrapped("Warning", SPACE_AT_CUT)
    + FOOTER
)

# 16 GPUs: "Pass - GPUs: 0, 1, ..., 15" is longer than the cell, dcgmi cuts it with "...".
SIXTEEN_GPUS_TABLE = (
    HEADER
    + INTEGRATION
    + row("PCIe", "Pass - GPUs: " + ", ".join(str(i) for i in range(15)) + "   ")
    + row("", "Fail - GPU: 15   ")
    + FOOTER
)

# dcgmi prints only this when the host engine is gone (dcgmi/Diag.cpp, RunDiagOnce).
DCGMI_ERROR_ONLY = (
    "Error: Unable to complete diagnostic for group 2. Return: (-21) Host engine is not valid "
    "any longer.\n"
)

# --- dcgmi diag -j ----------------------------------------------------------------------------

# DCGM 2.4 (NVVS_NAME "DCGM GPU Diagnostic"; results carry "gpu_ids" as a string, "warnings"
# as one string; no versions in the document).
DCGM24_JSON = json.dumps(
    {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {"category": "Deployment", "tests": [
                    {"name": "Blacklist", "results": [{"status": "Pass"}]},
                    {"name": "Persistence Mode", "results": [
                        {"status": "Fail",
                         "warnings": "Persistence mode for GPU 0 is disabled."}]},
                ]},
                {"category": "Hardware", "tests": [
                    {"name": "GPU Memory", "results": [
                        {"gpu_ids": "0", "status": "Pass"},
                        {"gpu_ids": "1", "status": "Fail",
                         "warnings": "Detected 1 volatile double-bit ECC error(s) in GPU 1."},
                    ]},
                ]},
            ]
        }
    },
    indent=3,
)

# DCGM 3.3 (top-level "version", "Driver Version Detected", "GPU Device IDs"; "gpu_id" per
# result; warnings as objects; the software tests spell the inner key "warnings").
DCGM33_JSON = json.dumps(
    {
        "version": "3.3.9",
        "Driver Version Detected": "550.90.07",
        "GPU Device IDs": ["20b0", "20b0"],
        "GPU Device Serials": {"0": "1652221016411", "1": "1652221016412"},
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {"category": "Deployment", "tests": [
                    {"name": "Denylist", "results": [{"status": "Pass"}]},
                    {"name": "Page Retirement/Row Remap", "results": [
                        {"gpu_id": 1, "status": "Fail", "warnings": [
                            {"warnings": "GPU 1 had memory errors and row remappings are "
                                         "pending", "error_id": 83, "error_category": 3,
                             "error_severity": 1}]}]},
                ]},
                {"category": "Integration", "tests": [
                    {"name": "PCIe", "results": [
                        {"gpu_id": "0", "status": "Pass"},
                        {"gpu_id": "1", "status": "Warn", "warnings": [
                            {"warning": "Detected more than 8 PCIe replays per minute for "
                                        "GPU 1 : 13", "error_id": 2, "error_category": 2,
                             "error_severity": 1}]},
                    ]},
                ]},
            ]
        },
    },
    indent=3,
)

# DCGM 4.x ("DCGM Diagnostic", entity results, test_summary repeating every warning, metadata,
# entity_groups with a CPU group that is not a GPU).
DCGM4_JSON = json.dumps(
    {
        "DCGM Diagnostic": {
            "test_categories": [
                {"category": "Deployment", "tests": [
                    {"name": "software",
                     "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0,
                                  "status": "Pass"}],
                     "test_summary": {"status": "Pass"}},
                ]},
                {"category": "Hardware", "tests": [
                    {"name": "memory",
                     "results": [
                         {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0,
                          "status": "Pass"},
                         {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1,
                          "status": "Fail",
                          "warnings": [{"error_category": 3, "error_id": 10,
                                        "error_severity": 2, "warning": ECC}]},
                     ],
                     "test_summary": {"status": "Fail", "warnings": [
                         {"error_category": 3, "error_id": 10, "error_severity": 2,
                          "warning": ECC},
                         {"error_category": 1, "error_id": 99, "error_severity": 1,
                          "warning": "The memory test was cut short after 30 seconds."}]}},
                ]},
                {"category": "Stress", "tests": [
                    {"name": "cpu_eud",
                     "results": [{"entity_group": "CPU", "entity_group_id": 7, "entity_id": 0,
                                  "status": "Pass"}],
                     "test_summary": {"status": "Pass"}},
                ]},
            ]
        },
        "entity_groups": [
            {"entities": [{"device_id": "2330", "entity_id": 0, "serial_num": "1650923031111"},
                          {"device_id": "2330", "entity_id": 1, "serial_num": "1650923031112"}],
             "entity_group": "GPU", "entity_group_id": 1},
            {"entities": [{"device_id": "0x1000", "entity_id": 0}],
             "entity_group": "CPU", "entity_group_id": 7},
        ],
        "metadata": {"Driver Version Detected": "570.124.06", "version": "4.2.3"},
    },
    indent=3,
)

# DCGM 4.x HelperDisplayFailureMessage with -j: no tests, the error and the version only.
DCGM4_RUNTIME_ERROR_JSON = json.dumps(
    {"DCGM Diagnostic": {"runtime_error": "Error: Diagnostic could not be run while DCGM is "
                                          "paused.", "version": "4.2.3"}},
    indent=3,
)

# -i 2 with -j: {"iterations": [...], "Overall Result": ...} (dcgmi/Diag.cpp RunStartDiag).
DCGM4_ITERATIONS_JSON = json.dumps(
    {
        "iterations": [json.loads(DCGM4_JSON), json.loads(DCGM4_JSON)],
        "Overall Result": "Fail",
        "warning": "The diagnostic test failed",
    },
    indent=3,
)

# --- gpu-burn ---------------------------------------------------------------------------------

# 2017 release (Version 0.3): "/" between GPUs, no Gflop/s, "Killing processes.. done".
GPU_BURN_2017 = (
    "GPU 0: Tesla P100-SXM2-16GB (UUID: GPU-0a1b2c3d-0000-1111-2222-333344445555)\n"
    "GPU 1: Tesla P100-SXM2-16GB (UUID: GPU-0a1b2c3d-0000-1111-2222-333344446666)\n"
    "Initialized device 0 with 16276 MB of memory (15930 MB available, using 14337 MB of it)\n"
    "Initialized device 1 with 16276 MB of memory (15930 MB available, using 14337 MB of it)\n"
    "\r10.0%  proc'd: 12 / 12   errors: 0 / 0   temps: 41 C / 40 C "
    "\r20.0%  proc'd: 24 / 23   errors: 0 / 4  (WARNING!)  temps: 52 C / -- "
    "\n\tSummary at:   Tue Nov 28 10:00:10 UTC 2017\n\n"
    "\r100.0%  proc'd: 120 / 118   errors: 0 / 3  (WARNING!)  temps: 60 C / 61 C \n"
    "Killing processes.. done\n"
    "\n"
    "Tested 2 GPUs:\n"
    "\tGPU 0: OK\n"
    "\tGPU 1: FAULTY\n"
)

# Current release: a GPU that died (-1 proc'd, "(DIED!)"), and the "read[0] error 0" the
# driver prints on stderr without a newline, landing after the temperatures.
GPU_BURN_DIED = (
    "Using compare file: compare.ptx\n"
    "Burning for 60 seconds.\n"
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-11111111-2222-3333-4444-666666666666)\n"
    "\r50.0%  proc'd: 1920 (51234 Gflop/s) - -1 (0 Gflop/s)   errors: 0 - 0  (DIED!)"
    "   temps: 65 C - -- read[1] error 0"
    "\n\nNo clients are alive!  Aborting\n"
)

# --- nvbandwidth ------------------------------------------------------------------------------

# v0.8: hostname line before the devices, a latency test in ns, a waived test, SUM lines.
NVBANDWIDTH_LATENCY = (
    "nvbandwidth Version: v0.8\n"
    "Built from Git version: v0.8\n\n"
    "CUDA Runtime Version: 12080\n"
    "CUDA Driver Version: 12080\n"
    "Driver Version: 570.124.06\n\n"
    "node17\n"
    "Device 0: NVIDIA H100 80GB HBM3 (00000000:18:00)\n"
    "Device 1: NVIDIA H100 80GB HBM3 (00000000:2a:00)\n\n"
    "Waived: \n"
    "Running host_device_latency_sm.\n"
    "memory latency SM CPU(row) <-> GPU(column) (ns)\n"
    "           0         1\n"
    " 0    771.58    769.21\n\n"
    "SUM host_device_latency_sm 1540.79\n\n"
    "Running device_to_device_bidirectional_memcpy_write_ce.\n"
    "memcpy CE GPU(row) <-> GPU(column) Write1 bandwidth (GB/s)\n"
    "           0         1\n"
    " 0       N/A    364.85\n"
    " 1    364.91       N/A\n\n"
    "SUM device_to_device_bidirectional_memcpy_write_ce_write1 729.76\n\n"
    "memcpy CE GPU(row) <-> GPU(column) Write2 bandwidth (GB/s)\n"
    "           0         1\n"
    " 0       N/A    364.82\n"
    " 1    364.79       N/A\n\n"
    "SUM device_to_device_bidirectional_memcpy_write_ce_write2 729.61\n\n"
    "memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)\n"
    "           0         1\n"
    " 0       N/A    729.67\n"
    " 1    729.70       N/A\n\n"
    "SUM device_to_device_bidirectional_memcpy_write_ce_total 1459.37\n\n"
)

# v0.2: no NOTE, no driver line layout change, matrix rows without left padding.
NVBANDWIDTH_V02 = (
    "nvbandwidth Version: v0.2\n"
    "Built from Git version: \n\n"
    "NOTE: This tool reports current measured bandwidth on your system.\n"
    "Additional system-specific tuning may be required to achieve maximal peak bandwidth.\n\n"
    "CUDA Runtime Version: 11080\n"
    "CUDA Driver Version: 11080\n"
    "Driver Version: 520.61.05\n\n"
    "Device 0: NVIDIA A100-SXM4-40GB\n"
    "Device 1: NVIDIA A100-SXM4-40GB\n\n"
    "Running device_to_device_memcpy_read_ce.\n"
    "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n"
    "          0         1\n"
    "0       N/A    274.92\n"
    "1    275.03       N/A\n\n"
    "SUM device_to_device_memcpy_read_ce 549.95\n"
)

# v0.8 with --perfFormatter: "&&&& PERF <key> <sum> +GB/s" instead of SUM.
NVBANDWIDTH_PERF = (
    "nvbandwidth Version: v0.8\n"
    "Running host_to_device_memcpy_ce.\n"
    "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
    "           0\n"
    " 0     55.12\n\n"
    "&&&& PERF host_to_device_memcpy_ce 55.12 +GB/s\n"
)

# v0.8 with -j (json_output.cpp): values as strings, a bidirectional device-to-device test's
# three matrices appended to one "bandwidth_matrix" with the last description and sum.
NVBANDWIDTH_JSON = json.dumps(
    {
        "nvbandwidth": {
            "CUDA Runtime Version": 12080,
            "Driver Version": "570.124.06",
            "GPU Device list": ["0: NVIDIA H100 80GB HBM3 (00000000:18:00): (node17)",
                                "1: NVIDIA H100 80GB HBM3 (00000000:2a:00): (node17)"],
            "git_version": "v0.8",
            "version": "v0.8",
            "testcases": [
                {"name": "host_to_device_memcpy_ce", "status": "Passed",
                 "bandwidth_description": "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
                 "bandwidth_matrix": [["55.1234", "55.0987"]], "sum": 110.2221},
                {"name": "device_to_device_bidirectional_memcpy_read_ce", "status": "Passed",
                 "bandwidth_description":
                     "memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)",
                 "bandwidth_matrix": [["N/A", "364.85"], ["364.91", "N/A"],
                                      ["N/A", "364.82"], ["364.79", "N/A"],
                                      ["N/A", "729.67"], ["729.7", "N/A"]],
                 "sum": 1459.37},
                {"name": "host_device_latency_sm", "status": "Passed",
                 "bandwidth_description": "memory latency SM CPU(row) <-> GPU(column) (ns)",
                 "bandwidth_matrix": [["771.58", "769.21"]], "sum": 1540.79},
                {"name": "device_local_copy", "status": "Waived"},
            ],
        }
    },
    indent=3,
)

# --- perftest ---------------------------------------------------------------------------------

_BW_HEADER = (
    "---------------------------------------------------------------------------------------\n"
    "                    RDMA_Write BW Test\n"
    " Dual-port       : OFF\t\tDevice         : mlx5_0\n"
    " Number of qps   : 2\t\tTransport type : IB\n"
    " Connection type : RC\t\tUsing SRQ      : OFF\n"
    " PCIe relax order: ON\t\tLock-free      : OFF\n"
    " ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF\n"
    " TX depth        : 128\n"
    " CQ Moderation   : 1\n"
    " CQE Poll Batch  : 16\n"
    " Mtu             : 4096[B]\n"
    " Link type       : IB\n"
    " Max inline data : 0[B]\n"
    " rdma_cm QPs\t : OFF\n"
    " Data ex. method : Ethernet\n"
    "---------------------------------------------------------------------------------------\n"
    " local address: LID 0x21 QPN 0x0123 PSN 0x4f2a1b RKey 0x1fff00 VAddr 0x007f0000000000\n"
    " remote address: LID 0x22 QPN 0x0456 PSN 0x7a1b2c RKey 0x1fff01 VAddr 0x007f1000000000\n"
    "---------------------------------------------------------------------------------------\n"
)
# perftest 2025+ (perftest_parameters.h 40aa1f0): "MiB/sec", TABs inside REPORT_FMT, duration
# mode (-D) so the peak is 0.00 and a WARNING line.
IB_WRITE_BW_MIB_DURATION = (
    " WARNING: BW peak won't be measured in this run.\n"
    + _BW_HEADER
    + " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n"
    + " 65536      1462300          0.00               47593.71\t\t     0.761499\n"
    + "---------------------------------------------------------------------------------------\n"
)
# --report_gbits with CPU utilisation (--cpu_util): one more column after MsgRate.
IB_WRITE_BW_CPU_UTIL = (
    _BW_HEADER
    + " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
      "    CPU_Util[%]\n"
    + " 1048576    5000             392.11             391.87\t\t     0.046714\t    2.35\n"
    + "---------------------------------------------------------------------------------------\n"
)
# QoS (--sl / -Q): "#sl" before "#iterations".
IB_WRITE_BW_QOS = (
    _BW_HEADER
    + " #bytes    #sl      #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
    + " 65536      3           5000           97.42              97.40                  0.185776\n"
    + "---------------------------------------------------------------------------------------\n"
)

_LAT_HEADER = _BW_HEADER.replace("RDMA_Write BW Test", "Send Latency Test")
# Early-2013 perftest (perftest_parameters.c at c8621b4): "Device : x" with one space, no
# transport / SRQ columns, "Mtu : 2048B" without brackets.
_HEADER_2013 = (
    "------------------------------------------------------------------\n"
    "                    {title}\n"
    " Dual-port       : OFF\t\tDevice : mlx4_0\n"
    " Number of qps   : 1\n"
    " Connection type : UC\n"
    " TX depth        : 1\n"
    " Mtu             : 2048B\n"
    " Link type       : IB\n"
    " Max inline data : 400B\n"
    " rdma_cm QPs\t : OFF\n"
    " Data ex. method : Ethernet\n"
    "------------------------------------------------------------------\n"
    " local address: LID 0x03 QPN 0x004a PSN 0x1d2e3f\n"
    " remote address: LID 0x04 QPN 0x004b PSN 0x2e3f40\n"
    "------------------------------------------------------------------\n"
)
# Early-2013 bandwidth table (REPORT_FMT at c8621b4): MB/sec, iterations printed with %d.
IB_WRITE_BW_2013 = (
    _HEADER_2013.format(title="RDMA_Write BW Test")
    + " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
    + " 65536      5000           3249.78            3249.52\t\t   0.051992\n"
    + "------------------------------------------------------------------\n"
)
# Early-2013 latency table (RESULT_FMT_LAT at c8621b4): t_min / t_max / t_typical only.
IB_SEND_LAT_2013 = (
    _HEADER_2013.format(title="Send Latency Test")
    + " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n"
    + " 2       1000          0.92           5.06         0.95   \n"
    + " 4       1000          0.93           3.32         0.96   \n"
    + "---------------------------------------------------------------------------------------\n"
)
# Duration mode (-D): t_avg and "tps average" only (RESULT_FMT_LAT_DUR).
IB_WRITE_LAT_DURATION = (
    _LAT_HEADER.replace("Send Latency", "RDMA_Write Latency")
    + " #bytes        #iterations       t_avg[usec]    tps average\n"
    + " 2       4538192            1.10          903412.51\n"
    + "---------------------------------------------------------------------------------------\n"
)

# --- ibstat -----------------------------------------------------------------------------------

# A CA vanishing mid-listing: ibstat printed the CAs it could read, then libibmad's IBWARN and
# IBPANIC lines on stderr ("ibwarn: [pid] fn: ..." / "ibpanic: [pid] fn: ...: <errno text>").
IBSTAT_IBPANIC = (
    "CA 'mlx5_0'\n"
    "\tCA type: MT4129\n"
    "\tNumber of ports: 1\n"
    "\tFirmware version: 28.39.1002\n"
    "\tHardware version: 0\n"
    "\tNode GUID: 0x946dae0300cde72c\n"
    "\tSystem image GUID: 0x946dae0300cde72c\n"
    "\tPort 1:\n"
    "\t\tState: Initializing\n"
    "\t\tPhysical state: LinkUp\n"
    "\t\tRate: 400\n"
    "\t\tBase lid: 65535\n"
    "\t\tLMC: 0\n"
    "\t\tSM lid: 0\n"
    "\t\tCapability mask: 0xa751e848\n"
    "\t\tPort GUID: 0x946dae0300cde72c\n"
    "\t\tLink layer: InfiniBand\n"
    "ibwarn: [40922] main: stat of IB device 'mlx5_1' failed\n"
    "ibpanic: [40922] main: stat of IB device 'mlx5_1' failed: No such device\n"
)

VARIANTS: dict[str, dict[str, str]] = {
    "dcgmi-diag": {
        "dcgm33-table": DCGM33_TABLE,
        "dcgm4-table": DCGM4_TABLE,
        "space-at-cut": SPACE_AT_CUT_TABLE,
        "sixteen-gpus": SIXTEEN_GPUS_TABLE,
        "dcgm24-json": DCGM24_JSON,
        "dcgm33-json": DCGM33_JSON,
        "dcgm4-json": DCGM4_JSON,
        "dcgm4-runtime-error": DCGM4_RUNTIME_ERROR_JSON,
        "dcgm4-iterations": DCGM4_ITERATIONS_JSON,
    },
    "gpu-burn": {"2017": GPU_BURN_2017, "died": GPU_BURN_DIED},
    "nvbandwidth": {
        "latency": NVBANDWIDTH_LATENCY,
        "v0.2": NVBANDWIDTH_V02,
        "perf": NVBANDWIDTH_PERF,
        "json": NVBANDWIDTH_JSON,
    },
    "ib-write-bw": {
        "mib-duration": IB_WRITE_BW_MIB_DURATION,
        "cpu-util": IB_WRITE_BW_CPU_UTIL,
        "qos": IB_WRITE_BW_QOS,
        "2013": IB_WRITE_BW_2013,
    },
    "ib-write-lat": {"2013": IB_SEND_LAT_2013, "duration": IB_WRITE_LAT_DURATION},
    "ibstat": {"ibpanic": IBSTAT_IBPANIC},
}
