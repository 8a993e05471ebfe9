"""Finding and loading runbooks: the shipped ones, or files an author points at."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from assistant import yamlfile
from assistant.locations import runbooks_dir

from .model import Runbook
from .validate import Issue, validate_text


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


def validate_file(path: Path) -> tuple[Runbook | None, list[Issue]]:
    try:
        text = yamlfile.read_text(path)  # bounded, UTF-8 with the bad byte's position
    except yamlfile.YamlFileError as exc:
        mark = exc.mark or yamlfile.Mark(1, 1)
        return None, [Issue(str(path), mark.line, mark.column, "file", None, exc.message)]
    return validate_text(text, str(path))


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
