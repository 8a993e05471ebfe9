"""RoCE GID tables: ``show_gids`` output, or the sysfs files it reads listed by ``grep -H``.

``show_gids`` (Mellanox/mlnx-tools ``sbin/show_gids``) walks
``/sys/class/infiniband/<dev>/ports/<port>/gids/<index>`` and, for each GID that is neither
all-zero nor the bare ``fe80::`` prefix, reads ``gid_attrs/types/<index>`` ("IB/RoCE v1" or
"RoCE v2") and ``gid_attrs/ndevs/<index>`` (the netdev the GID belongs to). It prints a
``DEV PORT INDEX GID IPv4 VER DEV`` table (tabs, or spaces where a terminal converted them) and
``n_gids_found=N``. An IPv4 address is shown when the GID is IPv4-mapped
(``0000:0000:0000:0000:0000:ffff:c0a8:0684`` is 192.168.6.132).

Forking a ``cat`` per GID is slow on a 256-entry table, so probes list the same files with
``grep -H . .../gids/* .../gid_attrs/types/* .../gid_attrs/ndevs/*``
(``<path>:<value>``; the kernel refuses to read the type of an empty entry, so those lines are
simply absent). Both shapes give the same entries; unconfigured GIDs are dropped as show_gids
and NCCL (``configuredGid`` in net_ib) drop them.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "show_gids / GID table listing"

_ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"
_LINK_LOCAL_PREFIX_ONLY = "fe80:0000:0000:0000:0000:0000:0000:0000"
_GID = r"[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}"
_PATH = re.compile(r"^\s*\S*/infiniband/(?P<dev>[^/\s]+)/ports/(?P<port>\d+)/"
                   r"(?P<what>gids|gid_attrs/types|gid_attrs/ndevs)/(?P<index>\d+):(?P<value>.*)$")
_HEADER = re.compile(r"^\s*DEV\s+PORT\s+INDEX\s+GID\b")
_ROW = re.compile(rf"^\s*(?P<dev>\S+)\s+(?P<port>\d+)\s+(?P<index>\d+)\s+(?P<gid>{_GID})"
                  r"(?:\s+(?P<ipv4>\d{1,3}(?:\.\d{1,3}){3}))?"
                  r"(?:\s+(?P<ver>[vV]\d))?(?:\s+(?P<ndev>\S+))?\s*$")
_COUNT = re.compile(r"^\s*n_gids_found=(\d+)\s*$")


def ipv4_of(gid: str) -> str | None:
    """The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d), else None."""
    groups = gid.lower().split(":")
    if len(groups) != 8 or groups[:6] != ["0000"] * 5 + ["ffff"]:
        return None
    raw = groups[6] + groups[7]
    return ".".join(str(int(raw[i:i + 2], 16)) for i in range(0, 8, 2))


def version_of(text: str | None) -> str | None:
    """'RoCE v2' / 'IB/RoCE v1' / 'v2' -> 'v2' / 'v1'."""
    m = re.search(r"[vV](\d)", text or "")
    return f"v{m.group(1)}" if m else None


def configured(gid: str) -> bool:
    low = gid.lower()
    return low not in (_ZERO, _LINK_LOCAL_PREFIX_ONLY)


def _from_listing(lines: list[str]) -> list[dict[str, Any]]:
    entries: dict[tuple[str, int, int], dict[str, Any]] = {}
    for line in lines:
        m = _PATH.match(line)
        if not m:
            continue
        key = (m.group("dev"), int(m.group("port")), int(m.group("index")))
        entry = entries.setdefault(key, {"device": key[0], "port": key[1], "index": key[2],
                                         "gid": None, "ipv4": None, "version": None,
                                         "netdev": None})
        value = m.group("value").strip()
        if m.group("what") == "gids":
            entry["gid"] = value.lower() if re.fullmatch(_GID, value) else None
        elif m.group("what") == "gid_attrs/types":
            entry["version"] = version_of(value)
        else:
            entry["netdev"] = value or None
    gids = []
    for entry in entries.values():
        if entry["gid"] is None or not configured(entry["gid"]):
            continue
        entry["ipv4"] = ipv4_of(entry["gid"])
        gids.append(entry)
    return sorted(gids, key=lambda e: (e["device"], e["port"], e["index"]))


def parse(text: str) -> dict[str, Any]:
    """Configured GIDs with their RoCE version, IPv4 address and netdev."""
    lines = [strip_prefix(raw) for raw in text_lines(text)]
    if any(_PATH.match(line) for line in lines):
        return {"gids": _from_listing(lines), "count": None}
    if not any(_HEADER.match(line) for line in lines):
        fail(WHAT, "no 'DEV PORT INDEX GID' header and no .../gids/<index>:<gid> lines")
    gids, count = [], None
    for line in lines:
        if m := _COUNT.match(line):
            count = int(m.group(1))
            continue
        m = _ROW.match(line)
        if not m or not configured(m.group("gid")):
            continue
        gid = m.group("gid").lower()
        gids.append({"device": m.group("dev"), "port": int(m.group("port")),
                     "index": int(m.group("index")), "gid": gid,
                     "ipv4": m.group("ipv4") or ipv4_of(gid),
                     "version": version_of(m.group("ver")), "netdev": m.group("ndev")})
    return {"gids": gids, "count": count}
