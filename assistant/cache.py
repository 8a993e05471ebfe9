"""A small on-disk cache of work derived from files, keyed by the files' content.

Every ``diag`` start used to validate every runbook (YAML with positions, the JSON schema, the
graph check through networkx) and parse every KB article before it could answer ``diag match``:
about half a second of a one-line answer. What those steps produce depends only on bytes on disk
(the runbook, the catalog, the schema, the KB, diag's own code), so it is kept here under a
SHA-256 of those bytes: a changed byte anywhere gives a new key, and an edited runbook is
validated again on its next load, as before. Nothing is ever trusted by name.

Reading and hashing every file on each start is itself a few milliseconds (and the import of
hashlib), so ``files_key`` remembers, per list of files, each file's stat (device, inode, size,
mtime and ctime, to the nanosecond) beside the SHA-256 it had: when every stat is the same, so
is the key. Any write to a file sets its ctime to the time of the write, which no ``touch`` or
``cp -p`` can set back, so a changed file has a changed stat; the one gap is a second write in
the same clock tick as the one before it, so a stat is remembered only for files whose mtime
and ctime are at least ``SETTLED_NS`` older than the moment they were read (git's "racily
clean" rule). A file written in the last two seconds is hashed on every start until it settles.

Where: ``$DIAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/diag``, else ``~/.cache/diag`` (the XDG Base
Directory spec's place for data that can be deleted at any time). Entries are pickles (or, for
plain data read on every start, marshal) written by this user into a directory only this user
can write (0700), read back by the same code version (the code is part of every key). A cache
that cannot be read or written is simply not used: the work is done as if there were none,
never an error.
"""

from __future__ import annotations

import marshal
import os
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import TypeVar

    T = TypeVar("T")
    P = TypeVar("P")

ENV_CACHE = "DIAG_CACHE_DIR"
# Bumped when the shape of what is cached changes in a way the code hash would not show.
FORMAT = b"diag-cache-2"
# A file's stat is trusted only once its mtime and ctime are this much older than the moment it
# was read: a write after the read then always gives a later ctime. Two seconds covers the
# coarsest timestamps of local filesystems (FAT's are 2 s) and clock ticks; see the docstring.
SETTLED_NS = 2_000_000_000
# How many lists of files the stat memo remembers (a team's --runbooks DIR is another list).
MEMO_SIZE = 16


def cache_dir() -> str | None:
    """The cache directory, or None when caching is off (``DIAG_CACHE_DIR=off``)."""
    chosen = os.environ.get(ENV_CACHE, "").strip()
    if chosen.lower() in ("off", "0", "none"):
        return None
    if chosen:
        return os.path.expanduser(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    # The spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "diag")


def digest(parts: Iterable[bytes | str]) -> str:
    """SHA-256 over *parts*, each length-prefixed so that no two lists of parts collide."""
    import hashlib  # only when something has to be hashed: not on a start the memo answers

    sha = hashlib.sha256(FORMAT)
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        sha.update(len(data).to_bytes(8, "little"))
        sha.update(data)
    return sha.hexdigest()


def file_bytes(paths: Iterable[str | os.PathLike[str]]) -> list[bytes]:
    """Each file's path and content, for a key (a file that cannot be read counts as empty)."""
    out: list[bytes] = []
    for path in paths:
        out.append(os.fspath(path).encode("utf-8", "surrogateescape"))
        try:
            with open(path, "rb") as handle:
                out.append(handle.read())
        except OSError:
            out.append(b"")
    return out


def _stat(path: str) -> tuple[int, int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def files_key(paths: Sequence[str | os.PathLike[str]], salt: str = "") -> str:
    """``digest([salt, *file_bytes(paths)])``: the SHA-256 of the files' paths and bytes. When
    every file's stat is what it was when that digest was last worked out (and the files had
    settled then), the remembered digest is returned without reading or hashing anything."""
    names = tuple(os.fspath(path) for path in paths)
    base = cache_dir()
    memo_path = None if base is None else os.path.join(base, "stat", "memo")
    memo = {} if memo_path is None else _read_memo(memo_path)
    stats = tuple(_stat(name) for name in names)
    remembered = memo.get((salt, names))
    if remembered is not None and remembered[0] == stats:
        return remembered[1]
    now = time.time_ns()
    stats = tuple(_stat(name) for name in names)  # taken after *now*: see SETTLED_NS
    key = digest([salt, *file_bytes(names)])
    settled = all(st is None or max(st[3], st[4]) < now - SETTLED_NS for st in stats)
    if memo_path is not None and settled:
        memo.pop((salt, names), None)
        memo[(salt, names)] = (stats, key)
        while len(memo) > MEMO_SIZE:
            del memo[next(iter(memo))]
        _write(memo_path, marshal.dumps(memo))
    return key


def _read_memo(path: str) -> dict[tuple[str, tuple[str, ...]], tuple[tuple[object, ...], str]]:
    try:  # (marshal.loads of the bytes: marshal.load on a file reads it a few bytes at a time)
        with open(path, "rb") as handle:
            memo = marshal.loads(handle.read())
    except Exception:  # none yet, or damaged: start a new one
        return {}
    return memo if isinstance(memo, dict) else {}


def cached(kind: str, key: str, build: Callable[[], T]) -> T:
    """The value stored under *kind*/*key*, else ``build()`` (stored for the next start)."""
    import pickle

    base = cache_dir()
    if base is None:
        return build()
    path = os.path.join(base, kind, f"{key}.pickle")
    try:
        with open(path, "rb") as handle:
            return pickle.load(handle)  # type: ignore[no-any-return,unused-ignore]
    except FileNotFoundError:
        pass
    except Exception: # a damaged or foreign entry: rebuild and overwrite it
        pass
    value = build()
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an unpicklable value: no cache
        return value
    _write(path, data)
    return value


def cached_plain(kind: str, key: str, build: Callable[[], P], load: Callable[[P], T]) -> T:
    """``load(build())``, with the plain data *build* returns (tuples, lists, dicts, strings,
    numbers) stored under *kind*/*key* with marshal: what a start reads every time (the match
    index, the list of runbooks) loads without importing pickle. A stored entry that *load*
    cannot take (damaged) is rebuilt."""
    base = cache_dir()
    if base is None:
        return load(build())
    path = os.path.join(base, kind, f"{key}.marshal{marshal.version}")
    try:
        with open(path, "rb") as handle:
            return load(marshal.loads(handle.read()))
    except Exception:  # none yet, or a damaged or foreign entry: rebuild and overwrite it
        pass
    value = build()
    try:
        data = marshal.dumps(value)  # type: ignore[arg-type]
    except ValueError:  # not plain data: no cache
        return load(value)
    _write(path, data)
    return load(value)


def _write(path: str, data: bytes) -> None:
    """Write atomically (a reader never sees half an entry); give up quietly on any error."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:  # read-only home, full disk: no cache
        pass
