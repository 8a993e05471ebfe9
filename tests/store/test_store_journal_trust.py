"""No other user's journal is replayed as the operator, and no journal write lands in a file of
another user's choosing (issue 27 item 2, reproduced as the attack was: as root, with a
directory made first by ``nobody`` under a shared temporary directory)."""

from __future__ import annotations

import os
import pwd
import stat
import tempfile
from pathlib import Path

import pytest

from assistant.store import Store
from assistant.store.journal import (
    Journal,
    fallback_dir,
    journal_dir,
    pending_journals,
    private_dir,
)
from tests.store.storehelpers import HOSTS, one
from tests.store.test_store_cli import run
from tests.store.test_store_journal import held, walk_into

pytestmark = pytest.mark.store
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another user")


@pytest.fixture
def tmpdir_shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shared temporary directory (1777, like /tmp) as the process's TMPDIR."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    return shared


def _nobody() -> int:
    return pwd.getpwnam("nobody").pw_uid


def _forged_journal(tmp_path: Path, db: Path) -> bytes:
    """The bytes of a real journal of a walk (a start as the operator, steps, a conclusion):
    what the attacker copies into a directory of their own."""
    session = Store(db).open_session("mini", HOSTS, {})
    store = Store(db, busy_timeout=0.3)
    with held(db):
        recorder = walk_into(store, session, [])
    data = recorder.journal.path.read_bytes()
    recorder.journal.path.unlink()
    return data


@as_root
def test_a_journal_another_user_planted_is_not_recovered(
        tmp_path: Path, tmpdir_shared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "diag.duckdb"
    forged = _forged_journal(tmp_path, db)
    planted = fallback_dir(db)
    assert planted.is_relative_to(tmpdir_shared)
    planted.mkdir(parents=True)
    (planted / "c0ffee000000.jsonl").write_bytes(forged)
    for path in (planted.parent, planted, planted / "c0ffee000000.jsonl"):
        os.chown(path, _nobody(), -1)
        path.chmod(0o700 if path.is_dir() else 0o600)
    before = one(Store(db), "SELECT count(*) FROM sessions")
    assert pending_journals(db) == []
    code, out, err = run(capsys, "store", "recover", "--db", str(db))
    assert code == 2 and f"{planted.parent} belongs to uid {_nobody()}" in err, err
    assert one(Store(db), "SELECT count(*) FROM sessions") == before
    assert "c0ffee000000" not in out


@as_root
def test_a_journal_file_of_another_user_in_my_directory_is_not_recovered(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "diag.duckdb"
    forged = _forged_journal(tmp_path, db)
    journal = Journal(db, "c0ffee000001")
    journal.path.parent.mkdir(mode=0o700, exist_ok=True)
    journal.path.write_bytes(forged)
    os.chown(journal.path, _nobody(), -1)
    assert pending_journals(db) == []
    code, _, err = run(capsys, "store", "recover", "--db", str(db))
    assert code == 2 and str(journal.path) in err
    assert journal.path.exists()


@as_root
def test_a_journal_directory_another_user_made_first_is_not_written(
        tmp_path: Path, tmpdir_shared: Path) -> None:
    """Beside the store, another user made STORE.journal first: the journal goes to the
    private fallback instead; there, a fallback another user made first is refused too."""
    db = tmp_path / "diag.duckdb"
    beside = journal_dir(db)
    beside.mkdir(mode=0o777)
    beside.chmod(0o777)
    os.chown(beside, _nobody(), -1)
    journal = Journal(db, "c0ffee000002")
    journal.append({"op": "status", "status": "waiting"})
    assert journal.path.parent == fallback_dir(db) and not list(beside.iterdir())
    mode = stat.S_IMODE(fallback_dir(db).stat().st_mode)
    assert mode == 0o700 and stat.S_IMODE(fallback_dir(db).parent.stat().st_mode) == 0o700
    os.chown(fallback_dir(db).parent, _nobody(), -1)
    with pytest.raises(OSError, match="belongs to uid"):
        Journal(db, "c0ffee000003").append({"op": "status", "status": "waiting"})


def test_a_live_journal_swapped_for_a_link_writes_nothing_through_it(tmp_path: Path) -> None:
    db = tmp_path / "diag.duckdb"
    journal = Journal(db, "c0ffee000004")
    journal.append({"op": "status", "status": "waiting"})
    victim = tmp_path / "victim"
    victim.write_bytes(b"")
    journal.path.unlink()
    journal.path.symlink_to(victim)
    with pytest.raises(OSError):
        journal.append({"op": "status", "status": "running"})
    assert victim.read_bytes() == b""


def test_every_level_of_the_fallback_is_private_under_a_permissive_umask(
        tmp_path: Path, tmpdir_shared: Path) -> None:
    db = tmp_path / "diag.duckdb"
    old = os.umask(0)
    try:
        private_dir(fallback_dir(db), top=fallback_dir(db).parent)
    finally:
        os.umask(old)
    for level in (fallback_dir(db).parent, fallback_dir(db)):
        assert stat.S_IMODE(level.stat().st_mode) == 0o700
