"""``/proc/PID/limits``: a process's resource limits (soft and hard), as the kernel prints them.

The kernel (fs/proc/base.c, ``proc_pid_limits``) prints a header ``Limit  Soft Limit  Hard
Limit  Units`` and one row per limit: the name padded to 25 columns, soft and hard padded to
20 (``unlimited`` for RLIM_INFINITY), the unit padded to 10 (none for the nice and realtime
priorities, so those rows end after the hard limit; the padding leaves trailing spaces, which
pasted copies often lose). The names have been stable since 2.6.24: ``Max cpu time``, ``Max
file size``, ``Max data size``, ``Max stack size``, ``Max core file size``, ``Max resident
set``, ``Max processes``, ``Max open files``, ``Max locked memory``, ``Max address space``,
``Max file locks``, ``Max pending signals``, ``Max msgqueue size``, ``Max nice priority``,
``Max realtime priority``, ``Max realtime timeout``.

Each limit is keyed by its name in snake case (``max_locked_memory``): ``soft`` and ``hard``
are integers, or null when ``unlimited``; ``soft_unlimited`` / ``hard_unlimited`` say which, so
"unlimited" is never mistaken for "unknown"; ``units`` as printed (null when none).
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, text_lines

WHAT = "/proc/PID/limits"

_HEADER = re.compile(r"^\s*Limit\s+Soft Limit\s+Hard Limit\s+Units\s*$")
_ROW = re.compile(r"^\s*(?P<name>Max [a-z ]+?)\s{2,}(?P<soft>unlimited|\d+)\s+"
                  r"(?P<hard>unlimited|\d+)(?:\s+(?P<units>[a-z]+))?\s*$")


def _value(token: str) -> int | None:
    return None if token == "unlimited" else int(token)


def parse(text: str) -> dict[str, Any]:
    limits: dict[str, dict[str, Any]] = {}
    header = False
    for line in text_lines(text):
        if _HEADER.match(line):
            header = True
            continue
        m = _ROW.match(line)
        if not m:
            continue
        key = m.group("name").strip().lower().replace(" ", "_")
        limits[key] = {"soft": _value(m.group("soft")), "hard": _value(m.group("hard")),
                       "soft_unlimited": m.group("soft") == "unlimited",
                       "hard_unlimited": m.group("hard") == "unlimited",
                       "units": m.group("units")}
    if not limits:
        fail(WHAT, "no 'Max ...' limit rows" + ("" if header else " and no header"))
    return {"limits": limits}
