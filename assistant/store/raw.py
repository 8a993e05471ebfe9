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

A hash is a promise about content, and a blob may come from elsewhere (``diag import``, a pool
of exports read with ``--from``): a row under the hash of an output this store will record
later would otherwise be shown as that output, since a writer keeps the row a hash already
has. So nothing decompressed is trusted: ``inflate`` stops at ``MAX_BLOB_BYTES`` (a few hundred
bytes of zlib can claim gigabytes), and ``check`` re-hashes what a row holds. The import
refuses a row that fails (``importing``); a reader shows a one-line note in its place.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .base import Connection, insert_rows, sql_list
from .redact import RAW_LIMIT

# Below this many bytes an output is kept as text (readable by `diag query`), at or above it
# compressed. zlib level 6 is zlib's own default balance of speed and size.
COMPRESS_AT = 1024
LEVEL = 6
# The most bytes one stored output may take. The store keeps RAW_LIMIT characters of an output
# (``bound_redacted``: its head and tail) — at most 4 UTF-8 bytes each — and redaction may
# lengthen a short secret ('-pX' -> '-p[REDACTED]'), so twice that is room no real output
# reaches; ``blob`` holds every writer to it, and every reader refuses more.
MAX_BLOB_BYTES = 8 * RAW_LIMIT

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
    if len(data) > MAX_BLOB_BYTES:  # never in practice: the bound readers rely on, kept here
        half = MAX_BLOB_BYTES // 2 - 64
        stored = (f"{data[:half].decode('utf-8', 'ignore')}\n[... {len(data) - 2 * half} "
                  f"bytes cut by diag ...]\n{data[-half:].decode('utf-8', 'ignore')}")
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


class BlobError(ValueError):
    """A ``raw_blobs`` row that is not what it says: too large, not zlib, or another hash."""


def inflate(packed: bytes, limit: int = MAX_BLOB_BYTES) -> bytes:
    """*packed* decompressed, refused (BlobError) past *limit* bytes: zlib inflates up to
    ~1000x, so a 150 KB export could otherwise hold gigabytes. At most *limit* + 1 bytes are
    ever produced."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(packed, limit + 1)
    except zlib.error as exc:
        raise BlobError(f"its zlib column is not zlib data ({exc})") from None
    if len(data) > limit:
        raise BlobError(f"it inflates to more than {limit} bytes, larger than any output "
                        "diag keeps")
    if not inflater.eof:
        raise BlobError("its zlib column is cut short (an incomplete stream)")
    return data


def check(digest: str, size: int | None, text: str | None, packed: bytes | None) -> str:
    """The text of one ``raw_blobs`` row, after checking it is what its key says: at most
    MAX_BLOB_BYTES, *size* bytes, and hashing to *digest*. Raises BlobError saying what is
    wrong."""
    if text is not None:
        data = text.encode("utf-8", "replace")
        if len(data) > MAX_BLOB_BYTES:
            raise BlobError(f"its text is {len(data)} bytes, larger than any output diag "
                            f"keeps ({MAX_BLOB_BYTES})")
    elif packed is not None:
        data = inflate(packed)
    else:
        raise BlobError("it holds neither text nor zlib")
    actual = hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise BlobError(f"its content does not match its hash (it hashes to {actual})")
    if size is not None and size != len(data):
        raise BlobError(f"it says {size} bytes and holds {len(data)}")
    return text if text is not None else data.decode("utf-8", "replace")


def decode(digest: str, size: int | None, text: str | None, packed: bytes | None) -> str:
    """A blob's text for a reader: checked (``check``), else a one-line note of why it is not
    shown — one damaged or foreign row must not stop a report or a bundle."""
    try:
        return check(digest, size, text, packed)
    except BlobError as exc:
        return f"[diag: stored output sha256 {digest} not shown: {exc}]\n"


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
    # A hash names one content; pooled exports may hold it twice: one copy, whole, is checked.
    rows = con.execute(f"""
        WITH runs AS (SELECT r.session_id, r.step_seq, r.host, r.probe, r.state, r.raw,
                             r.raw_hash, coalesce(r.raw_bytes, 0) AS raw_bytes
                      FROM probe_runs r {join}
                      WHERE {where} AND (r.raw IS NOT NULL OR r.raw_hash IS NOT NULL)),
             blobs AS (SELECT hash, bytes, text, zlib FROM raw_blobs
                       WHERE hash IN (SELECT raw_hash FROM runs)
                       QUALIFY row_number() OVER (PARTITION BY hash) = 1)
        SELECT r.session_id, r.step_seq, r.host, r.probe, r.state,
               CASE WHEN strlen(r.raw) > {MAX_BLOB_BYTES}
                    THEN '[diag: stored output not shown: larger than any output diag keeps]'
                    ELSE r.raw END, b.hash, b.bytes, b.text, b.zlib, r.raw_bytes
        FROM runs r LEFT JOIN blobs b ON b.hash = r.raw_hash
        WHERE r.raw IS NOT NULL OR b.hash IS NOT NULL
        ORDER BY r.session_id, r.step_seq, r.host, r.probe""", params).fetchall()
    texts: dict[str, str] = {}  # one text per content, however many runs printed it
    for r in rows:
        if r[5] is None and r[6] not in texts:
            texts[r[6]] = decode(r[6], r[7], r[8], r[9])
    return [RawOutput(str(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]),
                      str(r[5]) if r[5] is not None else texts[r[6]], int(r[10]))
            for r in rows]
