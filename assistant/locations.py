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

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from pathlib import Path

# Strings, not pathlib: `diag match` and `diag runbooks list` find their files without
# importing pathlib (and the urllib.parse and ipaddress it pulls in); the functions that hand
# out Paths import it when called.
_PACKAGE = os.path.dirname(os.path.realpath(__file__))
# Directories given on the command line (--runbooks, --kb), highest priority first.
_COMMAND_LINE: dict[str, list[str]] = {"runbooks": [], "kb": []}
_ENV = {"runbooks": "DIAG_RUNBOOKS", "kb": "DIAG_KB"}


def _data_dir(name: str) -> str:
    """The shipped data directory *name* ("runbooks", "kb", "fixtures"), as a string."""
    # An installed wheel carries the data under assistant/_data (see pyproject's
    # force-include); an editable install or a checkout has it at the repository root.
    shipped = os.path.join(_PACKAGE, "_data", name)
    if os.path.isdir(shipped):
        return shipped
    return os.path.join(os.path.dirname(_PACKAGE), name)


shipped_dir = _data_dir


def _path(directory: str) -> Path:
    from pathlib import Path

    return Path(directory)


def runbooks_dir() -> Path:
    """The shipped runbooks."""
    return _path(_data_dir("runbooks"))


def kb_dir() -> Path:
    """The shipped KB articles."""
    return _path(_data_dir("kb"))


def fixtures_dir() -> Path:
    return _path(_data_dir("fixtures"))


def _config_dir() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "diag")


def config_dir() -> Path:
    """The operator's diag configuration: $XDG_CONFIG_HOME/diag, else ~/.config/diag."""
    return _path(_config_dir())


def use_dirs(kind: str, dirs: list[str] | list[Path]) -> None:
    """Put *dirs* (``--runbooks`` / ``--kb``) first on the *kind* search path, in order."""
    _COMMAND_LINE[kind] = [os.path.expanduser(os.fspath(d)) for d in dirs]


def search_dirs(kind: str) -> list[str]:
    """Where *kind* ("runbooks" or "kb") is looked up, highest priority first (directories
    that do not exist are left out, except that the shipped one is always last)."""
    env = [os.path.expanduser(p) for p in os.environ.get(_ENV[kind], "").split(os.pathsep)
           if p.strip()]
    shipped = shipped_dir(kind)
    found: list[str] = []
    seen: set[str] = set()
    for directory in [*_COMMAND_LINE[kind], *env, os.path.join(_config_dir(), kind)]:
        real = os.path.realpath(directory)
        if os.path.isdir(directory) and real not in seen:
            found.append(directory)
            seen.add(real)
    return [*found, shipped]


def search_path(kind: str) -> list[Path]:
    """``search_dirs`` as Paths."""
    return [_path(directory) for directory in search_dirs(kind)]
