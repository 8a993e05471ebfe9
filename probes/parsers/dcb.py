"""iproute2 ``dcb pfc show dev <netdev>`` and ``dcb app show dev <netdev>`` output.

``dcb pfc show`` (iproute2 ``dcb/dcb_pfc.c``, ``dcb_pfc_print``) prints one line of scalars and
one line of the per-priority map::

    pfc-cap 8 macsec-bypass off delay 0
    prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off

(``-s`` adds ``requests`` / ``indications`` lines of eight counters). ``dcb app show``
(``dcb/dcb_app.c``, ``dcb_app_print``) prints one line per APP selector that has entries, e.g.
``dscp-prio AF31:3 CS4:4`` or ``dscp-prio 26:3`` with ``-N``; an empty table prints nothing.

The trust state follows what mlnx_qos itself concludes when the driver has no ``qos/trust``
sysfs file (Mellanox/mlnx-tools ``Trust.getTrust``): any DSCP APP entry means trust dscp, none
means pcp. ``trust`` is given only when some APP line was read: an empty table prints
nothing, and only the caller knows whether the command succeeded (then the trust is pcp). A
driver without DCB answers ``Attribute read: Operation not supported`` (iproute2 6.1, a veth).
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "dcb pfc/app show"

_PFC_MAP = re.compile(r"^\s*prio-pfc\s+(?P<map>(?:[0-7]:(?:on|off)\s*)+)$")
_PFC_CAP = re.compile(r"\bpfc-cap\s+(\d+)")
_DELAY = re.compile(r"\bdelay\s+(\d+)")
_APP = re.compile(r"^\s*(?P<sel>[a-z]+(?:-[a-z]+)*-prio)\s+(?P<entries>\S+:\d(?:\s+\S+:\d)*)\s*$")
# dcb's own complaints (dcb/dcb.c): a failed netlink read, an unknown device or object
_ERROR = re.compile(r"^\s*(?:Attribute read:|Cannot find device|Object \"\w+\" is unknown)")


def parse(text: str) -> dict[str, Any]:
    """PFC per priority (``pfc_enabled``), the APP selectors present and the trust they imply."""
    out: dict[str, Any] = {"pfc_enabled": None, "pfc_cap": None, "pfc_delay": None,
                           "app": {}, "trust": None, "errors": []}
    for raw in text_lines(text):
        line = strip_prefix(raw).rstrip()
        if not line.strip():
            continue
        if m := _PFC_MAP.match(line):
            pairs = re.findall(r"([0-7]):(on|off)", m.group("map"))
            out["pfc_enabled"] = sorted(int(p) for p, state in pairs if state == "on")
        elif line.lstrip().startswith("pfc-cap"):
            if m := _PFC_CAP.search(line):
                out["pfc_cap"] = int(m.group(1))
            if m := _DELAY.search(line):
                out["pfc_delay"] = int(m.group(1))
        elif m := _APP.match(line):
            out["app"][m.group("sel")] = m.group("entries").split()
        elif _ERROR.search(line):
            out["errors"].append(line.strip()[:200])
    if out["app"]:
        out["trust"] = "dscp" if out["app"].get("dscp-prio") else "pcp"
    if out["pfc_enabled"] is None and not out["app"] and not out["errors"]:
        fail(WHAT, "no 'prio-pfc' map, no APP selector line and no dcb error")
    return out
