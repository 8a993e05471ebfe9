"""The content-keyed cache behind fast starts: a warm `diag match` / `diag runbooks list`
validates nothing (no jsonschema, no networkx, no YAML parse), and any changed byte of a
runbook is validated again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assistant import cache as content_cache
from assistant.locations import kb_dir
from assistant.runbook import library
from assistant.runbook.library import RunbookError, load_runbook

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("jsonschema", "networkx", "yaml", "duckdb", "paramiko", "textual")


def _loaded_after(argv: list[str], cache: Path, modules: tuple[str, ...] = HEAVY) -> list[str]:
    code = ("import sys, io; from assistant.cli import main\n"
            "sys.stdout = io.StringIO()\n"
            f"code = main({argv!r})\n"
            "sys.stdout = sys.__stdout__\n"
            f"print(code, sorted(m for m in {modules!r} if m in sys.modules))")
    env = {**os.environ, "DIAG_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip().split(maxsplit=1)


# What a warm start of the two commands does not need either (each a few milliseconds of the
# 0.15 s a start may take): argparse (a plain command line skips it), pathlib, dataclasses;
# `runbooks list` not even typing or rapidfuzz. Never pickle: entries are JSON.
LIGHT = {"match": ("argparse", "pathlib", "pickle", "dataclasses"),
         "runbooks": ("argparse", "pathlib", "pickle", "dataclasses", "typing",
                      "rapidfuzz")}


@pytest.mark.parametrize("argv", [["match", "nccl watchdog timeout"], ["runbooks", "list"]])
def test_a_warm_start_validates_nothing(argv: list[str], tmp_path: Path) -> None:
    cold = _loaded_after(argv, tmp_path)
    assert cold[0] == "0" and "networkx" in cold[1]  # the first start did validate
    warm = _loaded_after(argv, tmp_path)
    assert warm == ["0", "[]"]
    assert _loaded_after(argv, tmp_path, LIGHT[argv[0]]) == ["0", "[]"]


def test_an_edited_runbook_is_validated_again(tmp_path: Path) -> None:
    path = tmp_path / "hang.yaml"
    shutil.copy(ROOT / "runbooks" / "hang.yaml", path)
    assert load_runbook(path).id == "hang"
    assert load_runbook(path).id == "hang"  # from the cache
    text = path.read_text()
    path.write_text(text.replace("start: ", "start: no-such-node-", 1))
    with pytest.raises(RunbookError, match="no-such-node"):
        load_runbook(path)


def test_a_changed_validator_input_changes_every_key(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """The catalog, schema, KB and code are in the key: a probe removed from the catalog
    must make a runbook that uses it fail again, not load from an old entry; an article
    added to a team's KB directory (a runbook may now cite it) changes it too."""
    team_kb = tmp_path / "kb"
    team_kb.mkdir()
    dirs = (team_kb, kb_dir())
    before = library._validator_key(dirs)
    (team_kb / "new.md").write_text("---\nid: new\n---\n")
    with_article = library._validator_key(dirs)
    assert with_article != before
    extra = tmp_path / "catalog.yaml"
    extra.write_text("changed")
    monkeypatch.setattr(library, "_VALIDATOR_FILES", (*library._VALIDATOR_FILES, extra))
    assert library._validator_key(dirs) not in (before, with_article)


def test_a_damaged_entry_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path))
    assert content_cache.cached("x", "k", lambda: [1]) == [1]
    (tmp_path / "x" / "k.json").write_bytes(b"not JSON")
    assert content_cache.cached("x", "k", lambda: [2]) == [2]
    assert content_cache.cached("x", "k", lambda: [3]) == [2]


def test_a_damaged_plain_entry_is_rebuilt(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path))

    def load(value: list[tuple[str, int]]) -> dict[str, int]:
        return dict(value)

    assert content_cache.cached_plain("x", "k", lambda: [("a", 1)], load) == {"a": 1}
    (entry,) = (tmp_path / "x").iterdir()
    entry.write_bytes(b"not JSON")
    assert content_cache.cached_plain("x", "k", lambda: [("b", 2)], load) == {"b": 2}
    entry.write_bytes(b'"a string, not pairs"')
    assert content_cache.cached_plain("x", "k", lambda: [("c", 3)], load) == {"c": 3}
    assert content_cache.cached_plain("x", "k", lambda: [("d", 4)], load) == {"c": 3}


def test_cache_off_and_unwritable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAG_CACHE_DIR", "off")
    assert content_cache.cached("x", "k", lambda: 1) == 1
    assert content_cache.cached("x", "k", lambda: 2) == 2
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("DIAG_CACHE_DIR", str(blocker / "sub"))  # cannot be created
    assert content_cache.cached("x", "k", lambda: 3) == 3


def test_the_runbook_list_is_validated_again_after_any_changed_byte(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`diag runbooks list` and `diag match` read one cached list and index: a byte changed in
    a runbook on the search path, in an article, or in the validator's code must validate again
    (a broken runbook is refused, not listed from the old entry)."""
    team = tmp_path / "team"
    team.mkdir()
    mine = team / "mine.yaml"
    mine.write_text((ROOT / "runbooks" / "hang.yaml").read_text().replace("id: hang", "id: mine"))
    monkeypatch.setenv("DIAG_RUNBOOKS", str(team))
    assert "mine" in [entry.id for entry in library.catalogue()]
    key = library.content_key()
    assert library.content_key() == key
    text = mine.read_text()
    broken = text.replace("start: ", "start: X", 1)  # one byte more: a node that does not exist
    mine.write_text(broken)
    assert library.content_key() != key
    with pytest.raises(RunbookError, match="X"):
        library.catalogue()
    mine.write_text(text)
    assert library.content_key() == key
    team_kb = tmp_path / "kb"
    team_kb.mkdir()
    monkeypatch.setenv("DIAG_KB", str(team_kb))
    (team_kb / "a.md").write_text("---\nid: a\ntitle: A\ntags: []\naliases: []\n---\nbody\n")
    with_article = library.content_key()
    assert with_article != key
    (team_kb / "a.md").write_text("---\nid: a\ntitle: B\ntags: []\naliases: []\n---\nbody\n")
    assert library.content_key() not in (key, with_article)
    code = tmp_path / "check_graph.py"
    code.write_text("changed")
    monkeypatch.setattr(library, "_VALIDATOR_FILES", (*library._VALIDATOR_FILES, code))
    assert library.content_key() not in (key, with_article)


def _counting_digest(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the times files_key hashes (instead of answering from the stat memo)."""
    calls: list[int] = []
    real = content_cache.digest

    def counted(parts: list[bytes | str]) -> str:
        calls.append(1)
        return real(parts)

    monkeypatch.setattr(content_cache, "digest", counted)
    return calls


def test_the_stat_memo_sees_a_rewrite_that_keeps_size_and_mtime(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A start answers from the files' remembered stats only while every stat is unchanged: a
    same-size rewrite whose mtime is put back (cp -p, rsync -t, an editor keeping times) still
    moves the ctime, so the file is hashed again and the new bytes give a new key."""
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "hang.yaml"
    path.write_bytes(b"start: a\n")
    before = path.stat()
    # Read as if 10 s after the write: the file has settled and its stat is remembered.
    now = content_cache.time.time_ns() + 10 * content_cache.SETTLED_NS
    monkeypatch.setattr(content_cache.time, "time_ns", lambda: now)
    hashed = _counting_digest(monkeypatch)
    first = content_cache.files_key([path])
    assert content_cache.files_key([path]) == first and len(hashed) == 1  # the memo answered
    while path.stat().st_ctime_ns == before.st_ctime_ns:  # a new clock tick (milliseconds)
        path.write_bytes(b"start: b\n")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size, before.st_mtime_ns, before.st_ino)
    assert content_cache.files_key([path]) not in (first, None)
    assert content_cache.files_key([path]) == content_cache.digest(
        ["", *content_cache.file_bytes([path])])


def test_a_file_written_just_now_is_hashed_on_every_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second write in the same clock tick as the first leaves every stat as it was: so a
    file younger than SETTLED_NS is never answered from the memo."""
    monkeypatch.setenv("DIAG_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "hang.yaml"
    path.write_bytes(b"start: a\n")
    hashed = _counting_digest(monkeypatch)
    content_cache.files_key([path])
    content_cache.files_key([path])
    assert len(hashed) == 2
