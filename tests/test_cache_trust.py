"""The start cache decides what a runbook *is*: no other user's file may run or steer it.

The attacks of issue 27 item 1, as an attacker with a second local account would try them on a
shared login node where diag runs as root: entries replaced by payloads that run when loaded,
a cache made under a permissive umask that another user could then write, a cache directory
(``XDG_CACHE_HOME`` in a shared place) that another user made first. Multi-user cases run as
root with ``nobody`` as the other user, like the attack did.
"""

from __future__ import annotations

import os
import pickle
import pwd
import stat
from pathlib import Path

import pytest

from assistant import cache as content_cache
from assistant.kb import load_articles
from assistant.runbook.library import all_runbooks, load_runbook
from probes import shipped
from probes.xid import CATALOG_FILE

ROOT = Path(__file__).resolve().parent.parent
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another user")


def _nobody() -> int:
    return pwd.getpwnam("nobody").pw_uid


class _Payload:
    """Unpickling this runs ``open(marker, "w")``: what a planted pickle could run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def _entries(cache: Path) -> list[Path]:
    return [path for path in cache.rglob("*") if path.is_file()]


def test_a_planted_entry_never_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every entry of a warm cache replaced by a pickle whose loading writes a file: the next
    load runs none of them and still gives the right runbook (the entries are rebuilt)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DIAG_CACHE_DIR", str(cache))
    path = tmp_path / "hang.yaml"
    path.write_bytes((ROOT / "runbooks" / "hang.yaml").read_bytes())
    expected = load_runbook(path)
    load_articles()
    marker = tmp_path / "ran"
    planted = _entries(cache)
    assert planted
    for entry in planted:
        entry.write_bytes(pickle.dumps(_Payload(marker)))
        entry.with_suffix(".pickle").write_bytes(pickle.dumps(_Payload(marker)))
    assert load_runbook(path) == expected
    load_articles()
    assert not marker.exists()


def test_every_level_is_private_under_a_permissive_umask(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "a" / "b" / "diag"
    monkeypatch.setenv("DIAG_CACHE_DIR", str(cache))
    old = os.umask(0)
    try:
        assert content_cache.cached("kind", "k", lambda: [1]) == [1]
    finally:
        os.umask(old)
    for level in (tmp_path / "a", tmp_path / "a" / "b", cache, cache / "kind"):
        assert stat.S_IMODE(level.stat().st_mode) == 0o700, level
    (entry,) = _entries(cache)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def _plant(cache: Path, value: object) -> None:
    """A cache entry under kind/k holding *value*, as diag would have written it."""
    assert content_cache.cached("kind", "k", lambda: value) == value


def test_a_cache_others_may_write_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "diag"
    monkeypatch.setenv("DIAG_CACHE_DIR", str(cache))
    _plant(cache, ["planted"])
    cache.chmod(0o777)  # as the umask-000 cache of the report came out
    assert content_cache.cached("kind", "k", lambda: ["built"]) == ["built"]
    err = capsys.readouterr().err
    assert err.count("not using the cache") == 1 and str(cache) in err
    assert "others may write" in err
    cache.chmod(0o700)
    (cache / "kind").chmod(0o770)
    assert content_cache.cached("kind", "k", lambda: ["built"]) == ["built"]
    (cache / "kind").chmod(0o700)
    (cache / "kind" / "k.json").chmod(0o666)
    assert content_cache.cached("kind", "k", lambda: ["built"]) == ["built"]


@as_root
def test_a_cache_another_user_made_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """XDG_CACHE_HOME in a shared directory where another user made ``diag`` first (0700, so
    only its owner's entries are in it): nothing of it is read, nothing written into it."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    monkeypatch.delenv("DIAG_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    cache = shared / "diag"
    _plant(cache, ["planted"])
    for path in [cache, *cache.rglob("*")]:
        os.chown(path, _nobody(), -1)
    assert content_cache.cached("kind", "k", lambda: ["built"]) == ["built"]
    assert content_cache.cached("kind", "other", lambda: ["built"]) == ["built"]
    assert not (cache / "kind" / "other.json").exists()
    err = capsys.readouterr().err
    assert f"not using the cache at {cache}: it belongs to uid {_nobody()}" in err


@as_root
def test_an_entry_another_user_owns_is_not_used(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "diag"
    monkeypatch.setenv("DIAG_CACHE_DIR", str(cache))
    _plant(cache, ["planted"])
    os.chown(cache / "kind" / "k.json", _nobody(), -1)
    assert content_cache.cached("kind", "k", lambda: ["built"]) == ["built"]


def test_an_entry_that_is_a_symbolic_link_is_not_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "diag"
    monkeypatch.setenv("DIAG_CACHE_DIR", str(cache))
    _plant(cache, ["mine"])
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('["planted"]')
    entry = cache / "kind" / "k.json"
    entry.unlink()
    entry.symlink_to(elsewhere)
    assert content_cache.cached("kind", "k", lambda: ["built"]) == ["built"]


def test_what_is_cached_comes_back_the_same(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries are JSON, which has no tuples, sets or integer keys: every shipped runbook, the
    KB and the XID catalog (integer keys) come back from a warm cache equal to a cold load."""
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "cold"))
    cold = (all_runbooks(), load_articles(), shipped.data(CATALOG_FILE))
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "warm"))
    (all_runbooks(), load_articles(), shipped.data(CATALOG_FILE))  # fills the cache
    warm = (all_runbooks(), load_articles(), shipped.data(CATALOG_FILE))
    assert warm == cold


@pytest.mark.parametrize("value", [
    {"a": (1, 2.5, None), 79: ["x"], (1, "b"): frozenset({"t"})},
    {"\x00tuple": [1]},  # a mapping that looks like a tag stays a mapping
    [(), frozenset(), {}, "", float("inf"), True, -3],
])
def test_plain_data_keeps_its_types(value: object, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path))
    assert content_cache.cached("kind", "k", lambda: value) == value
    stored = content_cache.cached("kind", "k", lambda: None)
    assert stored == value and type(stored) is type(value)
    assert repr(stored) == repr(value)
