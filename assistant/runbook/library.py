"""Finding and loading runbooks: the shipped ones, or files an author points at.

A runbook is validated before it is used, and the result is kept in the content-keyed cache
(``assistant.cache``): the key covers the file's bytes and everything validation reads (the
probe catalog, the schema, the KB, the validator's own code), so an unchanged runbook is not
validated again on every start, and a changed byte anywhere is validated afresh. The validator
(jsonschema, networkx) is imported only when something has to be validated.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from assistant import cache as content_cache
from assistant.locations import kb_dir, runbooks_dir

from .model import Runbook

if TYPE_CHECKING:
    from .validate import Issue

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent.parent
# What validation reads besides the runbook: its own code, the schema, the probe catalog.
_VALIDATOR_FILES = (
    _HERE / "validate.py", _HERE / "conditions.py", _HERE / "model.py", _HERE / "library.py",
    _HERE / "runbook.schema.json", _ROOT / "assistant" / "yamlfile.py",
    _ROOT / "assistant" / "cache.py", _ROOT / "probes" / "catalog.py",
    _ROOT / "probes" / "catalog.yaml",
)


class RunbookError(Exception):
    """A runbook that failed validation; carries every issue found."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__("\n".join(map(str, issues)))
        self.issues = issues


def runbook_files(paths: Iterable[Path] | None = None) -> list[Path]:
    """YAML files named by *paths* (files or directories), or every shipped runbook."""
    found: list[Path] = []
    for path in paths if paths is not None else [runbooks_dir()]:
        if path.is_dir():
            found.extend(sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml")))
        else:
            found.append(path)
    return found


@cache
def _validator_key() -> str:
    """A digest of everything a runbook's validation depends on apart from the runbook: the
    code and data above, and the KB (a runbook may cite only articles that exist)."""
    kb_files = sorted(kb_dir().glob("*.md"))
    return content_cache.digest(content_cache.file_bytes([*_VALIDATOR_FILES, *kb_files]))


def runbooks_key(paths: Iterable[Path] | None = None) -> str:
    """A digest of the runbooks in *paths* (default: the shipped ones) as this code validates
    them, for caches built from them."""
    files = runbook_files(paths)
    return content_cache.digest([_validator_key(), *content_cache.file_bytes(files)])


def validate_file(path: Path) -> tuple[Runbook | None, list[Issue]]:
    """The runbook in *path* and every issue found (the model only when there are none)."""
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
        return validate_text(text, str(path))

    if data is None:
        return build()
    key = content_cache.digest([_validator_key(), str(path), data])
    return content_cache.cached("runbooks", key, build)


def load_runbook(path: Path) -> Runbook:
    runbook, issues = validate_file(path)
    if runbook is None:
        raise RunbookError(issues)
    return runbook


def shipped_ids() -> list[str]:
    return [p.stem for p in runbook_files()]


def get_runbook(runbook_id: str) -> Runbook:
    """A shipped runbook by id; KeyError names the ids that exist."""
    path = runbooks_dir() / f"{runbook_id}.yaml"
    if not path.is_file():
        raise KeyError(f"no runbook '{runbook_id}' (known: {', '.join(shipped_ids())})")
    return load_runbook(path)


def all_runbooks() -> list[Runbook]:
    return [load_runbook(p) for p in runbook_files()]
