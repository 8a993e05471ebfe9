"""Hand-written outputs of the acceptance tools, for the layouts the public samples do not show.

Each text is built from the tool's own print statements in the release named next to it (DCGM
dcgmi/Diag.cpp and nvvs/include/NvvsJsonStrings.h; wilicc/gpu-burn gpu_burn-drv.cpp;
NVIDIA/nvbandwidth output.cpp and inline_common.h; linux-rdma/perftest perftest_parameters.[ch];
rdma-core infiniband-diags/ibstat.c and libibmad/mad.h), so a parser is checked against the
format, not against one machine's numbers. Shared by the value tests and the robustness tests.
"""

from __future__ import annotations

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
    "ibstat": {"ibpanic": IBSTAT_IBPANIC},
}
