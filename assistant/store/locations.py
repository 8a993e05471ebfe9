"""Where the incident store lives: one DuckDB file per user, overridable per run.

The default is the XDG data directory, because the history is the user's own data (not a cache
to be wiped, not configuration): ``$XDG_DATA_HOME/diag/diag.duckdb``, else
``~/.local/share/diag/diag.duckdb``. ``DIAG_DB`` overrides it for a shell (a team's shared
path, a test), ``--db PATH`` for one command; the flag wins over the variable.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_DB = "DIAG_DB"
FILE_NAME = "diag.duckdb"


def data_dir() -> Path:
    """The user's data directory (XDG Base Directory spec), where diag keeps its history."""
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    # The spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "diag"


def default_db_path() -> Path:
    return data_dir() / FILE_NAME


def resolve_db_path(path: str | os.PathLike[str] | None = None) -> Path:
    """``--db PATH`` if given, else ``$DIAG_DB``, else the default; ``~`` is expanded."""
    chosen = os.fspath(path) if path else os.environ.get(ENV_DB, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    return default_db_path()
