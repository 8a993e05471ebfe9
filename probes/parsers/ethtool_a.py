"""``ethtool -a <netdev>`` (``--show-pause``): global (802.3x) pause settings of a port.

Both ethtool implementations print the same lines (``ethtool.c`` ``dump_pause`` for the ioctl
path, ``netlink/pause.c`` since ethtool 5.6)::

    Pause parameters for ens1f0np0:
    Autonegotiate:  off
    RX:             on
    TX:             on

``RX negotiated:`` / ``TX negotiated:`` follow when pause autonegotiation is on and the link
partner's advertisement is known, and ``ethtool -I -a`` adds a ``Statistics:`` block
(``tx_pause_frames: N``). A driver without pause support answers ``Cannot get device pause
settings: Operation not supported`` (ioctl) or ``netlink error: Operation not supported``.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "ethtool -a"

_HEADER = re.compile(r"^\s*Pause parameters for (?P<ifname>\S+?):?\s*$")
_FIELD = re.compile(r"^\s*(?P<key>Autonegotiate|RX|TX|RX negotiated|TX negotiated):\s*"
                    r"(?P<value>\S+)\s*$")
_STAT = re.compile(r"^\s*(?P<name>[a-z_]+):\s*(?P<value>\d+)\s*$")
# ethtool's own complaints (ioctl path, then netlink path); other text is not ethtool -a output
_ERROR = re.compile(r"^\s*(?:Cannot get device pause settings|netlink error):")
_KEYS = {"Autonegotiate": "autoneg", "RX": "rx", "TX": "tx", "RX negotiated": "rx_negotiated",
         "TX negotiated": "tx_negotiated"}


def _on_off(value: str) -> bool | None:
    return {"on": True, "off": False}.get(value.strip().lower())


def parse(text: str) -> dict[str, Any]:
    """Autonegotiate/RX/TX as booleans (None when not printed), plus pause statistics."""
    out: dict[str, Any] = {"ifname": None, "autoneg": None, "rx": None, "tx": None,
                           "rx_negotiated": None, "tx_negotiated": None, "stats": {},
                           "error": None}
    in_stats = False
    seen = False
    for raw in text_lines(text):
        line = strip_prefix(raw).rstrip()
        if not line.strip():
            continue
        if m := _HEADER.match(line):
            out["ifname"] = m.group("ifname")
            seen = True
        elif m := _FIELD.match(line):
            out[_KEYS[m.group("key")]] = _on_off(m.group("value"))
            seen = True
        elif line.strip() == "Statistics:":
            in_stats = True
        elif in_stats and (m := _STAT.match(line)):
            out["stats"][m.group("name")] = int(m.group("value"))
        elif _ERROR.search(line) and out["error"] is None:
            out["error"] = line.strip()[:200]
    if not seen:
        if out["error"]:
            return out
        fail(WHAT, "no 'Pause parameters for' header and no Autonegotiate/RX/TX lines")
    return out
