"""Where diag's data lives: the shipped runbooks and KB (in a wheel or a checkout alike), and
the search path a team adds its own to without touching the package.

Runbooks and KB articles are looked up along a search path, first match wins (by runbook id =
file name, by article id): ``--runbooks DIR`` / ``--kb DIR`` (the command line, in the order
given), then ``$DIAG_RUNBOOKS`` / ``$DIAG_KB`` (directories separated by ``:``), then
``~/.config/diag/runbooks`` / ``~/.config/diag/kb`` (``$XDG_CONFIG_HOME``), then the shipped
ones. So a team adds runbooks and overrides a shipped one by giving its file the same name
(docs/runbook-format.md, "Where runbooks are found").
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# Directories given on the command line (--runbooks, --kb), highest priority first.
_COMMAND_LINE: dict[str, list[Path]] = {"runbooks": [], "kb": []}
_ENV = {"runbooks": "DIAG_RUNBOOKS", "kb": "DIAG_KB"}


def _data_dir(name: str) -> Path:
    # An installed wheel carries the data under assistant/_data (see pyproject's
    # force-include); an editable install or a checkout has it at the repository root.
    shipped = _PACKAGE / "_data" / name
    if shipped.is_dir():
        return shipped
    return _PACKAGE.parent / name


def runbooks_dir() -> Path:
    """The shipped runbooks."""
    return _data_dir("runbooks")


def kb_dir() -> Path:
    """The shipped KB articles."""
    return _data_dir("kb")


def fixtures_dir() -> Path:
    return _data_dir("fixtures")


def config_dir() -> Path:
    """The operator's diag configuration: $XDG_CONFIG_HOME/diag, else ~/.config/diag."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "diag"


def use_dirs(kind: str, dirs: list[str] | list[Path]) -> None:
    """Put *dirs* (``--runbooks`` / ``--kb``) first on the *kind* search path, in order."""
    _COMMAND_LINE[kind] = [Path(d).expanduser() for d in dirs]


def search_path(kind: str) -> list[Path]:
    """Where *kind* ("runbooks" or "kb") is looked up, highest priority first (directories
    that do not exist are left out, except that the shipped one is always last)."""
    env = [Path(p).expanduser() for p in os.environ.get(_ENV[kind], "").split(os.pathsep)
           if p.strip()]
    shipped = runbooks_dir() if kind == "runbooks" else kb_dir()
    found: list[Path] = []
    for directory in [*_COMMAND_LINE[kind], *env, config_dir() / kind]:
        if directory.is_dir() and directory.resolve() not in {d.resolve() for d in found}:
            found.append(directory)
    return [*found, shipped]
