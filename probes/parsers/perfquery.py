"""``perfquery`` (``-x`` extended too): IB port counters read through the subnet manager.

The values are the ones a fabric manager sees for the port, so they confirm or refute what the
host's sysfs counters show. ``PortSelect``/``CounterSelect`` are query parameters, not counters,
and are reported separately.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "perfquery"

# perfquery.c: "# Port counters: %s port %d (CapMask: ...)", "# Port extended counters: ...",
# and "# PortRcvErrorDetails counters: %s port %d" (-E, -D, --oprcvcounters ...), where %s is
# libibmad's portid2str: "Lid 10", "Lid 10 Gid fe80::..." (with a GRH), "DR path slid 0; ..."
_HEADER = re.compile(
    r"^#\s*(?P<kind>Port\w*(?:\s+\w+)*?)\s+counters:\s*(?P<who>.*?)\s+port\s+(?P<port>\d+)"
    r"(?:\s*\((?P<caps>[^)]*)\))?\s*$"
)
_LID = re.compile(r"\bLid\s+(\d+)")
_FIELD = re.compile(r"^\s*(?P<name>\w+):\.{2,}\s*(?P<value>\S+)\s*$")


def parse(text: str) -> dict[str, Any]:
    """Counters of every block, merged; the blocks themselves are kept as well."""
    blocks: list[dict[str, Any]] = []
    block: dict[str, Any] | None = None
    for raw in text_lines(text):
        line = strip_prefix(raw)
        header = _HEADER.match(line)
        if header:
            lid = _LID.search(header.group("who"))
            block = {
                "lid": int(lid.group(1)) if lid else None,
                "kind": header.group("kind"),
                "port": int(header.group("port")),
                "extended": "extended" in header.group("kind").lower(),
                "cap_mask": header.group("caps"),
                "counters": {},
                "selects": {},
            }
            blocks.append(block)
            continue
        field = _FIELD.match(line)
        if not field:
            continue
        if block is None:  # excerpt without its "# Port counters" header
            block = {"lid": None, "port": None, "extended": None, "cap_mask": None}
            block.update(counters={}, selects={})
            blocks.append(block)
        name, value = field.group("name"), field.group("value")
        if "Select" in name:
            block["selects"][name] = value
        elif value.isdecimal():
            block["counters"][name] = int(value)
    if not blocks:
        fail(WHAT, "no '# Port counters:' header or 'Name:....value' lines found")
    counters: dict[str, int] = {}
    for b in blocks:
        counters.update(b["counters"])
    first = blocks[0]
    return {
        "lid": first["lid"],
        "port": first["port"],
        "extended": first["extended"],
        "counters": counters,
        "blocks": blocks,
    }
