"""Raw outputs in the store: the one place that knows how they are kept.

Each probe run's output is bounded and redacted (``redact.bound_redacted``: one pass over the
bytes that are kept), then kept once per content in ``raw_blobs`` under the SHA-256 of those
stored bytes; ``probe_runs.raw_hash`` points at it. So a homogeneous fleet's identical outputs
are one row, and the same output in tomorrow's walk adds nothing. Outputs of ``COMPRESS_AT``
bytes or more are zlib-compressed (text compresses 4-10x; below 1 KiB the saving is a few
hundred bytes and not worth the CPU). A store written before schema 8 kept the text in
``probe_runs.raw``; the migration moves it, and an older export imported or pooled still has
it there, so readers take either.

A ticket bundle (``diag bundle``) and the report need the output a finding came from: every
reader goes through ``raw_outputs``.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .base import Connection, insert_rows, sql_list

# Below this many bytes an output is kept as text (readable by `diag query`), at or above it
# compressed. zlib level 6 is zlib's own default balance of speed and size.
COMPRESS_AT = 1024
LEVEL = 6

_BLOB_COLUMNS = [("hash", "VARCHAR"), ("bytes", "INTEGER"), ("text", "VARCHAR"),
                 ("zlib", "BLOB")]


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


def blob(stored: str) -> tuple[str, list[Any]]:
    """The hash of *stored* (already bounded and redacted) and its ``raw_blobs`` row."""
    data = stored.encode("utf-8", "replace")
    digest = hashlib.sha256(data).hexdigest()
    if len(data) < COMPRESS_AT:
        return digest, [digest, len(data), stored, None]
    return digest, [digest, len(data), None, zlib.compress(data, LEVEL)]


def add_blobs(con: Connection, rows: Iterable[list[Any]]) -> None:
    """Insert the blob *rows* whose hash the store does not hold yet (inside the caller's
    write transaction, so two writers cannot both add one)."""
    fresh = {row[0]: row for row in rows}
    if not fresh:
        return
    held = con.execute("SELECT hash FROM raw_blobs WHERE hash IN (SELECT unnest(?))",
                       [list(fresh)]).fetchall()
    for (digest,) in held:
        fresh.pop(digest, None)
    insert_rows(con, "raw_blobs", _BLOB_COLUMNS, list(fresh.values()))


def decode(text: str | None, packed: bytes | None) -> str:
    """A blob's text from its two columns."""
    if text is not None:
        return text
    return zlib.decompress(packed or b"").decode("utf-8", "replace")


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
    # A hash names one content; pooled exports may hold it twice: any copy will do.
    rows = con.execute(f"""
        WITH runs AS (SELECT r.session_id, r.step_seq, r.host, r.probe, r.state, r.raw,
                             r.raw_hash, coalesce(r.raw_bytes, 0) AS raw_bytes
                      FROM probe_runs r {join}
                      WHERE {where} AND (r.raw IS NOT NULL OR r.raw_hash IS NOT NULL)),
             blobs AS (SELECT hash, any_value(text) AS text, any_value(zlib) AS zlib
                       FROM raw_blobs WHERE hash IN (SELECT raw_hash FROM runs)
                       GROUP BY hash)
        SELECT r.session_id, r.step_seq, r.host, r.probe, r.state, r.raw, b.text, b.zlib,
               r.raw_bytes
        FROM runs r LEFT JOIN blobs b ON b.hash = r.raw_hash
        WHERE r.raw IS NOT NULL OR b.hash IS NOT NULL
        ORDER BY r.session_id, r.step_seq, r.host, r.probe""", params).fetchall()
    return [RawOutput(str(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]),
                      str(r[5]) if r[5] is not None else decode(r[6], r[7]), int(r[8]))
            for r in rows]
