"""``ib_write_bw`` / ``ib_read_bw`` / ``ib_send_bw`` (perftest): per-HCA RDMA bandwidth.

The acceptance walk compares the average bandwidth of each message size with the link rate, so
every row is returned in one unit whatever perftest printed: Gb/s. perftest's "MB/sec" (and the
"MiB/sec" of 2025+ releases) is 2^20 bytes per second (perftest_parameters.h prints bandwidth
as bytes / 0x100000), so MB/sec x 1048576 x 8 / 1e9 = MB/sec x 0.008388608 Gb/s; with
``--report_gbits`` the printed Gb/sec is kept as is. ``report_unit`` says which was printed.
"""

from __future__ import annotations

import re
from typing import Any

from . import _perftest
from ._common import fail, to_int

WHAT = "ib_write_bw (perftest bandwidth)"

# perftest MB and MiB are both 2^20 bytes: MB/sec x 2^20 x 8 / 1e9 = Gb/s.
MB_PER_SEC_TO_GBIT_S = 1048576 * 8 / 1e9  # 0.008388608
_PEAK = re.compile(r"^BW peak\[([^\]]+)\]$")
_AVERAGE = re.compile(r"^BW average\[([^\]]+)\]$")


def _unit(names: list[str]) -> str | None:
    """The unit printed in "BW average[...]" (or "BW peak[...]")."""
    for name in names:
        m = _AVERAGE.match(name) or _PEAK.match(name)
        if m:
            return m.group(1)
    return None


def _to_gbit_s(value: float | None, unit: str | None) -> float | None:
    if value is None or unit is None:
        return None
    if unit.lower() in {"gb/sec", "gbit/sec", "gb/s"}:
        return value
    if unit.lower() in {"mb/sec", "mib/sec"}:
        return value * MB_PER_SEC_TO_GBIT_S
    return None


def _rows(names: list[str], raw_rows: list[list[str]], unit: str | None) -> list[dict[str, Any]]:
    peak_name = next((n for n in names if _PEAK.match(n)), "")
    average_name = next((n for n in names if _AVERAGE.match(n)), "")
    rows = []
    for row in raw_rows:
        size = to_int(_perftest.cell(row, names, "#bytes"))
        if size is None:
            continue
        rows.append(
            {
                "size_bytes": size,
                "iterations": to_int(_perftest.cell(row, names, "#iterations")),
                "bw_peak_gbit_s": _to_gbit_s(_perftest.number(row, names, peak_name), unit),
                "bw_avg_gbit_s": _to_gbit_s(_perftest.number(row, names, average_name), unit),
                "msg_rate_mpps": _perftest.number(row, names, "MsgRate[Mpps]"),
                "sl": to_int(_perftest.cell(row, names, "#sl")),
            }
        )
    return rows


def parse(text: str) -> dict[str, Any]:
    """Header facts and one row per message size, bandwidth in Gb/s."""
    frame = _perftest.read(text)
    tables = [(names, rows) for names, rows in frame["tables"] if _unit(names) is not None]
    if not tables:
        if frame["tables"]:
            fail(WHAT, "the #bytes table has no \"BW average[...]\" column (a latency test?)")
        fail(WHAT, "no \"#bytes ... BW peak ... BW average\" result table found")
    if frame["title"] is not None and "Latency" in frame["title"]:
        fail(WHAT, f"this is a latency test ({frame['title']}); parse it as ib-write-lat")
    unit = _unit(tables[0][0])
    rows: list[dict[str, Any]] = []
    for names, raw_rows in tables:
        rows.extend(_rows(names, raw_rows, _unit(names)))
    return {
        **_perftest.header_facts(frame),
        "report_unit": unit,
        "rows": rows,
        "warnings": frame["warnings"],
    }
