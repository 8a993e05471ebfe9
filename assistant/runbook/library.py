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

from assistant import cache as content_cache
from assistant.locations import search_dirs

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path
    from typing import Any

    from .model import Runbook
    from .validate import Issue

# Strings, not pathlib, on the way to the cached list and index (see assistant.locations).
_HERE = os.path.dirname(os.path.realpath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
# What validation reads besides the runbook: its own code, the schema, the probe catalog.
# Every module of this package (validation is spread over several and the model they build is
# what is cached), not a hand-kept list that a new layer module would silently fall out of.
_VALIDATOR_FILES: tuple[str | os.PathLike[str], ...] = (
    *(os.path.join(_HERE, name) for name in sorted(os.listdir(_HERE)) if name.endswith(".py")),
    os.path.join(_HERE, "runbook.schema.json"),
    os.path.join(_ROOT, "assistant", "yamlfile.py"), os.path.join(_ROOT, "assistant", "cache.py"),
    os.path.join(_ROOT, "probes", "catalog.py"), os.path.join(_ROOT, "probes", "catalog.yaml"),
    # the fault catalogue's codes are catalog codes, and its standing faults a conclusion
    *(os.path.join(_ROOT, "probes", "faults", name)
      for name in sorted(os.listdir(os.path.join(_ROOT, "probes", "faults")))
      if name.endswith((".py", ".yaml"))),
)
_KB_CODE = os.path.join(_ROOT, "assistant", "kb.py")


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


def _kb_files(kb_dirs: Iterable[str | os.PathLike[str]]) -> list[str]:
    return [os.path.join(d, n) for d in kb_dirs for n in _names(d, (".md",))]


def _validator_key(kb_dirs: tuple[str | os.PathLike[str], ...]) -> str:
    """A digest of everything a runbook's validation depends on apart from the runbook: the
    code and data above, and the KB along *kb_dirs* (a runbook may cite only articles that
    exist)."""
    return content_cache.files_key([*_VALIDATOR_FILES, *_kb_files(kb_dirs)], salt="validator")


def _names(directory: str | os.PathLike[str], suffixes: tuple[str, ...]) -> list[str]:
    """The files of *directory* with one of *suffixes*, sorted: what ``sorted(glob)`` gives,
    without pathlib."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(n for n in names if os.path.splitext(n)[1] in suffixes)


def content_files() -> list[str | os.PathLike[str]]:
    """Every file the runbooks and KB articles on the search path are made from, as this code
    validates and parses them: the validator's files, the articles, the runbooks."""
    return [*_VALIDATOR_FILES, _KB_CODE, *_kb_files(search_dirs("kb")),
            *(path for _, path in sorted(_on_search_dirs().items()))]


def content_key() -> str:
    """A digest of ``content_files()``: whatever is built from them alone (the list of
    runbooks, the match index) is cached under it, so a changed byte of any of those files
    builds it again, and an unchanged set costs a stat of each file and no validation."""
    return content_cache.files_key(content_files(), salt="content")


class RunbookEntry:
    """What ``diag runbooks list`` shows of a runbook (and ``diag match`` when nothing
    matches): a line of the list, without the runbook's graph. (A plain class: the list is
    read on every start, without typing or dataclasses.)"""

    __slots__ = ("id", "nodes", "path", "summary", "tags", "title")

    def __init__(self, id: str, title: str, summary: str, tags: tuple[str, ...] | list[str],
                 nodes: int, path: str | None) -> None:
        self.id, self.title, self.summary, self.tags = id, title, summary, tuple(tags)
        self.nodes, self.path = nodes, path

    def plain(self) -> tuple[str, str, str, tuple[str, ...], int, str | None]:
        return (self.id, self.title, self.summary, self.tags, self.nodes, self.path)


def catalogue() -> list[RunbookEntry]:
    """Every runbook on the search path, validated, as list entries sorted by id. Kept in the
    content-keyed cache under ``content_key()``: a warm start loads one small entry instead of
    every runbook's model; an entry exists only if every runbook validated when it was built,
    and any changed byte validates them all again (an invalid one raises RunbookError, as
    ``all_runbooks`` does)."""
    def build() -> list[tuple[str, str, str, tuple[str, ...], int, str | None]]:
        return [RunbookEntry(r.id, r.title, r.summary, r.tags, len(r.nodes),
                             None if r.path is None else str(r.path)).plain()
                for r in all_runbooks()]

    def load(plain: list[tuple[str, str, str, tuple[str, ...], int, str | None]],
             ) -> list[RunbookEntry]:
        return [RunbookEntry(*entry) for entry in plain]

    return content_cache.cached_plain("runbook-list", content_key(), build, load)


def _yaml_files(directory: Path) -> list[Path]:
    return [directory / name for name in _names(directory, (".yaml", ".yml"))]


def _on_search_dirs() -> dict[str, str]:
    """Runbook id (the file's name) -> the file that provides it."""
    found: dict[str, str] = {}
    for directory in search_dirs("runbooks"):
        for name in _names(directory, (".yaml", ".yml")):
            found.setdefault(os.path.splitext(name)[0], os.path.join(directory, name))
    return found


def _on_search_path() -> dict[str, Path]:
    from pathlib import Path

    return {runbook_id: Path(path) for runbook_id, path in _on_search_dirs().items()}


def shadowed(runbook_id: str) -> tuple[str, str] | None:
    """(the file used, the shipped file it hides) when a directory before the shipped one on
    the search path provides *runbook_id* and diag ships one of that id too; else None. The
    front ends say it: a team's copy (or an old one left in ~/.config) walked in place of the
    shipped runbook without a word looked like the shipped runbook misbehaving."""
    from assistant.locations import shipped_dir

    used = _on_search_dirs().get(runbook_id)
    home = shipped_dir("runbooks")
    if used is None or os.path.dirname(used) == home:
        return None
    ships = next((os.path.join(home, name) for name in _names(home, (".yaml", ".yml"))
                  if os.path.splitext(name)[0] == runbook_id), None)
    return None if ships is None else (used, ships)


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
    key = content_cache.digest([_validator_key(tuple(search_dirs("kb"))), str(path),
                                str(named_by_file), data])
    return content_cache.cached("runbooks", key, build, _validated_plain, _validated)


def _validated_plain(result: tuple[Runbook | None, list[Issue]]) -> dict[str, object]:
    """A validation's result as plain data for the start cache (see ``assistant.cache``)."""
    from dataclasses import astuple

    from .model import runbook_plain

    runbook, issues = result
    return {"runbook": None if runbook is None else runbook_plain(runbook),
            "issues": [astuple(issue) for issue in issues]}


def _validated(plain: dict[str, Any]) -> tuple[Runbook | None, list[Issue]]:
    from .issue import Issue
    from .model import runbook_from_plain

    runbook = plain["runbook"]
    return (None if runbook is None else runbook_from_plain(runbook),
            [Issue(*issue) for issue in plain["issues"]])


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
        from pathlib import Path

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
