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

_PCI = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_PORT = re.compile(r"\s*port\s+(?P<port>\d+)(?:\s+\((?P<state>[^)]*)\))?\s*$")
_NETDEV = re.compile(r"\s*(?P<netdev>\S+)(?:\s+\((?P<updown>[^)]*)\))?\s*$")


def _mapping(line: str) -> dict[str, Any] | None:
    """Read "[pci] <dev> [description fw x] port <n> [(STATE)] ==> <netdev> (Up|Down)" or None.

    Split at "==>" and at the last " port " rather than one big regex: card descriptions
    contain words like "single-port", and a pasted line can be arbitrarily long.
    """
    left, arrow, right = line.partition("==>")
    at = left.rfind("port ")
    if not arrow or at <= 0 or not left[at - 1].isspace():
        return None
    port = _PORT.match(left, at)
    netdev = _NETDEV.match(right)
    head = left[:at].split()
    if not port or not netdev or not head:
        return None
    pci = head.pop(0) if len(head) > 1 and _PCI.match(head[0]) else None
    return {
        "device": head[0],
        "port": int(port.group("port")),
        "netdev": netdev.group("netdev"),
        "up": _up(netdev.group("updown")),
        "pci": pci,
        "port_state": (port.group("state") or "").strip() or None,
        "description": " ".join(head[1:]) or None,
    }


def _up(word: str | None) -> bool | None:
    if word is None:
        return None
    word = word.strip().rstrip("*").lower()
    return {"up": True, "down": False}.get(word)


def parse(text: str) -> dict[str, Any]:
    """One mapping per "<dev> port <n> ==> <netdev> (Up|Down)" line."""
    mappings: list[dict[str, Any]] = []
    for raw in text_lines(text):
        mapping = _mapping(strip_prefix(raw))
        if mapping:
            mappings.append(mapping)
    if not mappings:
        fail(WHAT, "no '<device> port <n> ==> <netdev>' line found")
    return {"mappings": mappings}
