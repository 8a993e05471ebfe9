"""``uname -r``: the running kernel release, compared across the fleet for drift.

Exactly one release-shaped line is accepted ("5.15.0-91-generic", "4.18.0-513.el8.x86_64",
"6.6.30+rpt-rpi-v8"); ``uname -a`` or anything else is refused rather than half-read.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "uname -r"

_RELEASE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:[-+.~_][\w.+~\-]*)?$")


def parse(text: str) -> dict[str, Any]:
    """Release string and its numeric major/minor/patch."""
    lines = [strip_prefix(line).strip() for line in text_lines(text)]
    lines = [line for line in lines if line]
    if len(lines) != 1:
        fail(WHAT, f"expected one line, got {len(lines)}")
    m = _RELEASE.match(lines[0])
    if not m:
        fail(WHAT, f"{lines[0][:60]!r} is not a kernel release")
    return {
        "kernel": lines[0],
        "major": int(m.group(1)),
        "minor": int(m.group(2)),
        "patch": int(m.group(3)) if m.group(3) else None,
    }
