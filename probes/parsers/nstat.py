"""``nstat`` (iproute2): kernel SNMP counters by MIB name, ``#kernel`` banner first.

nstat hides counters that are zero (unless ``-z``), so an absent ``TcpRetransSegs`` means
"not printed", reported as null rather than 0. ``nstat -j`` JSON is accepted as well.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._common import fail, strip_prefix, text_lines
from ._snmp import summary

WHAT = "nstat"

_BANNER = re.compile(r"^\s*#\s*kernel\s*$")
_ROW = re.compile(r"^\s*([A-Z][A-Za-z0-9]*)\s+(\d+)(?:\s+(\d+(?:\.\d+)?))?\s*$")


def _from_json(text: str) -> dict[str, int] | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    kernel = doc.get("kernel") if isinstance(doc, dict) else None
    if not isinstance(kernel, dict):
        return None
    return {k: v for k, v in kernel.items() if isinstance(v, int) and not isinstance(v, bool)}


def parse(text: str) -> dict[str, Any]:
    """Counters by name; the rate column, when printed, is kept separately."""
    if text.lstrip().startswith("{") and (counters_json := _from_json(text)) is not None:
        return {**summary(counters_json), "counters": counters_json, "rates": {}}
    banner = False
    counters: dict[str, int] = {}
    rates: dict[str, float] = {}
    other = 0
    for raw in text_lines(text):
        line = strip_prefix(raw)
        if not line.strip():
            continue
        if _BANNER.match(line):
            banner = True
        elif m := _ROW.match(line):
            counters[m.group(1)] = int(m.group(2))
            if m.group(3) is not None:
                rates[m.group(1)] = float(m.group(3))
        else:
            other += 1
    if not banner and (not counters or other > len(counters) // 4):
        fail(WHAT, "no '#kernel' banner and the lines are not 'Name value rate' rows")
    return {**summary(counters), "counters": counters, "rates": rates}
