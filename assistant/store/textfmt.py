"""Plain aligned text for people: tables, times and durations, in an 80-column terminal.

Deliberately small (no rich, no tabulate): the on-call engineer reads this over SSH at 3 a.m.,
and scripts use ``--json``. Missing values print as ``-``; long cells are cut with ``…`` so a
row stays one line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

Column = tuple[str, str] | tuple[str, str, int]  # (key, header[, max width])


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, datetime):
        return when(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ",".join(cell(v) for v in value) or "-"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value).replace("\n", " ")


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column],
          indent: str = "") -> str:
    """Rows as aligned columns under upper-case headers; numbers right-aligned."""
    cols = [(c[0], c[1], c[2] if len(c) > 2 else 60) for c in columns]
    texts = [[_cut(cell(row.get(key)), width) for key, _, width in cols] for row in rows]
    widths = [max([len(header)] + [len(t[i]) for t in texts])
              for i, (_, header, _) in enumerate(cols)]
    numeric = [all(_is_number(row.get(key)) for row in rows) and bool(rows)
               for key, _, _ in cols]
    lines = [indent + "  ".join(h.upper().ljust(w) if not n else h.upper().rjust(w)
                                for (_, h, _), w, n in zip(cols, widths, numeric, strict=True))
             .rstrip()]
    for t in texts:
        lines.append(indent + "  ".join(v.rjust(w) if n else v.ljust(w)
                                        for v, w, n in zip(t, widths, numeric, strict=True))
                     .rstrip())
    return "\n".join(lines)


def when(value: datetime | None) -> str:
    """UTC timestamps as 'YYYY-MM-DD HH:MM' (the store keeps UTC; so does this)."""
    return value.strftime("%Y-%m-%d %H:%M") if value else "-"


def duration(seconds: float | None) -> str:
    """'45s', '12m 30s', '3h 05m', '2d 04h'."""
    if seconds is None:
        return "-"
    s = round(float(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.1f}%"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def culprit(row: dict[str, Any], limit: int = 3) -> str:
    """What an incident is in a list: the hosts it accuses (findings of severity error or
    worse) before its root cause, else its title — not only "hang on node[0001-0008] (8)"."""
    from probes.hostfold import fold_hosts

    what = row.get("root_cause") or row.get("title") or ""
    accused = list(row.get("accused") or [])
    if not accused:
        return str(what)
    named = fold_hosts(accused) if len(accused) > limit else ", ".join(accused)
    return f"{named}: {what}"
