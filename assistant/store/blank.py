"""A new store file's first bytes: the schema applied once per process, then written again.

Applying every migration to an empty file costs about 0.13 s (DuckDB DDL, one transaction per
step). A process that creates several stores (a test suite's worker, a bench, ``diag import``
into fresh files) pays it once: the empty file at the current schema is kept in memory (about
0.5 MB) and written out for the next one. The bytes are this process's own, made by its own
migrations a moment before: nothing is read from a cache another process could have written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

_EMPTY: bytes | None = None


def write_blank(tmp: Path, migrate: Callable[[Any], object]) -> None:
    """Make *tmp* (which must not exist) an empty store at the current schema, mode 0600."""
    global _EMPTY
    if _EMPTY is not None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(_EMPTY)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o600)
        return
    con = duckdb.connect(str(tmp))
    try:
        os.chmod(tmp, 0o600)
        migrate(con)
    finally:
        con.close()
    if not Path(f"{tmp}.wal").exists():  # everything is in the file itself: safe to copy
        _EMPTY = tmp.read_bytes()
