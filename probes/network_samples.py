"""The network probe's counter samples, read twice a few seconds apart: the InfiniBand port
counters from sysfs, the Ethernet (RoCE) NICs' ethtool statistics and the kernel's TCP
retransmissions, each parsed per port so that probes/network_facts.py can take the deltas.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

ib_port = re.compile(r"^\s*\S*/infiniband/(?P<ca>[^/\s]+)/ports/(?P<port>\d+)/")
eth_header = re.compile(r"^--- (?P<netdev>\S+) (?P<ca>\S+)\s*$")
# mlx5 (en_stats.c): rx_prio<p>_pause per priority, rx_pause_ctrl_phy for global pause; mlx4
# (ConnectX-3, en_ethtool.c "flow control statistics"): rx_pause_prio_<p> and rx_pause. The
# _duration and _transition counters of both are not frames.
rx_pause = re.compile(r"^rx_(?:prio\d+_pause|pause_ctrl_phy|pause_prio_\d+|pause)$")
tx_pause = re.compile(r"^tx_(?:prio\d+_pause|pause_ctrl_phy|pause_prio_\d+|pause)$")
rx_discard = ("rx_discards_phy", "rx_out_of_buffer")
# Only the error events are storms: "sending pauses for a long period of time, reaching time
# out and disabling transmission of pause frames" (Error). tx_pause_storm_warning_events ("was
# sending pauses for a long period of time", the minor stall watermark) is Informative: a port
# back-pressuring hard under congestion, the storm prevention never engaged (kernel
# Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst; en_stats.c maps
# them to device_stall_critical_watermark_cnt and device_stall_minor_watermark_cnt).
storm = re.compile(r"^tx_pause_storm_error_events$")


def ib_sample(text: str) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Counters per "ca/port" and the saturated ones, each port read by ib-sysfs-counters."""
    chunks: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = ib_port.match(line)
        if m:
            chunks.setdefault(f"{m.group('ca')}/{m.group('port')}", []).append(line)
    counters, saturated = {}, []
    for key, lines in chunks.items():
        try:
            parsed = parse_kind("ib-sysfs-counters", "\n".join(lines))
        except ParseError:  # every file "N/A (no PMA)": that port's counters not measured
            continue
        counters[key] = parsed["counters"]
        saturated += [f"{key}:{name}" for name in parsed["saturated"]]
    return counters, saturated


def eth_sample(text: str, ports_of: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """ethtool counters per port key; the header line names the netdev and its RDMA device."""
    chunks: dict[str, list[str]] = {}
    key = None
    for line in text.splitlines():
        header = eth_header.match(line)
        if header:
            netdev, ca = header.group("netdev"), header.group("ca")
            key = ports_of.get(netdev) or f"{ca}/1"
            chunks[key] = []
        elif key is not None:
            chunks[key].append(line)
    out = {}
    for key, lines in chunks.items():
        body = "\n".join(lines).strip()
        if not body:
            continue
        try:
            out[key] = parse_kind("ethtool-S", "NIC statistics:\n" + body)["counters"]
        except ParseError:  # "Cannot get stats strings information" and the like
            continue
    return out


def tcp_retrans(text: str) -> int | None:
    rows = [line.split() for line in text.splitlines() if line.startswith("Tcp:")]
    if len(rows) >= 2 and "RetransSegs" in rows[0]:
        column = rows[0].index("RetransSegs")
        if column < len(rows[1]) and rows[1][column].isdigit():
            return int(rows[1][column])
    if "TcpRetransSegs" in text:
        retransmitted: int | None = parse_kind("nstat", text)["tcp_retransmitted_segments"]
        return retransmitted
    return None


def delta(before: int | None, after: int | None) -> int | None:
    if before is None or after is None:
        return None
    return after - before if after >= before else after  # went down: reset, count from 0


def eth_sums(counters: Mapping[str, int]) -> dict[str, int]:
    return {
        "rx_pause": sum(v for k, v in counters.items() if rx_pause.match(k)),
        "tx_pause": sum(v for k, v in counters.items() if tx_pause.match(k)),
        "rx_discards": sum(counters.get(k, 0) for k in rx_discard),
        "pause_storm": sum(v for k, v in counters.items() if storm.match(k)),
    }
