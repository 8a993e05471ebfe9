"""What the front ends show of the history that no report prints: one incident's sessions with
their findings (the history screen), or with the path each took, its actions and whether it
can be resumed (the incident screen); a host's own findings row by row (the node screen).
Kept with the store's other queries so that no front end writes its own SQL against the
schema.
"""

from __future__ import annotations

from typing import Any

from .base import Connection, fetch_rows

# Session statuses ``diag --resume`` can continue.
RESUMABLE = ("waiting", "interrupted", "running")


def incident_detail(con: Connection, incident: str) -> dict[str, Any]:
    """One incident's sessions (oldest first) and their findings, one row per finding and
    host."""
    sessions = fetch_rows(con, """
        SELECT id, runbook, operator, started, status, conclusion, hosts_n
        FROM sessions WHERE incident_id = ? ORDER BY started, id""", [incident])
    findings = fetch_rows(con, """
        SELECT f.session_id, f.code, f.severity, f.host, f.message FROM findings f
        JOIN sessions s ON s.id = f.session_id WHERE s.incident_id = ?
        ORDER BY f.ts, f.step_seq, f.finding_no, f.host""", [incident])
    return {"sessions": sessions, "findings": findings}


def incident_walks(con: Connection, incident: str) -> dict[str, Any]:
    """One incident's walks, newest first, each with its path (live steps in order, answers
    included), conclusion, actions and, when it waits on a question, that question's node
    (``current``); ``resumable`` when ``--resume`` can continue it."""
    found = fetch_rows(con, """
        SELECT id, title, status, opened, root_cause, simulated FROM incidents
        WHERE id = ?""", [incident])
    sessions = fetch_rows(con, """
        SELECT id, runbook, operator, started, status, conclusion, outcome, severity, hosts_n,
               json_extract_string(walk_state, '$.current') AS current
        FROM sessions WHERE incident_id = ? ORDER BY started DESC, id""", [incident])
    for session in sessions:
        session["path"] = fetch_rows(con, """
            SELECT node, kind, answer, because FROM steps WHERE session_id = ?
            AND NOT undone ORDER BY idx, seq""", [session["id"]])
        session["actions"] = fetch_rows(con, """
            SELECT node, command, hosts, confirmed, result FROM actions
            WHERE session_id = ? ORDER BY step_seq""", [session["id"]])
        session["resumable"] = session["status"] in RESUMABLE
    return {"incident": found[0] if found else {"id": incident}, "sessions": sessions}


def host_findings(con: Connection, host: str, limit: int = 200) -> list[dict[str, Any]]:
    """A host's findings row by row, newest first, with the walk and incident of each."""
    return fetch_rows(con, """
        SELECT f.ts, f.code, f.severity, s.runbook, s.incident_id, f.message
        FROM findings f JOIN sessions s ON s.id = f.session_id WHERE f.host = ?
        ORDER BY f.ts DESC LIMIT ?""", [host, int(limit)])
