"""The walk's journal: steps kept beside the store when the store cannot take them.

A store that is locked by a long ``diag query``, corrupt, or on a full disk must never stop a
diagnosis. The recorder then appends each write, as data, to a journal file beside the store
(``diag.duckdb.journal/SESSION.jsonl``: one JSON object a line, flushed and fsynced before the
walk goes on, so ``kill -9`` loses no finished step), and ``import_journals`` — at the end of
the walk, or later through ``diag store recover`` — replays them into the store in order.

What goes into a journal is already redacted (raw outputs bounded too): the journal is part of
the history and keeps the store's promise that no secret is written to disk. The directory is
0700 and the files 0600, like the store.

Who may write it: only the user. The fallback directory's name is predictable (the temporary
directory is shared) and ``diag store recover`` replays whatever it finds as the operator, so a
journal directory is used only when this user made it or owns it and nobody else may write it,
journal files are opened without following symbolic links, and only journals the user owns are
replayed; anything else is refused with a line naming it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from . import incidents, writes
from .base import Connection, StoreError, now_utc
from .redact import redact_data, redact_text

Entry = dict[str, Any]
SUFFIX = ".jsonl"


def journal_dir(store_path: Path) -> Path:
    """Where the journals of the store at *store_path* are kept: beside it."""
    return store_path.with_name(store_path.name + ".journal")


def fallback_dir(store_path: Path) -> Path:
    """Where they go when the store's own disk is full: the temporary directory, per user
    and per store (a hash of its absolute path), 0700."""
    key = hashlib.sha256(str(store_path.expanduser().absolute()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"diag-{os.getuid()}-journal" / key


def redacted(entry: Mapping[str, Any]) -> Entry:
    """*entry* as it may be written to disk: every text and value through the redactor (the
    store bounds raw outputs when it takes them, and records their full size)."""
    out: Entry = {}
    for key, value in entry.items():
        if key == "prepared":  # rows for the store only: the journal keeps what they came from
            continue
        if key == "raw":  # recorder.StepOutputs, or the journal's own list
            triples = ([probe, host, value[(probe, host)]] for probe, host in value) \
                if isinstance(value, Mapping) else value or []
            out[key] = [[probe, host, redact_text(text)] for probe, host, text in triples]
        elif isinstance(value, str):
            out[key] = redact_text(value)
        else:
            out[key] = redact_data(value)
    return out


class Journal:
    """The journal of one session: ``append`` an entry, durably, in order.

    It lives beside the store; when that disk is full too, the entries written so far move to
    the fallback directory and the journal goes on there (one file, so the order holds).
    """

    def __init__(self, store_path: Path, session: str) -> None:
        self.name = f"{session}{SUFFIX}"
        self.dirs = [journal_dir(store_path), fallback_dir(store_path)]
        self.path = self.dirs[0] / self.name

    def append(self, entry: Mapping[str, Any]) -> None:
        """Write *entry* as one line and force it to disk; an OSError when neither place can
        take it (said by the caller, not hidden)."""
        line = (json.dumps(redacted(entry), ensure_ascii=False, default=str,
                           separators=(",", ":")) + "\n").encode("utf-8")
        try:
            _append(self.path, line)
        except OSError:
            fallback = self.dirs[-1] / self.name
            if self.path == fallback:
                raise
            earlier = _read(self.path) if os.path.lexists(self.path) else b""
            _append(fallback, earlier + line)
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = fallback

    def exists(self) -> bool:
        return self.path.exists()


def _append(path: Path, data: bytes) -> None:
    directory = path.parent
    # The fallback's parent (diag-UID-journal in the shared temporary directory) is diag's too:
    # whoever may write it could swap the store's directory under it.
    private_dir(directory, top=directory.parent
                if directory.parent.name == f"diag-{os.getuid()}-journal" else directory)
    fd = _open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


class UntrustedJournal(OSError):
    """A journal directory or file another user made or may write: never used."""


def untrusted(path: Path, st: os.stat_result, what: str) -> str | None:
    """Why *path* (its lstat *st*) may not be used as a journal *what*, or None."""
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not (stat.S_ISDIR if what == "directory" else stat.S_ISREG)(st.st_mode):
        return f"{path} is not a {what}"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to uid {st.st_uid}, not to you"
    if st.st_mode & 0o022:
        return f"the group or others may write {path}"
    return None


def private_dir(directory: Path, top: Path | None = None) -> None:
    """Make *directory* (every missing level 0700, whatever the umask) or check the one there,
    and every level up to *top*: owned by this user, nobody else may write it. UntrustedJournal
    otherwise."""
    missing: list[Path] = []
    level = directory
    while not level.exists() and not level.is_symlink() and level != level.parent:
        missing.append(level)
        level = level.parent
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile: checked below
            os.mkdir(level, 0o700)
    level = directory
    while True:
        why = untrusted(level, os.lstat(level), "directory")
        if why is not None:
            raise UntrustedJournal(f"the journal directory is not used: {why}")
        if top is None or level == top or level == level.parent:
            return
        level = level.parent


def _open(path: Path, flags: int) -> int:
    """A journal file's descriptor, never through a symbolic link, and only a file of ours."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    why = untrusted(path, os.fstat(fd), "file")
    if why is not None:
        os.close(fd)
        raise UntrustedJournal(f"the journal is not used: {why}")
    return fd


def _read(path: Path) -> bytes:
    fd = _open(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def read_entries(path: Path) -> list[Entry]:
    """The entries of a journal file. A last line cut short by a crash is dropped (it was never
    acknowledged to the walk); a bad line elsewhere is an error naming the file and line."""
    lines = _read(path).decode("utf-8").split("\n")
    entries: list[Entry] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # the unterminated tail of an interrupted append
                break
            raise StoreError(f"{path}:{number}: not a journal entry; the file was left as "
                             "it is") from None
        if not isinstance(entry, dict) or "op" not in entry:
            raise StoreError(f"{path}:{number}: not a journal entry; the file was left as it is")
        entries.append(entry)
    return entries


def apply(con: Connection, session: str, entry: Mapping[str, Any], store_path: Path) -> None:
    """One journalled write, done on *con* inside the caller's transaction."""
    op = entry["op"]
    if op == "start":
        start_session(con, session, entry, store_path)
    elif op == "state":
        writes.update_state(con, session, entry["state"])
    elif op == "step":
        given = entry.get("raw") or []  # recorder.StepOutputs, or a journal's list
        raw = given if isinstance(given, Mapping) else \
            {(probe, host): text for probe, host, text in given}
        writes.record_step(con, session, int(entry["index"]), entry["step"], entry["state"],
                           raw or None, entry.get("operator"), entry.get("prepared"))
    elif op == "conclusion":
        writes.record_conclusion(con, session, entry["node"], entry["title"], entry["cause"],
                                 entry["severity"])
    elif op == "undo":
        writes.record_undo(con, session, entry["node"], entry["choice"])
    elif op == "status":
        writes.set_status(con, session, entry["status"])
    elif op == "samples":
        writes.record_samples(con, session, entry["probe"], int(entry["seq"]),
                              float(entry["ts"]), entry["samples"])
    else:
        raise StoreError(f"unknown journal entry '{op}'")


def start_session(con: Connection, session: str, entry: Mapping[str, Any],
                  store_path: Path) -> incidents.SessionStart:
    """Open the session *session* as ``Store.start_session`` would have, when it was asked."""
    window = entry.get("join_window_s")
    return incidents.begin_session(
        con, runbook=entry["runbook"], hosts=entry["hosts"], attrs=entry.get("attrs") or {},
        incident=entry.get("incident"), symptom=entry.get("symptom") or "",
        job=entry.get("job"), title=entry.get("title"), tags=entry.get("tags") or [],
        operator=entry.get("operator") or "unknown", target=entry.get("target"),
        join=entry.get("join", True),
        join_window=timedelta(seconds=window) if window is not None else None,
        session=session, path=store_path, simulated=bool(entry.get("simulated")))


@dataclass(frozen=True)
class Imported:
    """One journal replayed into the store (or why it was not)."""

    session: str
    entries: int
    error: str | None = None


def import_journal(write: Callable[[Callable[[Connection], Any]], Any], path: Path,
                   store_path: Path) -> Imported:
    """Replay one journal file into the store in one transaction, then remove it.

    A session whose start is journalled but already in the store (an import interrupted after
    its commit) is not opened twice: its entries were imported, and the file is removed.
    """
    session = path.name[:-len(SUFFIX)]
    try:
        entries = read_entries(path)
    except (OSError, UnicodeDecodeError) as exc:
        return Imported(session, 0, f"{path}: {exc}")
    except StoreError as exc:
        return Imported(session, 0, str(exc))

    def replay(con: Connection) -> bool:
        known = con.execute("SELECT count(*) FROM sessions WHERE id = ?", [session]).fetchone()
        if entries and entries[0]["op"] == "start" and known and known[0]:
            return False
        for entry in entries:
            apply(con, session, entry, store_path)
        con.execute("UPDATE sessions SET updated = ? WHERE id = ?", [now_utc(), session])
        return True

    try:
        write(replay)
    except StoreError as exc:
        return Imported(session, len(entries), str(exc))
    except Exception as exc:  # a DuckDB or disk error: the file stays for the next try
        return Imported(session, len(entries), f"{type(exc).__name__}: {exc}")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return Imported(session, len(entries))


def pending_journals(store_path: Path) -> list[Path]:
    """The journals waiting to be imported into the store at *store_path* (beside it, and in
    the fallback directory), oldest first: only journals of this user's (``refused_journals``
    names the rest)."""
    found: list[tuple[float, str, Path]] = []
    for directory in _trusted_dirs(store_path):
        for path in directory.glob(f"*{SUFFIX}"):
            st = os.lstat(path)
            if untrusted(path, st, "file") is None:
                found.append((st.st_mtime, path.name, path))
    return [path for *_, path in sorted(found)]


def refused_journals(store_path: Path) -> list[str]:
    """Why each journal directory or file of the store at *store_path* that another user made
    or may write is not imported (what ``pending_journals`` leaves out)."""
    reasons: list[str] = []
    for directory in (journal_dir(store_path), fallback_dir(store_path)):
        if not os.path.lexists(directory):
            continue
        why = _dir_refusal(store_path, directory)
        if why is not None:
            reasons.append(why)
            continue
        for path in sorted(directory.glob(f"*{SUFFIX}")):
            why = untrusted(path, os.lstat(path), "file")
            if why is not None:
                reasons.append(why)
    return reasons


def _trusted_dirs(store_path: Path) -> list[Path]:
    return [directory for directory in (journal_dir(store_path), fallback_dir(store_path))
            if os.path.lexists(directory) and _dir_refusal(store_path, directory) is None]


def _dir_refusal(store_path: Path, directory: Path) -> str | None:
    """Why the journal *directory* of the store may not be read (the fallback with its
    parent), or None."""
    chain = [directory.parent, directory] if directory == fallback_dir(store_path) \
        else [directory]
    for level in chain:
        why = untrusted(level, os.lstat(level), "directory")
        if why is not None:
            return why
    return None
