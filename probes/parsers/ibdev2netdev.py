"""``ibdev2netdev`` (and ``-v``): which netdev backs each RDMA device port.

NCCL_IB_HCA and NCCL_SOCKET_IFNAME are set in the two different namespaces this maps between,
so a mismatch here explains "NCCL picked the wrong NIC". ``up`` is the netdev's Up/Down as
printed; ``-v`` adds the PCI address, the card description and the IB port state.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "ibdev2netdev"

_LINE = re.compile(
    r"^\s*(?:(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+)?"
    r"(?P<device>\S+)\s(?P<middle>.*?)\bport\s+(?P<port>\d+)"
    r"(?:\s+\((?P<port_state>[^)]*)\))?\s+==>\s+(?P<netdev>\S+)"
    r"(?:\s+\((?P<updown>[^)]*)\))?\s*$"
)


def _up(word: str | None) -> bool | None:
    if word is None:
        return None
    word = word.strip().rstrip("*").lower()
    return {"up": True, "down": False}.get(word)


def parse(text: str) -> dict[str, Any]:
    """One mapping per "<dev> port <n> ==> <netdev> (Up|Down)" line."""
    mappings: list[dict[str, Any]] = []
    for raw in text_lines(text):
        m = _LINE.match(strip_prefix(raw))
        if not m:
            continue
        middle = m.group("middle").strip()
        mappings.append(
            {
                "device": m.group("device"),
                "port": int(m.group("port")),
                "netdev": m.group("netdev"),
                "up": _up(m.group("updown")),
                "pci": m.group("pci"),
                "port_state": (m.group("port_state") or "").strip() or None,
                "description": middle or None,
            }
        )
    if not mappings:
        fail(WHAT, "no '<device> port <n> ==> <netdev>' line found")
    return {"mappings": mappings}
