"""Where the TUI meets the incident store. Two hooks, to be connected when the store lands.

They are plain functions with no Textual in them so the lead can wire them to
``assistant.store`` without touching a screen; the app calls them off the UI thread (a worker
for ``recent_incidents``, the walk's own thread for the recorder's writes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class IncidentSummary:
    """One line of the home screen's "Recent incidents"."""

    id: str
    title: str
    opened: str = ""  # already formatted for display, e.g. "2024-06-01 03:12"
    status: str = ""
    conclusion: str = ""
    runbooks: tuple[str, ...] = ()
    hosts: int = 0
    critical: int = 0
    findings: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> IncidentSummary:
        """From a row of ``assistant.store.queries.history(con)["incidents"]``."""
        opened = row.get("opened")
        return cls(id=str(row["id"]), title=str(row.get("title") or ""),
                   opened=opened.strftime("%Y-%m-%d %H:%M") if isinstance(opened, datetime)
                   else str(opened or ""),
                   status=str(row.get("status") or ""),
                   conclusion=str(row.get("conclusion") or ""),
                   runbooks=tuple(row.get("runbooks") or ()),
                   hosts=int(row.get("hosts") or 0), critical=int(row.get("critical") or 0),
                   findings=int(row.get("findings") or 0))


def recent_incidents(limit: int = 6) -> list[IncidentSummary]:
    """The newest incidents for the home screen (newest first). Runs in a worker thread."""
    from assistant.store import Store
    from assistant.store.queries import history

    store = Store()
    if not store.exists():
        return []
    rows = store.read(lambda con: history(con, limit=limit))["incidents"]
    return [IncidentSummary.from_row(r) for r in rows]


def record_walk(walk: Any, provider: Any, *, runbook: str, symptom: str,
                hosts: list[str], attrs: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Start recording *walk* in the store; return the store's session id.

    Called once per walk, on the walk's thread (never the UI's: a busy store file must not
    freeze the screen) just before the first step runs; the recorder's writes happen on that
    thread too, one short transaction per finished step.
    """
    from assistant.store import Recorder, Store

    store = Store()
    session = store.open_session(runbook, hosts, attrs, symptom=symptom)
    Recorder(store, session, raw=getattr(provider, "raw", None)).follow(walk)
    return session
