"""``mlnx_qos -i <netdev>``: a ConnectX port's QoS state (trust, PFC, DSCP map, TCs).

mlnx_qos (Mellanox/mlnx-tools ``python/mlnx_qos``, MLNX_OFED and the mlnx-tools package)
prints, in this order, whatever the driver exposes:

- ``DCBX mode: OS controlled`` or ``DCBX mode: Firmware controlled``;
- ``Priority trust state: pcp|dscp`` (``none`` after "Priority trust state is not supported on
  your system");
- with trust dscp, ``dscp2prio mapping:`` then ``\\tprio:P dscp:07,06,...,`` lines (a priority
  with more than eight DSCPs continues on a second ``prio:P`` line);
- ``Receive buffer size (bytes): 130944,...,max_buffer_size=262016`` (``total_size=`` before
  mlx-tools 2023) when the buffer commands are supported;
- ``Cable len: 7``;
- ``PFC configuration:``, a ``priority 0 1 .. 7`` header, an ``enabled`` row of eight 0/1 and,
  with buffers, a ``buffer`` row of eight buffer numbers (MLNX_OFED 4.x printed them on lines
  without the leading tab);
- one ``tc: T ratelimit: R, tsa: ets, bw: N%|strict|vendor`` line per traffic class, each
  followed by its ``priority: P`` lines.

Only the PFC row is required: without ``PFC configuration:`` this is not mlnx_qos output.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "mlnx_qos -i"

_DCBX = re.compile(r"^\s*DCBX mode:\s*(?P<mode>.*?)\s*$", re.I)
_TRUST = re.compile(r"^\s*Priority trust state:\s*(?P<trust>\S+)\s*$", re.I)
_DSCP = re.compile(r"^\s*prio:\s*(?P<prio>[0-7])\s+dscp:\s*(?P<list>[\d,\s]*)$")
_BUFFER_SIZE = re.compile(r"^\s*Receive buffer size \(bytes\):\s*(?P<list>.*)$", re.I)
_CABLE = re.compile(r"^\s*Cable len:\s*(?P<len>\d+)", re.I)
_ROW = re.compile(r"^\s*(?P<name>priority|enabled|buffer)\s+(?P<values>(?:\d+\s*){8})\s*$")
_TC = re.compile(r"^\s*tc:\s*(?P<tc>\d+)\s+ratelimit:\s*(?P<rate>[^,]*),\s*tsa:\s*(?P<tsa>\w+)"
                 r"(?:,\s*bw:\s*(?P<bw>\d+)%)?")
_TC_PRIO = re.compile(r"^\s*priority:\s*(?P<prio>[0-7])\s*$")


def _dcbx(mode: str) -> str | None:
    low = mode.lower()
    if low.startswith("os"):
        return "os"
    if low.startswith("firmware"):
        return "firmware"
    return low or None


def parse(text: str) -> dict[str, Any]:
    """Trust state, PFC per priority, DSCP map, buffers and TCs of one netdev."""
    out: dict[str, Any] = {
        "dcbx_mode": None, "trust": None, "dscp2prio": {}, "buffer_sizes": None,
        "max_buffer_size": None, "cable_len": None, "pfc_enabled": None, "pfc_buffer": None,
        "tcs": [], "warnings": [],
    }
    in_pfc = False
    tc: dict[str, Any] | None = None
    for raw in text_lines(text):
        line = strip_prefix(raw).rstrip()
        if not line.strip():
            continue
        if "WARNING" in line or "not supported on your system" in line:
            out["warnings"].append(line.strip().strip("*").strip()[:200])
        if m := _DCBX.match(line):
            out["dcbx_mode"] = _dcbx(m.group("mode"))
        elif m := _TRUST.match(line):
            out["trust"] = m.group("trust").lower()
        elif m := _DSCP.match(line):
            values = [int(v) for v in re.findall(r"\d+", m.group("list"))]
            out["dscp2prio"].setdefault(m.group("prio"), []).extend(values)
        elif m := _BUFFER_SIZE.match(line):
            sizes = [int(v) for v in re.findall(r"(?:^|,)\s*(\d+)(?=\s*,|\s*$)", m.group("list"))]
            out["buffer_sizes"] = sizes[:8] or None
            top = re.search(r"(?:max_buffer_size|total_size)=(\d+)", m.group("list"))
            out["max_buffer_size"] = int(top.group(1)) if top else None
        elif m := _CABLE.match(line):
            out["cable_len"] = int(m.group("len"))
        elif line.strip().startswith("PFC configuration"):
            in_pfc = True
        elif in_pfc and (m := _ROW.match(line)):
            values = [int(v) for v in m.group("values").split()]
            if m.group("name") == "enabled":
                out["pfc_enabled"] = [p for p, on in enumerate(values) if on]
            elif m.group("name") == "buffer":
                out["pfc_buffer"] = values
        elif m := _TC.match(line):
            in_pfc = False
            rate = m.group("rate").strip()
            tc = {"tc": int(m.group("tc")), "ratelimit": rate, "tsa": m.group("tsa").lower(),
                  "bw_pct": int(m.group("bw")) if m.group("bw") else None, "priorities": []}
            out["tcs"].append(tc)
        elif tc is not None and (m := _TC_PRIO.match(line)):
            tc["priorities"].append(int(m.group("prio")))
    if out["pfc_enabled"] is None:
        fail(WHAT, "no 'PFC configuration:' section with an 'enabled' row of eight 0/1 values")
    return out
