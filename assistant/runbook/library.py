"""Finding and loading runbooks: along the search path (a team's directories, then the
shipped ones: ``locations.search_path``), or a file an author points at.

A runbook is validated before it is used, and the result is kept in the content-keyed cache
(``assistant.cache``): the key covers the file's bytes and everything validation reads (the
probe catalog, the schema, the KB on the search path, the validator's own code), so an
unchanged runbook is not validated again on every start, and a changed byte anywhere is
validated afresh. The validator (jsonschema, networkx) is imported only when something has to
be validated.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from assistant import cache as content_cache
from assistant.locations import search_path

if TYPE_CHECKING:
    from .model import Runbook
    from .validate import Issue

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent.parent
# What validation reads besides the runbook: its own code, the schema, the probe catalog.
# Every module of this package (validation is spread over several and the model they build is
# what is cached), not a hand-kept list that a new layer module would silently fall out of.
_VALIDATOR_FILES = (
    *sorted(_HERE.glob("*.py")), _HERE / "runbook.schema.json",
    _ROOT / "assistant" / "yamlfile.py", _ROOT / "assistant" / "cache.py",
    _ROOT / "probes" / "catalog.py", _ROOT / "probes" / "catalog.yaml",
)


class RunbookError(Exception):
    """A runbook that failed validation; carries every issue found."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__("\n".join(map(str, issues)))
        self.issues = issues


def runbook_files(paths: Iterable[Path] | None = None) -> list[Path]:
    """YAML files named by *paths* (files or directories), or every runbook on the search
    path (one per id: the first directory that has it wins, so a team's file overrides the
    shipped one of the same name), sorted by id."""
    if paths is None:
        return [path for _, path in sorted(_on_search_path().items())]
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(_yaml_files(path))
        else:
            found.append(path)
    return found


def _validator_key(kb_dirs: tuple[Path, ...]) -> str:
    """A digest of everything a runbook's validation depends on apart from the runbook: the
    code and data above, and the KB along *kb_dirs* (a runbook may cite only articles that
    exist). Hashed once per process for each state of those files (their stat)."""
    files = [*_VALIDATOR_FILES,
             *(path for directory in kb_dirs for path in sorted(directory.glob("*.md")))]
    return _files_digest(tuple((path, *_stat(path)) for path in files))


def _stat(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


@cache
def _files_digest(files: tuple[tuple[Path, int, int], ...]) -> str:
    return content_cache.digest(content_cache.file_bytes([path for path, *_ in files]))


def _names(directory: Path, suffixes: tuple[str, ...]) -> list[str]:
    """The files of *directory* with one of *suffixes*, sorted: what ``sorted(glob)`` gives,
    without building a Path for each."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(n for n in names if os.path.splitext(n)[1] in suffixes)


_KB_CODE = _ROOT / "assistant" / "kb.py"


def content_key() -> str:
    """A digest of every byte the runbooks and KB articles on the search path are made from,
    as this code validates and parses them: the validator's files, the articles, the runbooks
    (each with the id the search path gives it). Whatever is built from them alone (the list
    of runbooks, the match index) is cached under it, so a changed byte of any of those files
    builds it again, and an unchanged set costs a read of each file and no validation."""
    kb_files = [d / n for d in search_path("kb") for n in _names(d, (".md",))]
    files = [*_VALIDATOR_FILES, _KB_CODE, *kb_files, *runbook_files()]
    return content_cache.digest([str(len(kb_files)), *content_cache.file_bytes(files)])


class RunbookEntry(NamedTuple):
    """What ``diag runbooks list`` shows of a runbook (and ``diag match`` when nothing
    matches): a line of the list, without the runbook's graph."""

    id: str
    title: str
    summary: str
    tags: tuple[str, ...]
    nodes: int
    path: str | None


def catalogue() -> list[RunbookEntry]:
    """Every runbook on the search path, validated, as list entries sorted by id. Kept in the
    content-keyed cache under ``content_key()``: a warm start loads one small pickle instead
    of every runbook's model; an entry exists only if every runbook validated when it was
    built, and any changed byte validates them all again (an invalid one raises
    RunbookError, as ``all_runbooks`` does)."""
    def build() -> list[RunbookEntry]:
        return [RunbookEntry(r.id, r.title, r.summary, tuple(r.tags), len(r.nodes),
                             None if r.path is None else str(r.path)) for r in all_runbooks()]

    return content_cache.cached("runbook-list", content_key(), build)


def _yaml_files(directory: Path) -> list[Path]:
    return [directory / name for name in _names(directory, (".yaml", ".yml"))]


def _on_search_path() -> dict[str, Path]:
    """Runbook id (the file's name) -> the file that provides it."""
    found: dict[str, Path] = {}
    for directory in search_path("runbooks"):
        for path in _yaml_files(directory):
            found.setdefault(path.stem, path)
    return found


def is_path(ref: str) -> bool:
    """Does *ref* name a file (``./team.yaml``, ``x/y.yaml``) rather than a runbook id?"""
    return "/" in ref or ref.endswith((".yaml", ".yml")) or ref.startswith(".")


def validate_file(path: Path, *, named_by_file: bool = True,
                  ) -> tuple[Runbook | None, list[Issue]]:
    """The runbook in *path* and every issue found (the model only when there are none).
    *named_by_file*: see ``validate_text`` (False for a file given by path)."""
    try:
        data = path.read_bytes()
    except OSError:
        data = None  # said by the uncached path below, worded as for every user file

    def build() -> tuple[Runbook | None, list[Issue]]:
        from assistant import yamlfile

        from .validate import Issue, validate_text

        try:
            text = yamlfile.read_text(path)  # bounded, UTF-8 with the bad byte's position
        except yamlfile.YamlFileError as exc:
            mark = exc.mark or yamlfile.Mark(1, 1)
            return None, [Issue(str(path), mark.line, mark.column, "file", None, exc.message)]
        return validate_text(text, str(path), named_by_file=named_by_file)

    if data is None:
        return build()
    key = content_cache.digest([_validator_key(tuple(search_path("kb"))), str(path),
                                str(named_by_file), data])
    return content_cache.cached("runbooks", key, build)


def load_runbook(path: Path, *, named_by_file: bool = True) -> Runbook:
    runbook, issues = validate_file(path, named_by_file=named_by_file)
    if runbook is None:
        raise RunbookError(issues)
    return runbook


def shipped_ids() -> list[str]:
    """Every runbook id on the search path (the shipped ones and a team's)."""
    return sorted(_on_search_path())


def get_runbook(runbook_id: str) -> Runbook:
    """A runbook by id along the search path, or by file path (``./team-runbook.yaml``);
    KeyError names the ids that exist, RunbookError carries a file's problems."""
    if is_path(runbook_id):
        file = Path(runbook_id).expanduser()
        if not file.is_file():
            raise KeyError(f"no runbook file '{runbook_id}'")
        return load_runbook(file, named_by_file=False)
    found = _on_search_path().get(runbook_id)
    if found is None:
        raise KeyError(f"no runbook '{runbook_id}' (known: {', '.join(shipped_ids())}; "
                       "a file: ./NAME.yaml)")
    return load_runbook(found)


def all_runbooks() -> list[Runbook]:
    return [load_runbook(p) for p in runbook_files()]
