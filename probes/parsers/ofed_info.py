"""``ofed_info -s`` (or the first line of ``ofed_info``): the installed OFED stack.

Prints "MLNX_OFED_LINUX-5.8-1.0.1.1:" (DOCA-era hosts: "OFED-internal-24.04-0.6.6:"; plain
``ofed_info`` adds " (OFED-5.8-1.0.1):" and a package list). ``ofed_version`` is the version
part ("5.8-1.0.1.1"), comparable across hosts whichever distribution name prefixed it.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "ofed_info"

_LINE = re.compile(
    r"^\s*(?P<dist>[A-Za-z][A-Za-z_]*(?:-[A-Za-z_]+)*?)-(?P<ver>\d[\w.]*(?:-[\w.]+)*?)"
    r"(?:\s+\((?P<base>[^)]*)\))?:\s*$"
)


def parse(text: str) -> dict[str, Any]:
    """Distribution name, version and the upstream OFED base when printed."""
    for raw in text_lines(text):
        m = _LINE.match(strip_prefix(raw))
        if m and ("OFED" in m.group("dist").upper() or m.group("dist").startswith("MLNX")):
            return {
                "ofed_version": m.group("ver"),
                "distribution": m.group("dist"),
                "ofed_full": f"{m.group('dist')}-{m.group('ver')}",
                "base": m.group("base"),
            }
    fail(WHAT, "no 'MLNX_OFED_LINUX-<version>:' style line found")
