"""nccl-tests (``all_reduce_perf`` and siblings): bandwidth table and summary.

Two table layouts exist: current nccl-tests print ``redop root time algbw busbw #wrong`` per
half, older ones had no ``root`` and an ``error`` column (max relative error, a float) instead
of ``#wrong``. Rows are recognised by shape, so launcher prefixes, interleaved NCCL/SHARP log
lines and author elisions between header and table do not matter.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines, to_float, to_int

WHAT = "nccl-tests"

_PARAMS = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)")
_COLUMNS = re.compile(r"^#\s*size\s+count\s+type\b.*\bbusbw\b")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)")
_VERSION = re.compile(r"\bNCCL version\s+(\d+\.\d+\.\d+)(\S*)")
_WORD = re.compile(r"^[a-z][a-z0-9_]*$")


def _row(tokens: list[str], old_layout: bool | None) -> dict[str, Any] | None:
    """One data row, or None if the tokens are not a result row."""
    if len(tokens) < 12 or not tokens[0].isdecimal() or not tokens[1].isdecimal():
        return None
    if not _WORD.match(tokens[2]) or not _WORD.match(tokens[3]):
        return None
    rest = tokens[4:]
    root = None
    if len(rest) == 9:
        root, rest = to_int(rest[0]), rest[1:]
    if len(rest) != 8:
        return None
    numbers = [to_float(v) for v in (rest[0], rest[1], rest[2], rest[4], rest[5], rest[6])]
    if all(n is None for n in numbers):
        return None
    t_oop, alg_oop, bus_oop, t_ip, alg_ip, bus_ip = numbers
    row: dict[str, Any] = {
        "size_bytes": int(tokens[0]),
        "count": int(tokens[1]),
        "type": tokens[2],
        "redop": tokens[3],
        "root": root,
        "time_oop_us": t_oop,
        "algbw_oop_gb_s": alg_oop,
        "busbw_oop_gb_s": bus_oop,
        "time_ip_us": t_ip,
        "algbw_ip_gb_s": alg_ip,
        "busbw_ip_gb_s": bus_ip,
    }
    old = old_layout if old_layout is not None else not (rest[3].isdecimal() or rest[3] == "N/A")
    if old:
        row.update(wrong_oop=None, wrong_ip=None, error_oop=to_float(rest[3]))
        row["error_ip"] = to_float(rest[7])
    else:
        row.update(wrong_oop=to_int(rest[3]), wrong_ip=to_int(rest[7]))
    return row


def parse(text: str) -> dict[str, Any]:
    """Rows, the average bus bandwidth line, rank count and wrong-element total."""
    params = avg = oob = version = None
    ranks: dict[int, str] = {}
    old_layout: bool | None = None
    signature = False
    rows: list[dict[str, Any]] = []
    for raw in text_lines(text):
        line = strip_prefix(raw).strip()
        if line.startswith("#"):
            if m := _PARAMS.match(line):
                params, signature = m, True
            elif m := _RANK.match(line):
                ranks.setdefault(int(m.group(1)), m.group(2))
            elif _COLUMNS.match(line):
                old_layout = "#wrong" not in line
                signature = True
            elif m := _AVG.match(line):
                avg, signature = to_float(m.group(1)), True
            elif m := _OOB.match(line):
                oob = int(m.group(1))
            continue
        if version is None and (m := _VERSION.search(line)):
            version = m.group(1)
        row = _row(line.split(), old_layout)
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
    return {
        "rows": rows,
        "avg_busbw_gb_s": avg,
        "ranks": len(ranks) if ranks else None,
        "wrong": wrong,
        "out_of_bounds": oob,
        "hosts": list(dict.fromkeys(ranks.values())),
        "nthreads": int(params.group(1)) if params else None,
        "ngpus_per_thread": int(params.group(2)) if params else None,
        "min_bytes": int(params.group(3)) if params else None,
        "max_bytes": int(params.group(4)) if params else None,
        "old_layout": old_layout,
        "nccl_version": version,
        "max_busbw_gb_s": max(
            (b for r in rows for b in (r["busbw_oop_gb_s"], r["busbw_ip_gb_s"]) if b is not None),
            default=None,
        ),
    }
