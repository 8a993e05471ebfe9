"""The store never stops a diagnosis: a store held by a long query, on a full disk or corrupt
sends the walk to a journal beside it, and ``diag store recover`` (or the walk's own end)
imports it — on real DuckDB files, a real lock held by another process, a real full tmpfs."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.runbook.engine import Walk
from assistant.store import Recorder, Store, StoreError
from assistant.store.base import StoreFullError
from assistant.store.journal import (
    Journal,
    fallback_dir,
    import_journal,
    journal_dir,
    pending_journals,
    read_entries,
)
from tests.store.storehelpers import (
    ATTRS,
    HOSTS,
    XID,
    RawProvider,
    dump_all,
    mini_runbook,
    one,
    raw_texts,
    rows,
    worker,
)
from tests.store.test_store_cli import run

pytestmark = pytest.mark.store

TOKEN = "ghp_" + "Z9y8" * 9


def walk_into(store: Store, session: str, errors: list[Exception],
              journalled: bool = False) -> Recorder:
    """The mini runbook walked to its conclusion with a Recorder on *store*."""
    provider = RawProvider(XID, raw={("gpu", "gpu001"): f"export GITHUB_TOKEN={TOKEN}\n"})
    recorder = Recorder(store, session, raw=provider.raw, on_error=errors.append,
                        journalled=journalled)
    walk = Walk(mini_runbook(), HOSTS, sweep=False, provider=provider, listeners=[recorder])
    recorder.follow(walk)
    assert walk.run() == "concluded"
    return recorder


@contextlib.contextmanager
def held(db: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the store's write lock (as a long `diag query` holds it)."""
    proc = worker("hold", str(db), "600")
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_store_held_by_another_process_journals_the_walk(tmp_path: Path) -> None:
    db = tmp_path / "diag.duckdb"
    session = Store(db).open_session("mini", HOSTS, ATTRS)
    store = Store(db, busy_timeout=0.5)
    errors: list[Exception] = []
    with held(db):
        recorder = walk_into(store, session, errors)
        assert len(errors) == 1, errors  # said once, not once per step
        assert "held by another process" in str(errors[0])
        assert recorder.journal.path.parent == journal_dir(db)
        ops = [e["op"] for e in read_entries(recorder.journal.path)]
        assert ops[0] == "state" and ops.count("step") == 3 and "conclusion" in ops
        assert not recorder.flush()  # still held: the journal stays
        assert recorder.journal.exists()
    assert recorder.flush() and not recorder.journal.exists()
    assert rows(store, "SELECT node FROM steps ORDER BY seq") == [
        ("check-gpu",), ("drain",), ("hardware",)]
    assert one(store, "SELECT status FROM sessions") == "concluded"


def test_the_journal_keeps_no_secret_and_is_private(tmp_path: Path) -> None:
    db = tmp_path / "diag.duckdb"
    session = Store(db).open_session("mini", HOSTS, ATTRS)
    store = Store(db, busy_timeout=0.3)
    with held(db):
        recorder = walk_into(store, session, [])
        text = recorder.journal.path.read_text()
        assert TOKEN not in text and "[REDACTED]" in text
        assert stat.S_IMODE(recorder.journal.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(recorder.journal.path.parent.stat().st_mode) == 0o700
    assert recorder.flush()
    assert TOKEN not in dump_all(db) and "[REDACTED]" in raw_texts(store)[("gpu001", "gpu")][0]


def test_a_walk_whose_start_is_refused_is_journalled_and_recovered(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`diag run` while another process holds the store: the walk runs to its conclusion
    (exit as for any walk), says where its steps are, and `diag store recover` imports them
    into the incident they belong to."""
    db = tmp_path / "diag.duckdb"
    Store(db).write(lambda con: None)
    monkeypatch.setenv("DIAG_BUSY_TIMEOUT", "0.5")
    with held(db):
        code, out, err = run(capsys, "run", "hang", "--scenario", "hang-xid79-fallen-off-bus",
                             "--auto", "--db", str(db))
        assert code in (0, 1), err
        assert "held by another process" in err and "diag store recover" in err
        assert "Traceback" not in err
        journals = pending_journals(db)
        assert len(journals) == 1
        assert read_entries(journals[0])[0]["op"] == "start"
        code, out, err = run(capsys, "store", "recover", "--db", str(db))
        assert code == 2 and "not imported, the journal is kept" in err
        assert pending_journals(db) == journals
    code, out, err = run(capsys, "store", "recover", "--db", str(db))
    assert code == 0 and "entries imported" in out, err
    assert pending_journals(db) == []
    session = journals[0].name.removesuffix(".jsonl")
    store = Store(db)
    assert one(store, "SELECT status FROM sessions WHERE id = ?", [session]) == "concluded"
    assert one(store, "SELECT count(*) FROM incidents") == 1
    assert one(store, "SELECT count(*) FROM steps WHERE session_id = ?", [session]) >= 2
    code, out, _ = run(capsys, "store", "recover", "--db", str(db))
    assert code == 0 and "no journal waiting" in out


def test_a_corrupt_store_does_not_stop_the_walk(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "diag.duckdb"
    db.write_bytes(b"this is not a DuckDB file\n" * 4096)
    code, _, err = run(capsys, "run", "hang", "--scenario", "hang-xid79-fallen-off-bus",
                       "--auto", "--db", str(db))
    assert code in (0, 1) and "journal" in err and "Traceback" not in err
    assert len(pending_journals(db)) == 1
    code, _, err = run(capsys, "store", "recover", "--db", str(db))
    assert code == 2 and len(err.strip().splitlines()) == 1
    db.rename(tmp_path / "corrupt.duckdb")  # the operator moves the broken file aside
    code, _, err = run(capsys, "store", "recover", "--db", str(db))
    assert code == 0 and pending_journals(db) == [], err
    assert one(Store(db), "SELECT status FROM sessions") == "concluded"


def test_a_crash_mid_append_loses_only_the_unfinished_line(tmp_path: Path) -> None:
    db = tmp_path / "diag.duckdb"
    session = Store(db).open_session("mini", HOSTS, ATTRS)
    store = Store(db, busy_timeout=0.3)
    with held(db):
        recorder = walk_into(store, session, [])
    path = recorder.journal.path
    entries = read_entries(path)
    with path.open("a") as fh:
        fh.write('{"op":"step","index":9,"step":{"no')  # kill -9 in the middle of a write
    assert read_entries(path) == entries
    result = import_journal(store.write, path, db)
    assert result.error is None and result.entries == len(entries)
    assert one(store, "SELECT count(*) FROM steps") == 3


def test_a_damaged_journal_is_named_and_kept(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "diag.duckdb"
    Store(db).write(lambda con: None)
    journal = Journal(db, "0123456789ab")
    journal.append({"op": "status", "status": "waiting"})
    with journal.path.open("a") as fh:
        fh.write("garbage\n")
        fh.write('{"op":"status","status":"waiting"}\n')
    code, _, err = run(capsys, "store", "recover", "--db", str(db))
    assert code == 2 and f"{journal.path}:2: not a journal entry" in err
    assert journal.exists()


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (needs root and mount, as in CI's container); unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path) -> Path:
    """Fill the file system of *directory* to the last byte."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_is_told_from_a_lock_and_journalled_elsewhere(tiny_disk: Path) -> None:
    db = tiny_disk / "diag.duckdb"
    session = Store(db).open_session("mini", HOSTS, ATTRS)
    filler = fill(tiny_disk)
    store = Store(db, busy_timeout=30)  # a full disk must not wait out the busy timeout
    errors: list[Exception] = []
    began = time.monotonic()
    recorder = walk_into(store, session, errors)
    assert time.monotonic() - began < 10
    assert len(errors) == 1 and "disk is full" in str(errors[0]), errors
    assert "held by another process" not in str(errors[0])
    # Beside the store there is no room either: the journal went to the fallback directory.
    assert recorder.journal.path.parent == fallback_dir(db)
    assert [e["op"] for e in read_entries(recorder.journal.path)].count("step") == 3
    with pytest.raises(StoreFullError):
        store.open_session("mini", HOSTS, ATTRS)
    filler.unlink()
    assert recorder.flush() and not recorder.journal.exists()
    assert one(store, "SELECT count(*) FROM steps") == 3


def test_recover_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run(capsys, "store", "recover", "--help")
    assert "journal" in capsys.readouterr().out


def test_a_closed_incident_asked_for_is_still_refused(tmp_path: Path) -> None:
    """The journal is for a store that cannot be written, not for a request it refuses."""
    from assistant import walks
    from assistant.target import open_target

    db = tmp_path / "diag.duckdb"
    store = Store(db)
    first = store.start_session("hang", ["gpu001"], {})
    store.close_incident(first.incident, "done")
    target = open_target(scenario="hang-xid79-fallen-off-bus")
    options = walks.FleetOptions(scenario="hang-xid79-fallen-off-bus")
    from assistant.runbook.library import get_runbook

    provider = options.provider(target)
    walk = walks.new_walk(get_runbook("hang"), target, provider)
    with pytest.raises(StoreError, match="closed"):
        walks.record(walk, target, options, provider, store=store, incident=first.incident)
    assert pending_journals(db) == []

