"""Reading the raw outputs back: the one place that knows how ``probe_runs`` keeps them.

A ticket bundle (``diag bundle``) and the report need the output a finding came from. How the
store keeps raw output is its own business — today a redacted, bounded text column per probe
run; tomorrow perhaps one copy per distinct output, compressed — so every reader goes through
``raw_outputs`` and only this function changes with the storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .base import Connection, sql_list


@dataclass(frozen=True)
class RawOutput:
    """One probe's output on one host in one step, as stored (already redacted)."""

    session: str
    step_seq: int
    host: str
    probe: str
    state: str
    text: str
    raw_bytes: int  # size before it was bounded


def raw_outputs(con: Connection, sessions: Sequence[str],
                keys: Sequence[tuple[str, int, str, str]] | None = None) -> list[RawOutput]:
    """The stored outputs of *sessions*, in (session, step, host, probe) order; with *keys*
    only those (session, step_seq, host, probe). Runs without output are left out."""
    where = f"r.session_id IN ({sql_list(list(sessions))})"
    join, params = "", []
    if keys is not None:
        if not keys:
            return []
        join = ("SEMI JOIN (SELECT unnest(?::STRUCT(s VARCHAR, q INTEGER, h VARCHAR, "
                "p VARCHAR)[], recursive := true)) k ON k.s = r.session_id AND "
                "k.q = r.step_seq AND k.h = r.host AND k.p = r.probe")
        params.append([{"s": s, "q": q, "h": h, "p": p} for s, q, h, p in keys])
    rows = con.execute(f"""
        SELECT r.session_id, r.step_seq, r.host, r.probe, r.state, r.raw,
               coalesce(r.raw_bytes, 0)
        FROM probe_runs r {join} WHERE {where} AND r.raw IS NOT NULL
        ORDER BY r.session_id, r.step_seq, r.host, r.probe""", params).fetchall()
    return [RawOutput(str(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]),
                      int(r[6])) for r in rows]
