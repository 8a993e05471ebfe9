"""``ioping``: storage request latency, the quick check behind "checkpoint writes stall".

Reads the summary (``N requests completed ...`` and ``min/avg/max/mdev = ...``) in both the
current per-value-unit form ("254.2 us / 334.5 us / ...") and the old shared-unit form
("0.2/0.3/0.5/0.1 ms"). ``requests`` is the completed count the statistics cover (warmup
excluded). Per-request lines are kept as extra detail; nothing is computed from them when the
summary is missing.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines, time_to_us, to_float

WHAT = "ioping"

_COMPLETED = re.compile(
    r"^\s*(\d+)\s+requests completed in\s+([\d.]+)\s*(ns|us|ms|s|min)\b(?P<rest>.*)$"
)
_GENERATED = re.compile(r"^\s*generated\s+(\d+)\s+requests\b")
_IOPS = re.compile(r"(?<![\d.])([\d.]+)\s*(k|M)?\s*iops\b")
_SUMMARY = re.compile(r"^\s*min/avg/max/mdev\s*=(.+)$")
_PART = re.compile(r"^([\d.]+)\s*(ns|us|ms|s|min)?$")
_REQUEST = re.compile(
    r"\brequest=(\d+)\s+time=([\d.]+)\s*(ns|us|ms|s|min)\b(?P<warmup>\s*\(warmup\))?"
)
_STATISTICS = re.compile(r"^\s*---.*\bioping statistics\b")


def _summary(spec: str) -> list[float | None] | None:
    parts = spec.split("/")
    if len(parts) != 4:
        return None
    matches = [_PART.match(p.strip()) for p in parts]
    if not all(matches):
        return None
    shared = matches[-1].group(2)  # type: ignore[union-attr]
    return [time_to_us(m.group(1), m.group(2) or shared or "") for m in matches if m]


def parse(text: str) -> dict[str, Any]:
    """Completed requests, avg/max latency (us), iops and per-request times."""
    requests = generated = iops = None
    total_us: float | None = None
    stats: list[float | None] | None = None
    per_request: list[dict[str, Any]] = []
    signature = False
    for raw in text_lines(text):
        line = strip_prefix(raw)
        if m := _COMPLETED.match(line):
            requests, total_us = int(m.group(1)), time_to_us(m.group(2), m.group(3))
            if i := _IOPS.search(m.group("rest")):
                scale = {"k": 1e3, "M": 1e6}.get(i.group(2) or "", 1.0)
                value = to_float(i.group(1))
                iops = round(value * scale, 3) if value is not None else None
            signature = True
        elif m := _GENERATED.match(line):
            generated = int(m.group(1))
        elif m := _SUMMARY.match(line):
            stats = _summary(m.group(1)) or stats
            signature = signature or stats is not None
        elif _STATISTICS.match(line):
            signature = True
        elif m := _REQUEST.search(line):
            per_request.append(
                {
                    "request": int(m.group(1)),
                    "time_us": time_to_us(m.group(2), m.group(3)),
                    "warmup": bool(m.group("warmup")),
                }
            )
    if not signature and not per_request:
        fail(WHAT, "no 'ioping statistics', 'min/avg/max/mdev' or 'request=N time=' line found")
    return {
        "requests": requests,
        "requests_generated": generated,
        "total_time_us": total_us,
        "iops": iops,
        "min_us": stats[0] if stats else None,
        "avg_us": stats[1] if stats else None,
        "max_us": stats[2] if stats else None,
        "mdev_us": stats[3] if stats else None,
        "request_times": per_request,
    }
