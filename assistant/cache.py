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
Directory spec's place for data that can be deleted at any time).

Who may write it: only the user. diag often runs as root on a shared login node, and the cache
decides what a runbook *is*, so an entry another user could plant would steer a walk. Entries
are therefore data that cannot run (JSON, never pickle, marshal or generated code), every
directory level diag creates is 0700 and every file 0600 whatever the umask, and the way
OpenSSH's StrictModes treats ``~/.ssh``, a cache directory or entry that is not owned by the
user, or that the group or others may write, is not used (one line on stderr says which and
why). A cache that cannot be read or written is simply not used: the work is done as if there
were none, never an error.
"""

from __future__ import annotations

import os
import stat
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, TypeVar

    T = TypeVar("T")
    P = TypeVar("P")

ENV_CACHE = "DIAG_CACHE_DIR"
# Bumped when the shape of what is cached changes in a way the code hash would not show.
FORMAT = b"diag-cache-3"
SUFFIX = ".json"
# A file's stat is trusted only once its mtime and ctime are this much older than the moment it
# was read: a write after the read then always gives a later ctime. Two seconds covers the
# coarsest timestamps of local filesystems (FAT's are 2 s) and clock ticks; see the docstring.
SETTLED_NS = 2_000_000_000
# How many lists of files the stat memo remembers (a team's --runbooks DIR is another list).
MEMO_SIZE = 16
# Tags of what JSON has no type for (tuples, sets, mappings with keys that are not strings):
# a one-key object whose key starts with NUL, a character no YAML or runbook key holds.
_TUPLE, _FROZENSET, _MAPPING = "\x00tuple", "\x00frozenset", "\x00mapping"
# Directories and files already said to be refused, so a start says each once.
_refused: set[str] = set()


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
    memo_path = None if base is None else os.path.join(base, "stat", f"memo{SUFFIX}")
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
        _write(memo_path, _dumps(memo))
    return key


def _read_memo(path: str) -> dict[tuple[str, tuple[str, ...]], tuple[tuple[object, ...], str]]:
    memo = _read(path)
    return memo if isinstance(memo, dict) else {}


def cached(kind: str, key: str, build: Callable[[], T],
           dump: Callable[[T], Any] | None = None, load: Callable[[Any], T] | None = None,
           ) -> T:
    """The value stored under *kind*/*key*, else ``build()`` (stored for the next start).
    *dump* turns the value into plain data (dicts, lists, tuples, sets, strings, numbers) and
    *load* turns that back into the value; without them the value must be plain already. A
    value that is not plain is not cached."""
    base = cache_dir()
    if base is None:
        return build()
    path = os.path.join(base, kind, key + SUFFIX)
    stored = _read(path, _MISSING)
    if stored is not _MISSING:
        try:
            return stored if load is None else load(stored)
        except Exception:  # a damaged entry: rebuild and overwrite it
            pass
    value = build()
    try:
        data = _dumps(value if dump is None else dump(value))
    except (TypeError, ValueError):  # not plain data: no cache
        return value
    _write(path, data)
    return value


def cached_plain(kind: str, key: str, build: Callable[[], P], load: Callable[[P], T]) -> T:
    """``load(build())``, with the plain data *build* returns stored under *kind*/*key*: what
    a start reads every time (the match index, the list of runbooks, the shipped data files).
    A stored entry that *load* cannot take (damaged) is rebuilt."""
    made: list[P] = []

    def build_value() -> T:
        made.append(build())
        return load(made[0])

    return cached(kind, key, build_value, dump=lambda _value: made[0], load=load)


class _Missing:
    pass


_MISSING: Any = _Missing()


def _dumps(value: object) -> bytes:
    import json

    return json.dumps(_tagged(value), ensure_ascii=False, separators=(",", ":"),
                      allow_nan=True).encode("utf-8")


def _tagged(value: Any) -> Any:
    """*value* with what JSON cannot hold as itself tagged (TypeError on anything not plain)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list):
        return [_tagged(item) for item in value]
    if isinstance(value, tuple):
        return {_TUPLE: [_tagged(item) for item in value]}
    if isinstance(value, frozenset):
        return {_FROZENSET: [_tagged(item) for item in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("\x00") for k in value):
            return {k: _tagged(v) for k, v in value.items()}
        return {_MAPPING: [[_tagged(k), _tagged(v)] for k, v in value.items()]}
    raise TypeError(f"not plain data: {type(value).__name__}")


def _untagged(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        ((tag, items),) = obj.items()
        if tag == _TUPLE:
            return tuple(items)
        if tag == _FROZENSET:
            return frozenset(items)
        if tag == _MAPPING:
            return {key: value for key, value in items}
    return obj


def _read(path: str, missing: Any = None) -> Any:
    """The entry at *path*, decoded; *missing* when there is none, it is damaged, or it may
    not be trusted (said once)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # none yet, or a symbolic link put in its place
        return missing
    try:
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode) or not _trusted(path, st) \
                    or not _trusted_dir(os.path.dirname(path)):
                return missing
            data = handle.read()
    except OSError:
        return missing
    import json

    try:
        return json.loads(data, object_hook=_untagged)
    except (ValueError, TypeError, RecursionError):
        return missing


def _trusted(path: str, st: os.stat_result) -> bool:
    """May *st* (of *path*) be used: owned by this user, and nobody else may write it? A
    refusal is said on stderr once per path."""
    owner = os.geteuid()
    if st.st_uid == owner and not st.st_mode & 0o022:
        return True
    if path not in _refused:
        _refused.add(path)
        why = (f"it belongs to uid {st.st_uid}" if st.st_uid != owner
               else "the group or others may write it")
        print(f"diag: not using the cache at {path}: {why} (remove it, or chmod go-w it if "
              "it is yours)", file=sys.stderr)
    return False


def _trusted_dir(directory: str) -> bool:
    """*directory* and the cache directory above it may be used (see ``_trusted``)."""
    base = cache_dir()
    chain = [directory] if base is None or directory == base else [base, directory]
    for level in chain:
        try:
            st = os.lstat(level)
        except OSError:
            return False
        if stat.S_ISLNK(st.st_mode) and level == base:  # ~/.cache/diag -> elsewhere: the target
            try:
                st = os.stat(level)
            except OSError:
                return False
        if not stat.S_ISDIR(st.st_mode) or not _trusted(level, st):
            return False
    return True


def _private_dirs(directory: str) -> bool:
    """Create *directory* and every missing level above it 0700 (``makedirs`` gives only the
    last level its mode; the umask decides the rest), and say whether it may be used."""
    missing: list[str] = []
    level = os.path.abspath(directory)
    while not os.path.isdir(level):
        missing.append(level)
        parent = os.path.dirname(level)
        if parent == level:
            break
        level = parent
    import contextlib

    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by another start meanwhile: judged
            os.mkdir(level, 0o700)  # the umask can only take bits away from 0700
    return _trusted_dir(directory)


def _write(path: str, data: bytes) -> None:
    """Write atomically (a reader never sees half an entry) into a private directory; give up
    quietly on any error."""
    try:
        if not _private_dirs(os.path.dirname(path)):
            return
        tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:  # read-only home, full disk: no cache
        pass
