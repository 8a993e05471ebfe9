"""``dd``'s closing statistics: bytes copied, seconds and the throughput it printed.

Covers GNU coreutils ("... bytes (1.1 GB, 1.0 GiB) copied, 3.15 s, 340 MB/s", older without
the GiB part, decimal commas in some locales), BusyBox ("... copied, 3.15 seconds, 324.6MB/s")
and BSD/macOS ("... bytes transferred in 3.15 secs (340342516 bytes/sec)"). ``bytes_per_s`` is
the rate dd printed, converted with dd's own units (kB/MB/GB are powers of 1000). With
``status=progress`` the last "copied" line is the final one.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, size_to_bytes, strip_prefix, text_lines, to_float

WHAT = "dd"

_NUM = r"\d+(?:[.,]\d+)?"
_GNU = re.compile(
    rf"^\s*(?P<bytes>\d+)\s+bytes?\b.*?\bcopied,\s*(?P<secs>{_NUM})\s*(?:s|secs?|seconds?)\b"
    rf"(?:,\s*(?P<rate>{_NUM})\s*(?P<unit>[kKMGTP]?i?B)/s)?"
)
_BSD = re.compile(
    rf"^\s*(?P<bytes>\d+)\s+bytes transferred in\s+(?P<secs>{_NUM})\s*secs?"
    rf"(?:\s*\((?P<rate>\d+)\s*bytes/sec\))?"
)
_RECORDS = re.compile(r"^\s*(\d+\+\d+)\s+records\s+(in|out)\b")


def _float(value: str | None) -> float | None:
    return to_float(value.replace(",", ".")) if value else None


def parse(text: str) -> dict[str, Any]:
    """Totals from the last summary line, and the records in/out counts."""
    final: re.Match[str] | None = None
    records: dict[str, str] = {}
    for raw in text_lines(text):
        line = strip_prefix(raw)
        m = _GNU.match(line) or _BSD.match(line)
        if m:
            final = m
        elif r := _RECORDS.match(line):
            records[r.group(2)] = r.group(1)
    if final is None and not records:
        fail(WHAT, "no 'records in/out' or 'bytes ... copied' line found")
    rate: int | None = None
    if final is not None and final.group("rate"):
        unit = final.groupdict().get("unit") or "B"
        rate = size_to_bytes(final.group("rate"), unit)
    return {
        "bytes": int(final.group("bytes")) if final else None,
        "seconds": _float(final.group("secs")) if final else None,
        "bytes_per_s": rate,
        "records_in": records.get("in"),
        "records_out": records.get("out"),
    }
