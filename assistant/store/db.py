"""The store file and its connections: short-lived, retried when busy, version-checked.

DuckDB lets one process write a file at a time and locks it for as long as a connection is
open. diag's processes share one file — an open TUI, an automated ``diag run``, a
``diag history`` in another terminal — so no connection here outlives one transaction: open,
do one thing, close. A process that finds the file locked (or, inside one process, open with a
different read/write configuration) waits with a growing, jittered backoff up to a bound
(``busy_timeout``, 10 s by default) before giving up with a clear message: a run must never
fail because another diag was busy for a moment.

The file is created on first write with mode 0600 in a 0700 directory (the history names hosts,
people and failures); it is built aside and linked into place, so no other process ever sees
a half-created file, and two first runs at once do not trample each other.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from . import blank, incidents, schema, writes
from .base import (
    Connection,
    StoreBusyError,
    StoreError,
    StoreFullError,
    StoreMissingError,
    StoreVersionError,
    disk_full,
    new_id,
    now_utc,
    quiet,
)
from .incidents import SessionStart
from .locations import resolve_db_path

T = TypeVar("T")

DEFAULT_BUSY_TIMEOUT = 10.0
BUSY_TIMEOUT_ENV = "DIAG_BUSY_TIMEOUT"
_MIGRATE_LOCKS: dict[Path, threading.Lock] = {}
_MIGRATE_LOCKS_GUARD = threading.Lock()


def current_operator() -> str:
    """Who is running diag: $USER, else the login name, else 'unknown' (containers)."""
    name = os.environ.get("USER", "").strip()
    if name:
        return name
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry for this uid (common in containers)
        return "unknown"


def _busy(exc: BaseException) -> bool:
    """Is *exc* DuckDB saying "someone else has the file right now"?

    Only a lock or a write-write conflict is worth waiting for. A full disk is not (its
    message says "Could not write ..." — a "b-lock" to a careless match — and it arrives as
    a TransactionException at commit), nor is a corrupt file.
    """
    if disk_full(exc):
        return False
    text = str(exc)
    if isinstance(exc, duckdb.IOException):
        return "could not set lock" in text.lower() or "conflicting lock" in text.lower()
    if isinstance(exc, duckdb.ConnectionException):
        # Same process, the file already open with the other read_only setting: it is
        # closed again within one transaction, so this is a wait, not an error.
        return "different configuration" in text
    if isinstance(exc, duckdb.TransactionException):  # a write-write conflict: retry
        return "conflict" in text.lower()
    return False


class _Backoff:
    """Sleeps that grow from 5 ms to 250 ms, jittered so waiting processes do not march in
    step, until a deadline."""

    def __init__(self, timeout: float) -> None:
        self.deadline = time.monotonic() + timeout
        self.delay = 0.005

    def wait(self) -> bool:
        """Sleep before the next attempt; False when the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, self.delay * random.uniform(0.5, 1.5)))
        self.delay = min(self.delay * 2, 0.25)
        return True


def file_version(con: Connection, path: Path | str = "") -> int:
    """The schema version of the open file: 0 for an empty database."""
    tables = {row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables() "
        "WHERE database_name = current_database() AND schema_name = 'main'").fetchall()}
    if "schema_version" not in tables:
        if tables:
            raise StoreVersionError(f"{path}: not a diag incident store (a DuckDB file with "
                                    f"other tables: {', '.join(sorted(tables)[:5])})")
        return 0
    row = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
    return int(row[0]) if row else 0


def migrate(con: Connection, path: Path | str = "") -> tuple[int, int]:
    """Bring the open file to the current schema, one transaction per step.

    Returns (version before, version after). A newer file raises StoreVersionError.
    """
    before = file_version(con, path)
    _refuse_newer(before, path)
    for step in schema.pending(before):
        con.begin()
        try:
            if file_version(con, path) >= step.version:  # another thread got there first
                con.rollback()
                continue
            for statement in step.statements:
                con.execute(statement)
            if step.run is not None:
                step.run(con)
            con.execute("INSERT INTO schema_version VALUES (?, ?, ?)",
                        [step.version, now_utc(), step.description])
            con.commit()
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                con.rollback()
            raise
    return before, file_version(con, path)


def _refuse_newer(version: int, path: Path | str) -> None:
    if version > schema.CURRENT_VERSION:
        raise StoreVersionError(
            f"{path}: this store was written by a newer diag (schema version {version}; this "
            f"diag knows up to {schema.CURRENT_VERSION}). Upgrade diag, or point --db / "
            "DIAG_DB at another file; the file was left untouched.")


class Store:
    """One incident store file. Cheap to create: it holds a path, never a connection."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 busy_timeout: float | None = None) -> None:
        self.path = resolve_db_path(path)
        self.busy_timeout = busy_timeout if busy_timeout is not None else _busy_timeout()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def exists(self) -> bool:
        return self.path.exists()

    # --- connections -------------------------------------------------------------------------

    def _connect(self, read_only: bool, backoff: _Backoff) -> Connection:
        while True:
            try:
                return quiet(duckdb.connect(str(self.path), read_only=read_only))
            except duckdb.Error as exc:
                if not _busy(exc):
                    if read_only and not self.path.exists():
                        raise StoreMissingError(self._missing()) from None
                    if disk_full(exc):
                        raise StoreFullError(f"the disk holding {self.path} is full "
                                             f"({_first_line(exc)})") from None
                    raise StoreError(f"{self.path}: {exc}") from None
                if not backoff.wait():
                    raise StoreBusyError(
                        f"{self.path} stayed locked by another process for more than "
                        f"{self.busy_timeout:g} s ({_first_line(exc)})") from None

    def _missing(self) -> str:
        return (f"no incident store at {self.path} yet (the first `diag run` creates it; "
                "--db PATH or DIAG_DB choose another)")

    def write(self, fn: Callable[[Connection], T]) -> T:
        """Run *fn* in one write transaction on a fresh connection, then close it.

        The file is created (and an older one upgraded) first. A busy file or a write
        conflict is retried until the busy timeout; *fn* may therefore run more than once
        and must only touch the database.
        """
        self._ensure_file()
        backoff = _Backoff(self.busy_timeout)
        while True:
            con = self._connect(False, backoff)
            try:
                self._upgrade(con)
                con.begin()
                try:
                    result = fn(con)
                    con.commit()
                except BaseException:
                    with contextlib.suppress(duckdb.Error):
                        con.rollback()
                    raise
                return result
            except (duckdb.Error, OSError) as exc:
                if disk_full(exc):
                    raise StoreFullError(f"the disk holding {self.path} is full "
                                         f"({_first_line(exc)})") from None
                if not isinstance(exc, duckdb.TransactionException) or not _busy(exc):
                    raise
                if not backoff.wait():
                    raise StoreBusyError(f"{self.path}: write kept conflicting for more "
                                         f"than {self.busy_timeout:g} s ({exc})") from None
            finally:
                self._protect_wal()
                con.close()

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run *fn* on a fresh read-only connection, then close it.

        A file at an older schema version is upgraded first (a short write); a newer one is
        refused. A missing file raises StoreMissingError (reading never creates the store).
        """
        if not self.path.exists():
            raise StoreMissingError(self._missing())
        backoff = _Backoff(self.busy_timeout)
        while True:
            con = self._connect(True, backoff)
            try:
                version = file_version(con, self.path)
                _refuse_newer(version, self.path)
                if version == schema.CURRENT_VERSION:
                    return fn(con)
            finally:
                con.close()
            self.write(lambda con: None)  # upgrades in place, then read again

    @contextlib.contextmanager
    def reading(self) -> Iterator[Connection]:
        """``with store.reading() as con:`` — read() for code that reads in several steps."""
        if not self.path.exists():
            raise StoreMissingError(self._missing())
        self.read(lambda con: None)  # version check / upgrade
        con = self._connect(True, _Backoff(self.busy_timeout))
        try:
            yield con
        finally:
            con.close()

    def version(self) -> int:
        return self.read(lambda con: file_version(con, self.path))

    def _upgrade(self, con: Connection) -> None:
        version = file_version(con, self.path)
        _refuse_newer(version, self.path)
        if version < schema.CURRENT_VERSION:
            with _migrate_lock(self.path):
                migrate(con, self.path)

    def _ensure_file(self) -> None:
        """Create the file on first use: 0700 directory, 0600 file, schema applied."""
        if self.path.exists():
            return
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(f"cannot create {directory} for the store: {exc.strerror}") from None
        tmp = directory / f".{self.path.name}.{os.getpid()}.{new_id()}.tmp"
        try:
            blank.write_blank(tmp, lambda con: migrate(con, self.path))
            try:
                os.link(tmp, self.path)  # atomic; fails if another process made it first
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links
                if not self.path.exists():
                    os.replace(tmp, self.path)
        except (duckdb.Error, OSError) as exc:
            if disk_full(exc):
                raise StoreFullError(f"cannot create the store {self.path}: the disk is full "
                                     f"({_first_line(exc)})") from None
            raise StoreError(f"cannot create the store {self.path}: "
                             f"{getattr(exc, 'strerror', None) or _first_line(exc)}") from None
        finally:
            for leftover in (tmp, Path(f"{tmp}.wal")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()

    def _protect_wal(self) -> None:
        """The write-ahead log holds the same data as the file: same permissions."""
        with contextlib.suppress(OSError):
            os.chmod(f"{self.path}.wal", 0o600)

    # --- sessions ----------------------------------------------------------------------------

    def open_session(self, runbook: str, hosts: Sequence[str],
                     attrs: Mapping[str, Mapping[str, Any]] | None = None,
                     incident: str | None = None, symptom: str = "",
                     job: str | None = None, *, title: str | None = None,
                     tags: Sequence[str] = (), operator: str | None = None,
                     target: Mapping[str, Any] | None = None, simulated: bool = False) -> str:
        """Start recording a walk: a session (and a new incident unless *incident* is given).

        *attrs* are the hosts' inventory attributes as of this run (rack, leaf, rail, ...);
        *target* how they were reached (e.g. {"scenario": ..., "inventory": ...}), kept so
        ``--resume`` can reach them again; *simulated* marks a replayed scenario (left out of
        history, correlate and reports unless asked). Returns the new session id. Joins no open
        incident by itself: ``start_session`` does, for the front ends.
        """
        return self.start_session(runbook, hosts, attrs, incident, symptom, job, title=title,
                                  tags=tags, operator=operator, target=target,
                                  join=False, simulated=simulated).session

    def start_session(self, runbook: str, hosts: Sequence[str],
                      attrs: Mapping[str, Mapping[str, Any]] | None = None,
                      incident: str | None = None, symptom: str = "",
                      job: str | None = None, *, title: str | None = None,
                      tags: Sequence[str] = (), operator: str | None = None,
                      target: Mapping[str, Any] | None = None,
                      join: bool = True,
                      join_window: timedelta | None = None,
                      simulated: bool = False) -> SessionStart:
        """``open_session`` that may join an open incident and says which and why.

        With *incident* the walk joins that incident (refused when it is closed or merged);
        otherwise it joins the open incident of the same Slurm job, or of the same runbook on
        overlapping hosts within *join_window* (None: a new incident unless the job matches),
        in the same transaction that opens the session. *join* False always opens a new one;
        a *simulated* walk (a replayed scenario) joins only a simulated incident, a real walk
        only a real one.
        """
        return self.write(lambda con: incidents.begin_session(
            con, runbook=runbook, hosts=hosts, attrs=attrs or {}, incident=incident,
            symptom=symptom, job=job, title=title, tags=tags,
            operator=operator or current_operator(), target=target, join=join,
            join_window=join_window, path=self.path, simulated=simulated))

    def load_session(self, session_id: str) -> dict[str, Any]:
        """A session's row (id, incident_id, runbook, operator, status, target, ...), its
        ``hosts`` with their ``attrs``, and its walk ``state``. *session_id* may be a unique
        prefix."""
        return self.read(lambda con: writes.load_session(con, session_id, self.path))

    def load_session_state(self, session_id: str) -> dict[str, Any]:
        """The walk state to resume from: ``Walk.from_dict(state, runbook, provider, ...)``.

        Refuses a concluded session, one whose incident was closed while it waited, and one
        that never finished a step (nothing to resume).
        """
        session = self.load_session(session_id)
        if (why := incidents.not_resumable(session)) is not None:
            raise StoreError(why)
        if not session["state"]:
            raise StoreError(f"session {session['id']} has no recorded walk state (it ended "
                             "before its first step); start a new run")
        return dict(session["state"])

    def close_incident(self, incident_id: str, root_cause: str | None = None,
                       by: str | None = None) -> dict[str, Any]:
        """Mark an incident closed (optionally stating its root cause); returns its row."""
        return self.write(lambda con: incidents.close(con, incident_id, root_cause,
                                                      by or current_operator(), self.path))


def _busy_timeout() -> float:
    """$DIAG_BUSY_TIMEOUT seconds (how long to wait for a store another diag holds), else
    the default; a value that is not a positive number is ignored."""
    try:
        value = float(os.environ.get(BUSY_TIMEOUT_ENV, ""))
    except ValueError:
        return DEFAULT_BUSY_TIMEOUT
    return value if value > 0 and value == value and value != float("inf") \
        else DEFAULT_BUSY_TIMEOUT


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _migrate_lock(path: Path) -> threading.Lock:
    with _MIGRATE_LOCKS_GUARD:
        return _MIGRATE_LOCKS.setdefault(path, threading.Lock())
