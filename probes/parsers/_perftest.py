"""What ``ib_write_bw`` and ``ib_write_lat`` (and their read/send siblings) print in common.

perftest (linux-rdma/perftest) prints the same frame for every test: a dashed line, the title
("RDMA_Write BW Test"), a header of ``Key : value`` pairs two to a line ("Dual-port : OFF
<TAB><TAB> Device : mlx5_0"), the local/remote address lines, then a ``#bytes`` column header and
one data row per message size. The column header is the only reliable map of the data row:
it changed over the years (MB/sec, MiB/sec since 2025, Gb/sec with ``--report_gbits``; latency
tables with three, seven or two timing columns; ``#sl`` with QoS; per-port and CPU_Util columns),
so rows are read by the names of the header's columns, never by position alone.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import strip_prefix, text_lines, to_float, to_int, unquote

# The title line: "RDMA_Write BW Test", "Send Bidirectional BW Test", "RDMA_Read Latency Test",
# "Atomic FETCH_AND_ADD BW Test" (perftest_parameters.c, ctx_print_test_info).
_TITLE = re.compile(r"^\s*([A-Za-z_][A-Za-z_ ]*?\b(?:BW|Latency)\b[A-Za-z ]*?\bTest)\s*$")
# One "Key : value" pair of the header; two share a line, separated by TABs (or the spaces a
# terminal turned them into), so a value is one token.
_HEADER_KEYS = {
    "device": re.compile(r"\bDevice\s+:\s*(\S+)"),
    "qps": re.compile(r"\bNumber of qps\s*:\s*(\S+)"),
    "connection_type": re.compile(r"\bConnection type\s*:\s*(\S+)"),
    # "Mtu : 4096[B]" since mid-2013, "Mtu : 2048B" before
    "mtu": re.compile(r"\bMtu\s*:\s*(\d+)\s*(?:\[B\]|B\b)"),
    "link_type": re.compile(r"\bLink type\s*:\s*(\S+)"),
}
# A column name of the "#bytes" header: "#bytes", "BW peak[Gb/sec]", "99.9% percentile[usec]",
# "CPU_Util[%]", "tps average". Names are separated by two or more blanks, except the latency
# header's "#bytes #iterations".
_COLUMN = re.compile(r"#[A-Za-z_]+|(?:[\w.%]+ )*[\w.%]+\[[^\]]*\]|[A-Za-z_]+(?: [A-Za-z_]+)*")
_DATA_ROW = re.compile(r"^\s*\d+(?:\s+[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)+\s*$")
# What perftest prints before the run when it allocates GPU memory (--use_cuda).
_CUDA_MARK = re.compile(r"\binitializing CUDA\b", re.IGNORECASE)
_WARNING = re.compile(r"Conflicting CPU frequency|WARNING")


def columns(header: str) -> list[str]:
    """Column names of a ``#bytes`` header line, in printed order."""
    return _COLUMN.findall(header.strip())


def read(text: str) -> dict[str, Any]:
    """The frame shared by both kinds: title, header fields, warnings, raw table rows.

    ``tables`` is a list of (column names, [row tokens]) so each kind maps the names it knows;
    several tables occur when a log holds more than one run.
    """
    title: str | None = None
    fields: dict[str, str] = {}
    warnings: list[str] = []
    tables: list[tuple[list[str], list[list[str]]]] = []
    use_cuda = False
    current: tuple[list[str], list[list[str]]] | None = None
    for raw in text_lines(text):
        line = unquote(strip_prefix(raw)).replace("\t", "    ")
        stripped = line.strip()
        if not stripped:
            continue
        if _CUDA_MARK.search(stripped):
            use_cuda = True
        if _WARNING.search(stripped):
            warnings.append(stripped)
            continue
        if stripped.startswith("#bytes"):
            current = (columns(stripped), [])
            tables.append(current)
            continue
        if current is not None and _DATA_ROW.match(line):
            current[1].append(stripped.split())
            continue
        if set(stripped) == {"-"}:
            current = None
            continue
        if title is None:
            m = _TITLE.match(line)
            if m:
                title = " ".join(m.group(1).split())
                continue
        for key, pattern in _HEADER_KEYS.items():
            if key not in fields:
                m = pattern.search(line)
                if m:
                    fields[key] = m.group(1)
    return {
        "title": title,
        "fields": fields,
        "warnings": warnings,
        "tables": tables,
        "use_cuda": use_cuda,
    }


def header_facts(frame: dict[str, Any]) -> dict[str, Any]:
    """The contract's header keys, null where the header does not print them."""
    fields = frame["fields"]
    return {
        "test": frame["title"],
        "device": fields.get("device"),
        "link_type": fields.get("link_type"),
        "qps": to_int(fields.get("qps")),
        "connection_type": fields.get("connection_type"),
        "mtu_bytes": to_int(fields.get("mtu")),
        "use_cuda": frame["use_cuda"],
    }


def cell(row: list[str], names: list[str], name: str) -> str | None:
    """The token under column ``name``; None when the header has no such column."""
    if name not in names:
        return None
    index = names.index(name)
    return row[index] if index < len(row) else None


def number(row: list[str], names: list[str], name: str) -> float | None:
    """The float under column ``name`` (None when absent)."""
    return to_float(cell(row, names, name))
