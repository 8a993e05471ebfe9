"""A small on-disk cache of work derived from files, keyed by the files' content.

Every ``diag`` start used to validate every runbook (YAML with positions, the JSON schema, the
graph check through networkx) and parse every KB article before it could answer ``diag match``:
about half a second of a one-line answer. What those steps produce depends only on bytes on disk
(the runbook, the catalog, the schema, the KB, diag's own code), so it is kept here under a
SHA-256 of those bytes: a changed byte anywhere gives a new key, and an edited runbook is
validated again on its next load, as before. Nothing is ever trusted by date or name.

Where: ``$DIAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/diag``, else ``~/.cache/diag`` (the XDG Base
Directory spec's place for data that can be deleted at any time). Entries are pickles written by
this user into a directory only this user can write (0700), read back by the same code version
(the code is part of every key). A cache that cannot be read or written is simply not used:
the work is done as if there were none, never an error.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

ENV_CACHE = "DIAG_CACHE_DIR"
# Bumped when the shape of what is cached changes in a way the code hash would not show.
FORMAT = b"diag-cache-1"


def cache_dir() -> Path | None:
    """The cache directory, or None when caching is off (``DIAG_CACHE_DIR=off``)."""
    chosen = os.environ.get(ENV_CACHE, "").strip()
    if chosen.lower() in ("off", "0", "none"):
        return None
    if chosen:
        return Path(chosen).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    # The spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "diag"


def digest(parts: Iterable[bytes | str]) -> str:
    """SHA-256 over *parts*, each length-prefixed so that no two lists of parts collide."""
    sha = hashlib.sha256(FORMAT)
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        sha.update(len(data).to_bytes(8, "little"))
        sha.update(data)
    return sha.hexdigest()


def file_bytes(paths: Iterable[Path]) -> list[bytes]:
    """Each file's path and content, for a key (a file that cannot be read counts as empty)."""
    out: list[bytes] = []
    for path in paths:
        out.append(str(path).encode("utf-8", "surrogateescape"))
        try:
            out.append(path.read_bytes())
        except OSError:
            out.append(b"")
    return out


def cached(kind: str, key: str, build: Callable[[], T]) -> T:
    """The value stored under *kind*/*key*, else ``build()`` (stored for the next start)."""
    base = cache_dir()
    if base is None:
        return build()
    path = base / kind / f"{key}.pickle"
    try:
        with path.open("rb") as handle:
            return pickle.load(handle)  # type: ignore[no-any-return,unused-ignore]
    except FileNotFoundError:
        pass
    except Exception: # a damaged or foreign entry: rebuild and overwrite it
        pass
    value = build()
    _store(path, value)
    return value


def _store(path: Path, value: object) -> None:
    """Write atomically (a reader never sees half an entry); give up quietly on any error."""
    import tempfile  # only on a miss: it pulls in shutil, random, bz2, lzma

    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception: # read-only home, full disk, unpicklable value: no cache
        pass
