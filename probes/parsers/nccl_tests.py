"""nccl-tests (``all_reduce_perf`` and siblings): bandwidth table, summary and failures.

The table's shape changed across nccl-tests versions (read from NVIDIA/nccl-tests' own
printf formats, src/common.cu and src/util.cu):

- 2017 (v1): ``size count type op time(ms) algbw busbw res`` per half, the summary lines
  without a leading ``#`` (`` Out of bounds values : 0 OK``), failures as ``Cuda failure`` /
  ``NCCL failure``;
- 2019 (NCCL 2.4 resync) to mid-2022: time in us, an ``error`` column (max relative error,
  ``%5.0le``: ``4e-07``) instead of ``#wrong``; all_gather rows have no redop cell, broadcast
  rows a root cell, all_reduce rows neither;
- NCCL 2.13 resync (Aug 2022) on: ``size count type redop root`` then per half ``time algbw
  busbw #wrong``; ``#wrong`` is ``%5g``/``%6g`` of a count, so from a million it prints in
  exponent form (``1.04858e+06``); ``N/A`` with ``-c 0``; all_gather's redop cell was blank
  until Sep 2022 ("none" since);
- 2.17 on: ``# nccl-tests version ...`` and ``# Collective test starting`` lines; times and
  bandwidths fall back to ``%.1e`` when they do not fit their column; ``-S 1`` appends a
  ``YYYY-MM-DD HH:MM:SS`` timestamp to each row; ``-I 1`` (2.19) adds ``i_min i_max i_p99
  i_cv%`` to each half.

Rows are recognised by shape, so launcher prefixes, interleaved NCCL/SHARP log lines and
author elisions between header and table do not matter. ``completed``, ``test_failures`` and
``nccl_warns`` tell an aborted run (failure lines, no summary) from a finished one.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines, to_float

WHAT = "nccl-tests"

_PARAMS = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)")
_COLUMNS = re.compile(r"^#\s*(?:size|bytes)\s+(?:count|N)\s+type\b.*\bbusbw\b")
# The summary: "# Avg bus bandwidth    : 15.0709 " (2019 on), " Avg bus bandwidth : ..." (2017)
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)")
_VERSION = re.compile(r"\bNCCL version\s+(\d+\.\d+\.\d+)(\S*)")
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)")
_WORD = re.compile(r"^[a-z][a-z0-9_]*$")
_ROOT = re.compile(r"^-?\d{1,6}$")
_STAMP = re.compile(r"\s+\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\s*$")  # -S 1
# A #wrong cell: "%g" of a count ("0", "96", "1.04858e+06", "1e+06") or N/A (-c 0).
_WRONG = re.compile(r"^(?:\d+|\d(?:\.\d+)?e\+\d+|N/A)$")
# An old "error" cell: "%5.0le" of a relative error ("4e-07", "0e+00"), never a count.
_ERROR = re.compile(r"^\d(?:\.\d+)?e[+-]\d+$")
_POSITIVE_EXP = re.compile(r"^\d(?:\.\d+)?e\+(\d+)$")
# What the contract calls a failure line (common.h's CUDACHECK / NCCLCHECK / TESTCHECK)...
_FAILURE_KEYS = ("Test NCCL failure", "Test CUDA failure", "Test failure")
# ... and what else says a run went wrong: 2017's "Cuda failure"/"NCCL failure", the timeout.
_OTHER_FAILURE = re.compile(r"^(?:Cuda failure|NCCL failure) \S+:\d+|: Test timeout \(")
_WARN = "NCCL WARN "


def _wrong(cell: str) -> int | None:
    """A #wrong cell as an int: "1.04858e+06" is 1048580 (what %g kept), N/A is None."""
    if cell.isdecimal():
        return int(cell)
    value = to_float(cell) if _WRONG.match(cell) else None
    return round(value) if value is not None else None


class _Layout:
    """What the column header says about the rows below it."""

    def __init__(self, header: str | None = None) -> None:
        self.known = header is not None
        text = header or ""
        self.old = self.known and "#wrong" not in text  # "error" / "res" columns
        self.per_iter = "i_min" in text  # -I 1: eight cells per half
        self.halves = max(1, text.count("busbw")) if self.known else 2

    @property
    def width(self) -> int:
        return 8 if self.per_iter else 4


def _row(line: str, layout: _Layout) -> dict[str, Any] | None:
    """One data row, or None if the line is not a result row."""
    line = _STAMP.sub("", line)
    tokens = line.split()
    if len(tokens) < 7 or not tokens[0].isdecimal() or not tokens[1].isdecimal():
        return None
    if not _WORD.match(tokens[2]):
        return None
    rest = tokens[3:]
    redop = None
    if rest and _WORD.match(rest[0]):
        redop, rest = rest[0], rest[1:]
    width = layout.width
    if not layout.known and len(rest) in (16, 17):
        width = 8  # per-iteration columns, header not seen
    root = None
    if len(rest) % width == 1 and _ROOT.match(rest[0]):
        root, rest = int(rest[0]), rest[1:]
    if len(rest) not in (width, 2 * width):
        return None
    if not all(to_float(v) is not None or v == "N/A" for v in rest):
        return None
    halves = [rest[i:i + width] for i in range(0, len(rest), width)]
    if len(halves) == 1:
        halves.append([])
    oop, ip = halves
    old = layout.old if layout.known else any(
        _ERROR.match(h[3]) and not _wrong_like(h[3]) for h in halves if h)
    row: dict[str, Any] = {"size_bytes": int(tokens[0]), "count": int(tokens[1]),
                           "type": tokens[2], "redop": redop, "root": root}
    for name, half in (("oop", oop), ("ip", ip)):
        cell = half[3] if half else None
        row[f"time_{name}_us"] = to_float(half[0]) if half else None
        row[f"algbw_{name}_gb_s"] = to_float(half[1]) if half else None
        row[f"busbw_{name}_gb_s"] = to_float(half[2]) if half else None
        row[f"wrong_{name}"] = None if old or cell is None else _wrong(cell)
        if old:
            row[f"error_{name}"] = to_float(cell)
    if all(row[k] is None for k in ("time_oop_us", "busbw_oop_gb_s", "time_ip_us",
                                    "busbw_ip_gb_s")):
        return None
    return row


def _wrong_like(cell: str) -> bool:
    """A cell in exponent form that can only be a #wrong count (a positive exponent of at
    least 6: %g switches to it at a million), not a relative error (at most ~1)."""
    m = _POSITIVE_EXP.match(cell)
    return m is not None and int(m.group(1)) >= 6


def parse(text: str) -> dict[str, Any]:
    """Rows, the summary lines, ranks, and what says the run failed or was cut short."""
    params = avg = oob = version = tests_version = None
    ranks: dict[int, str] = {}
    layout = _Layout()
    seen_header = signature = False
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    other_failures: list[str] = []
    warns: list[str] = []
    for raw in text_lines(text):
        line = strip_prefix(raw).strip()
        if _WARN in line:
            warns.append(line.split(_WARN, 1)[1])
            continue
        if any(key in line for key in _FAILURE_KEYS):
            failures.append(line)
            continue
        if _OTHER_FAILURE.search(line):
            other_failures.append(line)
            continue
        if m := _AVG.match(line):
            avg, signature = to_float(m.group(1)), True
            continue
        if m := _OOB.match(line):
            oob, signature = int(m.group(1)), True
            continue
        if line.startswith("#"):
            if m := _PARAMS.match(line):
                params, signature = m, True
            elif m := _RANK.match(line):
                ranks.setdefault(int(m.group(1)), m.group(2))
            elif _COLUMNS.match(line):
                layout, seen_header, signature = _Layout(line), True, True
            elif m := _TESTS_VERSION.match(line):
                tests_version, signature = m.group(1), True
            continue
        if version is None and (m := _VERSION.search(line)):
            version = m.group(1)
        row = _row(line, layout)
        if row:
            rows.append(row)
    if not signature and not rows:
        fail(WHAT, "no '# nThread' header, result table or 'Avg bus bandwidth' line found")
    wrong_cells = [r[k] for r in rows for k in ("wrong_oop", "wrong_ip") if r[k] is not None]
    if oob is not None:
        wrong: int | None = oob
    elif wrong_cells:
        wrong = sum(wrong_cells)
    else:
        wrong = None
    old_layout = layout.old if seen_header else (
        any("error_oop" in r for r in rows) if rows else None)
    return {
        "rows": rows,
        "avg_busbw_gb_s": avg,
        "ranks": len(ranks) if ranks else None,
        "wrong": wrong,
        "out_of_bounds": oob,
        "completed": avg is not None,
        "test_failures": failures,
        "nccl_warns": warns,
        "other_failures": other_failures,
        "hosts": list(dict.fromkeys(ranks.values())),
        "nthreads": int(params.group(1)) if params else None,
        "ngpus_per_thread": int(params.group(2)) if params else None,
        "min_bytes": int(params.group(3)) if params else None,
        "max_bytes": int(params.group(4)) if params else None,
        "old_layout": old_layout,
        "per_iteration": layout.per_iter,
        "nccl_version": version,
        "nccl_tests_version": tests_version,
        "max_busbw_gb_s": max(
            (b for r in rows for b in (r["busbw_oop_gb_s"], r["busbw_ip_gb_s"]) if b is not None),
            default=None,
        ),
    }
