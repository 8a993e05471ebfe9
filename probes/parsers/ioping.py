"""``ioping``: storage request latency, the quick check behind "checkpoint writes stall".

Every output form ioping has printed (read from koct9i/ioping's ioping.c across its tags):

- the human summary. Since v0.8 numbers go through ``print_suffix``: a count or rate above a
  thousand prints scaled with an SI prefix *and a space* ("70.7 k requests completed",
  "2.99 k iops"), a time with its unit ("254.2 us", "9.00 s", "1.5 min", "2 hour"). v0.6/v0.7
  printed "%d requests completed in %.1f ms, %.0f iops" and one shared unit in
  "min/avg/max/mdev = 0.2/0.3/0.5/0.1 ms". v1.0 added "N KiB read" to the completed line and a
  "generated N requests in ..." line, prefixed by "N too fast, " / "N too slow, " when requests
  fell outside -min-time/-max-time;
- ``-B`` (batch): one raw line of numbers, 8 in v0.7-v0.9 (requests, total, iops, bytes/s,
  min, avg, max, mdev; times in us) and 10 since v1.0 (valid requests, total, iops, bytes/s,
  min, avg, max, mdev, all requests, run time; times in ns); with ``-p`` one line per period,
  the total last;
- ``-J`` (JSON, v1.2+): a list of request objects (``io``) and statistics objects (``stat``,
  times in ns), the total last.

``requests`` is the completed count the statistics cover (warmup excluded); a scaled count
("70.7 k") is what the output says, 70700. Per-request lines are kept as extra detail; nothing is
computed from them when the summary is missing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ._common import fail, strip_prefix, text_lines, time_to_us, to_float

WHAT = "ioping"

# print_suffix's int_suffix: "T", "G", "M", "k" (and "da", "P", "E" for parsing), after a space.
_SCALE = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "da": 10}
_COUNT = r"(\d+(?:\.\d+)?)(?:\s?(da|[kMGTPE])\b)?"
_TIME_UNIT = r"(ns|us|ms|s|min|hour|day)"
_COMPLETED = re.compile(
    rf"^\s*{_COUNT}\s+requests completed in\s+([\d.]+)\s*{_TIME_UNIT}\b(?P<rest>.*)$"
)
_GENERATED = re.compile(rf"(?:^|,\s*)generated\s+{_COUNT}\s+requests\b")
_SLOW_FAST = re.compile(rf"{_COUNT}\s+too (fast|slow)\b")
_IOPS = re.compile(rf"(?<![\d.]){_COUNT}\s*iops\b")
_SUMMARY = re.compile(r"^\s*min/avg/max/mdev\s*=(.+)$")
_PART = re.compile(rf"^([\d.]+)\s*{_TIME_UNIT}?$")
_REQUEST = re.compile(
    rf"\brequest=(\d+)\s+time=([\d.]+)\s*{_TIME_UNIT}\b(?:\s*\((?P<notice>[a-z ]+)\))?"
)
_STATISTICS = re.compile(r"^\s*---.*\bioping statistics\b")
_BATCH = re.compile(r"^\s*\d+(?: \d+){7}(?: \d+ \d+)?\s*$")  # -B: 8 (v0.7-0.9) or 10 fields


def _count(number: str, prefix: str | None) -> int | None:
    value = to_float(number)
    return None if value is None else round(value * _SCALE[prefix or ""])


def _summary(spec: str) -> list[float | None] | None:
    parts = spec.split("/")
    if len(parts) != 4:
        return None
    matches = [_PART.match(p.strip()) for p in parts]
    if not all(matches):
        return None
    shared = matches[-1].group(2)  # type: ignore[union-attr]
    return [time_to_us(m.group(1), m.group(2) or shared or "") for m in matches if m]


def _result(requests: int | None = None, stats: Sequence[float | None] | None = None,
            **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"requests": requests, "requests_generated": None, "total_time_us": None,
            "iops": None, "too_fast": None, "too_slow": None, "format": "text",
            "request_times": []}
    base.update(extra)
    base.update(min_us=stats[0] if stats else None, avg_us=stats[1] if stats else None,
                max_us=stats[2] if stats else None, mdev_us=stats[3] if stats else None)
    return base


def _batch(line: str) -> dict[str, Any]:
    """The -B raw line: times in us before v1.0 (8 fields), in ns since (10 fields)."""
    fields = [int(v) for v in line.split()]
    ns = len(fields) == 10
    scale = 1e-3 if ns else 1.0
    times = [round(v * scale, 6) for v in (fields[1], *fields[4:8])]
    return _result(fields[0], times[1:], total_time_us=times[0], iops=float(fields[2]),
                   requests_generated=fields[8] if ns else None, format="batch")


def _json(text: str) -> dict[str, Any] | None:
    """-J: the last statistics object of the list (the total); None if not ioping's JSON."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    items = data if isinstance(data, list) else [data]
    stats = [d for d in items if isinstance(d, dict) and isinstance(d.get("stat"), dict)]
    requests = [d["io"] for d in items if isinstance(d, dict) and isinstance(d.get("io"), dict)]
    if not stats and not requests:
        return None
    per_request = [{"request": r.get("request"), "time_us": _ns(r.get("time")),
                    "warmup": r.get("notice") == "warmup"} for r in requests]
    if not stats:
        return _result(request_times=per_request, format="json")
    stat = stats[-1]["stat"]
    load_raw = stats[-1].get("load")
    load: dict[str, Any] = load_raw if isinstance(load_raw, dict) else {}
    count = stat.get("count")
    return _result(count if isinstance(count, int) else None,
                   [_ns(stat.get(k)) for k in ("min", "avg", "max", "mdev")],
                   total_time_us=_ns(stat.get("time")), iops=_num(stat.get("iops")),
                   requests_generated=load.get("count") if isinstance(load.get("count"), int)
                   else None, request_times=per_request, format="json")


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _ns(value: Any) -> float | None:
    number = _num(value)
    return None if number is None else round(number / 1000, 6)


def parse(text: str) -> dict[str, Any]:
    """Completed requests, avg/max latency (us), iops and per-request times."""
    if text.lstrip().startswith(("[", "{")) and (found := _json(text.strip())) is not None:
        return found
    requests = generated = too_fast = too_slow = None
    iops: float | None = None
    total_us: float | None = None
    stats: list[float | None] | None = None
    per_request: list[dict[str, Any]] = []
    batch: dict[str, Any] | None = None
    signature = False
    for raw in text_lines(text):
        line = strip_prefix(raw)
        if m := _COMPLETED.match(line):
            requests = _count(m.group(1), m.group(2))
            total_us = time_to_us(m.group(3), m.group(4))
            if i := _IOPS.search(m.group("rest")):
                value = _count(i.group(1), i.group(2)) if i.group(2) else to_float(i.group(1))
                iops = float(value) if value is not None else None
            signature = True
        elif m := _GENERATED.search(line):
            generated = _count(m.group(1), m.group(2))
            for sf in _SLOW_FAST.finditer(line[: m.start()]):
                if sf.group(3) == "fast":
                    too_fast = _count(sf.group(1), sf.group(2))
                else:
                    too_slow = _count(sf.group(1), sf.group(2))
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
                    "warmup": m.group("notice") == "warmup",
                }
            )
        elif _BATCH.match(line):
            batch = _batch(line)  # with -p, one per period: the total is the last
    if batch is not None and not signature:
        batch["request_times"] = per_request
        return batch
    if not signature and not per_request:
        fail(WHAT, "no 'ioping statistics', 'min/avg/max/mdev' or 'request=N time=' line found")
    return _result(requests, stats, requests_generated=generated, total_time_us=total_us,
                   iops=iops, too_fast=too_fast, too_slow=too_slow, request_times=per_request)
