"""``ib_write_lat`` / ``ib_read_lat`` / ``ib_send_lat`` (perftest): RDMA round-trip latency.

Columns are matched by their header names because the table changed across perftest releases:
2013 printed t_min / t_max / t_typical only, later releases added t_avg, t_stdev and the 99 % /
99.9 % percentiles, and duration mode (``-D``) prints only t_avg with "tps average". A column
the header lacks is null, never borrowed from a neighbour.
"""

from __future__ import annotations

from typing import Any

from . import _perftest
from ._common import fail, to_int

WHAT = "ib_write_lat (perftest latency)"

_COLUMNS = {
    "t_min_us": "t_min[usec]",
    "t_max_us": "t_max[usec]",
    "t_typical_us": "t_typical[usec]",
    "t_avg_us": "t_avg[usec]",
    "t_stdev_us": "t_stdev[usec]",
    "p99_us": "99% percentile[usec]",
    "p999_us": "99.9% percentile[usec]",
}


def _is_latency_table(names: list[str]) -> bool:
    return any(name.startswith("t_") for name in names)


def parse(text: str) -> dict[str, Any]:
    """Header facts and one row per message size, times in microseconds."""
    frame = _perftest.read(text)
    tables = [(names, rows) for names, rows in frame["tables"] if _is_latency_table(names)]
    if not tables:
        if frame["tables"]:
            fail(WHAT, "the #bytes table has no t_...[usec] columns (a bandwidth test?)")
        fail(WHAT, "no \"#bytes #iterations t_...[usec]\" result table found")
    rows: list[dict[str, Any]] = []
    for names, raw_rows in tables:
        for row in raw_rows:
            size = to_int(_perftest.cell(row, names, "#bytes"))
            if size is None:
                continue
            entry: dict[str, Any] = {
                "size_bytes": size,
                "iterations": to_int(_perftest.cell(row, names, "#iterations")),
            }
            for key, column in _COLUMNS.items():
                entry[key] = _perftest.number(row, names, column)
            entry["tps_average"] = _perftest.number(row, names, "tps average")
            rows.append(entry)
    facts = _perftest.header_facts(frame)
    return {
        "test": facts["test"],
        "device": facts["device"],
        "link_type": facts["link_type"],
        "qps": facts["qps"],
        "connection_type": facts["connection_type"],
        "mtu_bytes": facts["mtu_bytes"],
        "use_cuda": facts["use_cuda"],
        "rows": rows,
        "warnings": frame["warnings"],
    }
