"""Several diag processes share one file: writers wait their turn, nothing is lost, and a
file held too long gives a clear message instead of a hang or a traceback."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from assistant.store import Store, StoreBusyError
from assistant.store.history import history
from tests.store.storehelpers import DRIFT, DRIFT_ANSWERS, XID, one, record_walk, rows, worker


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "diag.duckdb"
    Store(db).write(lambda con: None)  # both workers open an existing file
    start = time.time() + 1.0
    procs = [worker("burst", str(db), "8", tag, str(start)) for tag in ("A", "B")]
    reader_errors: list[Exception] = []
    reads = 0
    stop = threading.Event()

    def read_history() -> None:  # a `diag history` in a third terminal, meanwhile
        nonlocal reads
        store = Store(db, busy_timeout=30)
        while not stop.is_set():
            try:
                store.read(lambda con: history(con))
                reads += 1
            except Exception as exc:
                reader_errors.append(exc)
            time.sleep(0.02)

    reader = threading.Thread(target=read_history)
    reader.start()
    try:
        outputs = [p.communicate(timeout=240) for p in procs]
    finally:
        stop.set()
        reader.join()
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
    assert not reader_errors and reads > 0
    store = Store(db)
    for out, _ in outputs:
        done = [line.split() for line in out.splitlines() if line.startswith("done")]
        assert len(done) == 8
        for _, _, session, steps in done:
            assert one(store, "SELECT count(*) FROM steps WHERE session_id = ?",
                       [session]) == int(steps)
            assert one(store, "SELECT status FROM sessions WHERE id = ?",
                       [session]) == "concluded"
        committed = sum(1 for line in out.splitlines() if line.startswith("committed"))
        assert committed == sum(int(d[3]) for d in done)
    # 4 drift walks (4 steps) and 4 xid walks (3 steps) per worker, one finding each.
    assert one(store, "SELECT count(*) FROM sessions") == 16
    assert one(store, "SELECT count(*) FROM steps") == 2 * (4 * 4 + 4 * 3)
    assert one(store, "SELECT count(*) FROM findings") == 2 * 8


def test_a_writer_waits_for_the_lock_then_succeeds(tmp_path: Path) -> None:
    db = tmp_path / "diag.duckdb"
    Store(db).write(lambda con: None)
    holder = worker("hold", str(db), "1.5")
    try:
        assert holder.stdout and holder.stdout.readline().strip() == "holding"
        began = time.monotonic()
        session, walk = record_walk(Store(db), XID, {})
        assert time.monotonic() - began > 0.5  # it did wait for the other process
        assert walk.status == "concluded"
        assert one(Store(db), "SELECT count(*) FROM steps WHERE session_id = ?",
                   [session]) == 3
    finally:
        holder.wait(timeout=30)


def test_a_file_held_too_long_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "diag.duckdb"
    Store(db).write(lambda con: None)
    holder = worker("hold", str(db), "5")
    try:
        assert holder.stdout and holder.stdout.readline().strip() == "holding"
        with pytest.raises(StoreBusyError, match=r"stayed locked by another process for more "
                                                 r"than 0\.5 s"):
            Store(db, busy_timeout=0.5).read(lambda con: None)
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_threads_of_one_process_share_the_file(tmp_path: Path) -> None:
    """A TUI reads while its recorder writes: same process, read-only and read-write
    connections alternate instead of failing on DuckDB's 'different configuration'."""
    store = Store(tmp_path / "diag.duckdb")
    record_walk(store, DRIFT, DRIFT_ANSWERS)
    errors: list[Exception] = []

    def writer() -> None:
        try:
            for _ in range(5):
                record_walk(store, XID, {})
        except Exception as exc:
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(20):
                store.read(lambda con: history(con))
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert rows(store, "SELECT count(*) FROM sessions") == [(6,)]
