"""Where the TUI reads the incident store: recent incidents, history, a node's past, drills.

Plain functions with no Textual in them, called off the UI thread (in workers), so a busy store
file never freezes the screen. Recording a walk goes through ``assistant.walks`` like the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

T = TypeVar("T")


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
    simulated: bool = False

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> IncidentSummary:
        """From a row of ``assistant.store.history.history(con)["incidents"]``."""
        opened = row.get("opened")
        return cls(id=str(row["id"]), title=str(row.get("title") or ""),
                   opened=opened.strftime("%Y-%m-%d %H:%M") if isinstance(opened, datetime)
                   else str(opened or ""),
                   status=str(row.get("status") or ""),
                   conclusion=str(row.get("conclusion") or ""),
                   runbooks=tuple(row.get("runbooks") or ()),
                   hosts=int(row.get("hosts") or 0), critical=int(row.get("critical") or 0),
                   findings=int(row.get("findings") or 0),
                   simulated=bool(row.get("simulated")))


def _read_store(empty: T, read: Callable[[Any], T]) -> T:
    """*read* over the store, or *empty* while there is no store file yet (a first start, a
    clean HOME): that is an empty history, not an error."""
    from assistant.store import Store

    store = Store()
    return store.read(read) if store.exists() else empty


def recent_incidents(limit: int = 6, include_simulated: bool = False) -> list[IncidentSummary]:
    """The newest incidents for the home screen (newest first). Runs in a worker thread.
    Simulated ones (replayed scenarios) only when asked: the demo lists its own walks."""
    from assistant.store.history import history

    rows: list[dict[str, Any]] = _read_store({"incidents": []}, lambda con: history(
        con, limit=limit, include_simulated=include_simulated))["incidents"]
    return [IncidentSummary.from_row(r) for r in rows]


# --- the history screen and the node view (store reads, called in workers) ---------------------

def history_rows(*, host: str = "", runbook: str = "", code: str = "", since: str = "30d",
                 limit: int = 200, include_simulated: bool = False) -> dict[str, Any]:
    """``history.history`` with the screen's filters (empty = no filter; *since* like "7d" or
    "all"; *include_simulated*: over a replayed scenario, its walks too). No store file yet:
    an empty answer, not an error."""
    from assistant.store.history import history, parse_since

    window = parse_since(since)
    return _read_store({"incidents": [], "findings": [], "counts": {}},
                       lambda con: history(con, host=host.strip() or None, since=window,
                                           runbook=runbook.strip() or None,
                                           code=code.strip() or None, limit=limit,
                                           include_simulated=include_simulated))


def incident_detail(incident_id: str) -> dict[str, Any]:
    """One incident's sessions (oldest first) and their findings (the store's query)."""
    from assistant.store.views import incident_detail as read

    return _read_store({"sessions": [], "findings": []}, lambda con: read(con, incident_id))


def incident_walks(incident_id: str) -> dict[str, Any]:
    """One incident's walks for the incident screen (the store's query)."""
    from assistant.store.views import incident_walks as read

    return _read_store({"incident": {"id": incident_id}, "sessions": []},
                       lambda con: read(con, incident_id))


def saved_walk(session: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A recorded session and the walk state to resume it from (``walks.load_saved``)."""
    from assistant.store import Store
    from assistant.walks import load_saved

    return load_saved(Store(), session)


def node_history(host: str, include_simulated: bool = False) -> dict[str, Any]:
    """A host's past incidents and findings (``history.history(host=...)``, all time) and its
    own findings row by row (newest first)."""
    from assistant.store.history import history
    from assistant.store.views import host_findings

    def read(con: Any) -> dict[str, Any]:
        result = history(con, host=host, limit=200, include_simulated=include_simulated)
        result["rows"] = host_findings(con, host, limit=200)
        return result

    return _read_store({"incidents": [], "findings": [], "rows": [], "host": {"host": host}}, read)


def close_incident(incident: str, cause: str) -> None:
    """Close *incident* with *cause* as its root cause (the walk's conclusion)."""
    from assistant.store import Store

    Store().close_incident(incident, cause)


# --- drills ------------------------------------------------------------------------------------

def record_drill(score: Any) -> list[dict[str, Any]]:
    """Write a finished drill's score; return the trainee's drills, newest first."""
    from assistant.store import Store
    from assistant.store.drills import drill_scores, write_drill

    store = Store()
    store.write(lambda con: write_drill(con, score))
    return store.read(lambda con: drill_scores(con, score.trainee))


def drilled(trainee: str) -> set[str]:
    """The scenarios *trainee* already drilled (none without a store)."""
    from assistant.store.drills import drilled_scenarios

    return _read_store(set(), lambda con: drilled_scenarios(con, trainee))
