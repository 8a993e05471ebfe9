"""Hand-written outputs of the acceptance tools, for the layouts the public samples do not show.

Each text is built from the tool's own print statements in the release named next to it (DCGM
dcgmi/Diag.cpp and nvvs/include/NvvsJsonStrings.h; wilicc/gpu-burn gpu_burn-drv.cpp;
NVIDIA/nvbandwidth output.cpp and inline_common.h; linux-rdma/perftest perftest_parameters.[ch];
rdma-core infiniband-diags/ibstat.c and libibmad/mad.h), so a parser is checked against the
format, not against one machine's numbers. Shared by the value tests and the robustness tests.
"""

from __future__ import annotations

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
    "ib-write-bw": {
        "mib-duration": IB_WRITE_BW_MIB_DURATION,
        "cpu-util": IB_WRITE_BW_CPU_UTIL,
        "qos": IB_WRITE_BW_QOS,
        "2013": IB_WRITE_BW_2013,
    },
    "ib-write-lat": {"2013": IB_SEND_LAT_2013, "duration": IB_WRITE_LAT_DURATION},
    "ibstat": {"ibpanic": IBSTAT_IBPANIC},
}
