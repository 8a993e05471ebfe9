"""Files that attack the loader, fed to every kind of file diag reads: each is refused at once,
in one line naming the place, with memory bounded (``assistant.yamlfile``'s limits are shared by
runbooks, inventories, scenarios, thresholds, baselines, KB front matter and rehearsals)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from assistant import yamlfile
from assistant.cli import main
from assistant.kb import ArticleError, load_articles
from assistant.runbook.rehearsal import RehearsalError, load_cases

ROOT = Path(__file__).resolve().parents[1]

# Nine anchors, each nine aliases of the one before: 9**9 (387 million) strings once expanded.
BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi",
                                                                   strict=True))
DEEP_BRACKETS = "[" * 20_000 + "]" * 20_000 + "\n"
DEEP_BLOCKS = "a:\n" + "".join("  " * i + "- \n" for i in range(1, 2_000))
ENDLESS_ALIAS = "a: &a [1, *a]\n"
NOT_UTF8 = b"id: x\ntitle: caf\xe9 latin-1\n"
EMPTY = "# nothing but a comment\n"

HOSTILE: dict[str, tuple[str | bytes, str, str]] = {
    # name: (content, what the one line says, the line it names or "")
    "billion-laughs": (BILLION_LAUGHS, "aliases expand to more than", ""),
    "20000-brackets": (DEEP_BRACKETS, "nested deeper than 64 levels", ":1:"),
    "deep-blocks": (DEEP_BLOCKS, "nested deeper than 64 levels", ""),
    "endless-alias": (ENDLESS_ALIAS, "refers to the value that contains it", ""),
    "not-utf8": (NOT_UTF8, "not UTF-8: byte 0xe9", ":2:"),
    "empty": (EMPTY, "has no YAML in it", ""),
}


def _cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def _kind_runbook(path: Path) -> tuple[int, str]:
    return _cli(["runbooks", "validate", str(path)])


def _kind_inventory(path: Path) -> tuple[int, str]:
    return _cli(["probe", "versions", "--inventory", str(path)])


def _kind_scenario(path: Path) -> tuple[int, str]:
    scenario = path.parent / "scenario.yaml"
    path.rename(scenario)
    return _cli(["probe", "versions", "--scenario", str(scenario)])


def _kind_thresholds(path: Path) -> tuple[int, str]:
    return _cli(["probe", "versions", "--scenario", "demo", "--thresholds", str(path)])


def _kind_baseline(path: Path) -> tuple[int, str]:
    return _cli(["probe", "versions", "--scenario", "demo", "--baseline", str(path)])


def _kind_kb_front_matter(path: Path) -> tuple[int, str]:
    article = path.parent / "article.md"
    content = path.read_bytes()
    article.write_bytes(b"---\n" + content + b"\n---\nbody\n")
    try:
        load_articles(path.parent)  # this directory only, not the shipped set
    except ArticleError as exc:
        return 2, f"diag: {exc}\n"
    return 0, ""


def _kind_rehearsal(path: Path) -> tuple[int, str]:
    try:
        load_cases(path)
    except (yamlfile.YamlFileError, RehearsalError) as exc:
        return 2, f"diag: {exc}\n"
    return 0, ""


KINDS: dict[str, Callable[[Path], tuple[int, str]]] = {
    "runbook": _kind_runbook, "inventory": _kind_inventory, "scenario": _kind_scenario,
    "thresholds": _kind_thresholds, "baseline": _kind_baseline,
    "kb-front-matter": _kind_kb_front_matter, "rehearsal": _kind_rehearsal,
}


@pytest.mark.parametrize("attack", sorted(HOSTILE))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_file_kind_refuses_the_same_hostile_file(kind: str, attack: str,
                                                       tmp_path: Path) -> None:
    content, says, where = HOSTILE[attack]
    path = tmp_path / "hostile.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    # this thread's CPU time: neither the machine's load nor other tests' threads left in
    # this worker process (a session's fleet, a walk's stragglers) count
    started = time.thread_time()
    code, err = KINDS[kind](path)
    spent = time.thread_time() - started
    assert code == 2, err
    assert says in err, err
    if where and kind != "kb-front-matter":  # front matter lines are offset by its ---
        assert f"{path.parent}/" in err and where in err, err
    assert err.count("\n") <= 2 and "Traceback" not in err and "internal error" not in err, err
    assert spent < 1.0, f"{kind}/{attack} took {spent:.2f} s of CPU"


def test_an_oversized_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("x: " + "y" * (yamlfile.MAX_BYTES + 10) + "\n", encoding="utf-8")
    started = time.process_time()
    code, err = _cli(["runbooks", "validate", str(path)])
    assert code == 2 and "larger than 4 MiB" in err, err
    assert time.process_time() - started < 1.0


def test_an_empty_runbook_is_called_empty(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("", encoding="utf-8")
    code, err = _cli(["runbooks", "validate", str(path)])
    assert code == 2 and f"{path}:1:1: yaml: the file is empty" in err, err


def test_a_non_utf8_file_names_the_line_and_column_of_the_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "i.yaml"
    # the bad byte is the 4th character of line 3 (after two multi-byte characters)
    path.write_bytes("hosts:\n  gpu001: {rack: r1}\n  é€\xff: {}\n".encode()
                     .replace(b"\xc3\xbf", b"\xff"))
    code, err = _cli(["probe", "versions", "--inventory", str(path)])
    assert code == 2 and f"{path}:3: not UTF-8: byte 0xff" in err, err
    with pytest.raises(yamlfile.YamlFileError) as refused:
        yamlfile.read_text(path)
    assert refused.value.mark == yamlfile.Mark(3, 5)
    code, err = _cli(["runbooks", "validate", str(path)])
    assert code == 2 and f"{path}:3:5: file: not UTF-8: byte 0xff" in err, err


def _max_rss_kib(argv: list[str]) -> tuple[int, int]:
    """(exit status, peak resident memory in KiB) of a fresh ``diag`` process."""
    proc = subprocess.Popen([sys.executable, "-m", "assistant.cli", *argv], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss


def test_memory_stays_bounded_on_the_bomb(tmp_path: Path) -> None:
    """Before the limits this process grew past a gigabyte (and ended in MemoryError); now it
    costs what validating a real runbook costs, give or take a few MiB."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BILLION_LAUGHS, encoding="utf-8")
    code, bomb_kib = _max_rss_kib(["runbooks", "validate", str(bomb)])
    assert code == 2
    code, real_kib = _max_rss_kib(["runbooks", "validate", str(ROOT / "runbooks" / "hang.yaml")])
    assert code == 0
    assert bomb_kib < real_kib + 20 * 1024, (bomb_kib, real_kib)


@pytest.mark.parametrize("attack", ["20000-brackets", "deep-blocks", "billion-laughs"])
def test_the_python_scanner_used_without_libyaml_refuses_them_too(
        attack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # PyYAML built from source without libyaml has only its Python scanner: the loader falls
    # back to it, with its own bound on brackets (it rescans every open one per new one)
    monkeypatch.setattr(yamlfile, "_CParser", None)
    content, says, _ = HOSTILE[attack]
    assert isinstance(content, str)
    started = time.process_time()
    with pytest.raises(yamlfile.YamlError, match=says):
        yamlfile.load(content)
    assert time.process_time() - started < 2.0


def test_libyaml_and_the_python_scanner_read_every_shipped_file_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = sorted([*(ROOT / "runbooks").glob("*.yaml"), *(ROOT / "probes").glob("*.yaml")])
    assert len(shipped) > 9
    fast = {path: yamlfile.load(path.read_text()) for path in shipped}
    monkeypatch.setattr(yamlfile, "_CParser", None)
    for path in shipped:
        slow = yamlfile.load(path.read_text())
        assert (slow.data, slow.marks) == (fast[path].data, fast[path].marks), path
