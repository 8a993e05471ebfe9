"""Schema version 10: what a person typed, redacted in stores written before diag redacted it.

Since issue 27 every text a person types — the symptom and title, ``incident close --cause``,
tags, the job, a question's answer and a conclusion's filled-in words — passes the redactor
when it is written. A store written by an older diag holds such text verbatim, and every
export, report, query and "similar past incident" of it would carry a pasted token on. This
step runs each of those columns through today's redactor once, in place, and rewrites only the
rows it changes. Probe output, facts and findings were redacted when written by every diag
(with the rules of its day) and are not scanned again here: they are most of a year's file,
and their raw outputs are keyed by the hash of their redacted bytes.
"""

from __future__ import annotations

import json
from typing import Any

from .base import Connection
from .redact import redact_data, redact_text

# (table, text columns, JSON columns, list-of-text columns): what a person typed, and the
# documents that carry it (a walk's state and each step's record hold its answers).
TYPED: tuple[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    ("incidents", ("title", "symptom", "root_cause", "job_id", "conclusion"), (), ("tags",)),
    ("sessions", ("conclusion", "outcome"), ("target", "walk_state"), ()),
    ("steps", ("answer", "because"), ("record",), ()),
    ("actions", ("command", "result"), (), ()),
)


def _json_redacted(text: str) -> str | None:
    """*text* (a JSON document) with its secrets hidden, or None when it has none."""
    try:
        value = json.loads(text)
    except ValueError:
        out = redact_text(text)
        return out if out != text else None
    clean = redact_data(value)
    return json.dumps(clean, ensure_ascii=False) if clean != value else None


def redact_typed(con: Connection, names: dict[str, str] | None = None) -> dict[str, int]:
    """Redact the typed columns of every row in place; returns rows changed per table.

    *names*: the table each of TYPED's is to be found as (a pool's copies), only those."""
    changed: dict[str, int] = {}
    for logical, texts, docs, lists in TYPED:
        if names is not None and logical not in names:
            continue
        table = names[logical] if names is not None else logical
        columns = [*texts, *docs, *lists]
        updates: list[list[Any]] = []
        cur = con.execute(f"SELECT rowid, {', '.join(columns)} FROM {table}")
        while batch := cur.fetchmany(10_000):
            for row in batch:
                values: dict[str, Any] = {}
                for name, value in zip(columns, row[1:], strict=True):
                    if value is None:
                        continue
                    if name in texts and isinstance(value, str):
                        out = redact_text(value)
                        if out != value:
                            values[name] = out
                    elif name in docs:
                        doc = _json_redacted(str(value))
                        if doc is not None:
                            values[name] = doc
                    elif name in lists:
                        items = [redact_text(v) if isinstance(v, str) else v for v in value]
                        if items != list(value):
                            values[name] = items
                if values:
                    updates.append([row[0], values])
        for rowid, values in updates:
            sets = ", ".join(f"{name} = ?" for name in values)
            con.execute(f"UPDATE {table} SET {sets} WHERE rowid = ?", [*values.values(), rowid])
        changed[logical] = len(updates)
    return changed
