"""``ofed_info`` (``-s``, ``-n`` or plain) and ``/etc/mlnx-release``: the installed OFED stack.

The forms, as the ofed_info script of each distribution prints them:

- ``ofed_info -s``: "MLNX_OFED_LINUX-5.8-1.0.1.1:" (MLNX_OFED 4.x/5.x, some builds with a
  date suffix "5.8-2.0.3.0.202305301712"); DOCA-OFED hosts: "OFED-internal-24.04-0.6.6:";
  DGX OS builds print the same name without the trailing colon ("OFED-internal-4.7-3.2.9");
- plain ``ofed_info``: the same header, then " (OFED-5.8-1.0.1):" (the upstream base) and the
  package list; OFA's community OFED 1.5 printed "OFED-1.5.3.2:" as its first line;
- ``ofed_info -n`` (numeric only): "5.8-1.0.1.1"; ``/etc/mlnx-release``: the ``-s`` line
  without its colon.

``ofed_version`` is the version part ("5.8-1.0.1.1"), comparable across hosts whichever
distribution name prefixed it.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "ofed_info"

_LINE = re.compile(
    r"^\s*(?P<dist>[A-Za-z][A-Za-z_]*(?:-[A-Za-z_]+)*?)-(?P<ver>\d[\w.]*(?:-[\w.]+)*?)"
    r"(?:\s+\((?P<base>[^)]*)\))?:?\s*$"
)
# ofed_info -n: "5.8-1.0.1.1", "24.01-0.3.3" (a kernel release "5.15.0-91-generic" is not one)
_NUMERIC = re.compile(r"^\s*(\d{1,2}\.\d{1,2}-\d+(?:\.\d+){1,5})\s*$")


def parse(text: str) -> dict[str, Any]:
    """Distribution name, version and the upstream OFED base when printed."""
    lines = [strip_prefix(raw) for raw in text_lines(text) if raw.strip()]
    for line in lines:
        m = _LINE.match(line)
        if m and ("OFED" in m.group("dist").upper() or m.group("dist").startswith("MLNX")):
            return {
                "ofed_version": m.group("ver"),
                "distribution": m.group("dist"),
                "ofed_full": f"{m.group('dist')}-{m.group('ver')}",
                "base": m.group("base"),
            }
    if len(lines) == 1 and (m := _NUMERIC.match(lines[0])):
        return {"ofed_version": m.group(1), "distribution": None, "ofed_full": None,
                "base": None}
    fail(WHAT, "no 'MLNX_OFED_LINUX-<version>:' style line found")
