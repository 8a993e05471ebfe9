"""The incident store: every walk recorded in DuckDB, and the questions asked of the history.

``Store`` is a path plus short-lived connections (several diag processes share the file);
``Recorder`` is the walk listener that writes each step as it finishes; ``history``,
``correlate`` and ``reports`` answer ``diag history / correlate / query / report``. Nothing
here imports the TUI.
"""

from __future__ import annotations

from .base import StoreBusyError, StoreError, StoreMissingError, StoreVersionError
from .db import Store, current_operator
from .locations import default_db_path, resolve_db_path
from .recorder import Recorder

__all__ = ["Recorder", "Store", "StoreBusyError", "StoreError", "StoreMissingError",
           "StoreVersionError", "current_operator", "default_db_path", "resolve_db_path"]
