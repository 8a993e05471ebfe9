"""``ethtool -S <iface>``: NIC driver statistics (mlx5 RoCE counters above all).

PFC pause, discard and out-of-buffer counters are how a RoCE fabric problem shows on a host.
Probes often filter the listing (``| grep -E 'prio|discard'``), so the "NIC statistics:"
banner is optional; without it most lines must still look like counters, which keeps other
"name: number" outputs (netstat -s, ibv_devinfo) from passing as ethtool.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "ethtool -S"

# "NIC statistics:" heads the driver's counters; ethtool 5.13+ prints the IEEE/RMON groups of
# `ethtool -S IF --groups eth-mac,...` / `--all-groups` under "Standard stats for IF:".
_BANNER = re.compile(r"^\s*(?:NIC statistics|Standard stats for \S+):\s*$")
# bnxt prints per-queue counters as "[0]: rx_ucast_packets: 12".
_COUNTER = re.compile(r"^\s*((?:\[\d+\]:\s*)?[^\s:]+):\s+(-?\d+)\s*$")


def parse(text: str) -> dict[str, Any]:
    """All integer counters, by name as printed."""
    counters: dict[str, int] = {}
    banner = False
    other = 0
    for raw in text_lines(text):
        line = strip_prefix(raw)
        if not line.strip():
            continue
        if _BANNER.match(line):
            banner = True
            continue
        m = _COUNTER.match(line)
        if m:
            counters[" ".join(m.group(1).split())] = int(m.group(2))
        else:
            other += 1
    if "no stats available" in text and not counters:
        return {"counters": {}, "error": "no stats available"}
    if not banner and (not counters or other > len(counters) // 4):
        fail(WHAT, "no 'NIC statistics:' banner and the lines are not 'name: value' counters")
    return {"counters": counters}
