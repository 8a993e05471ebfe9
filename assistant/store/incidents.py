"""Incidents as the unit: which open incident a new walk joins, and what an operator does with
an incident afterwards (close with a root cause, reopen, merge two, tag).

A problem with a job is rarely one walk: the on-call engineer runs ``low-bandwidth`` three
times over the same hosts while trying fixes, a colleague walks ``hang`` on the same Slurm job.
Recorded as separate incidents, the history counts one problem three times (and correlation
takes the repeats for independent evidence); so a new walk joins an open incident when it is
plainly the same problem — the same Slurm job, or the same runbook on overlapping hosts within
a window — and says which one it joined and why. Everything here is a function over an open
connection inside the caller's transaction (``Store.write``), like ``writes``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from . import hostincidents
from .base import (
    Connection,
    StoreError,
    counted_sessions,
    fetch_rows,
    now_utc,
    resolve_id,
    since_sql,
)
from .redact import redact_text
from .writes import insert_session

# How long after its last step an open incident still takes a new walk of the same runbook on
# overlapping hosts. An incident's walks are minutes to a few hours apart (a fix tried, the
# job resubmitted, the next shift's look); a repeat the next day is a new incident that the
# report's "similar past incidents" links. --join-window / DIAG_JOIN_WINDOW change it.
DEFAULT_JOIN_WINDOW = timedelta(hours=4)
JOIN_WINDOW_ENV = "DIAG_JOIN_WINDOW"


@dataclass(frozen=True)
class Joined:
    """The open incident a new walk joins, and why (one line for the operator)."""

    incident: str
    reason: str


def join_window(text: str | None = None) -> timedelta | None:
    """--join-window, else $DIAG_JOIN_WINDOW, else the default; '0' or 'off' never joins.

    Raises ValueError (one line) for a value that is not a duration."""
    from .history import parse_since

    value = text if text is not None else os.environ.get(JOIN_WINDOW_ENV)
    if value is None or not value.strip():
        return DEFAULT_JOIN_WINDOW
    if value.strip().lower() in ("0", "off", "no", "none"):
        return None
    try:
        return parse_since(value)
    except ValueError:
        raise ValueError(f"the join window takes a duration like 4h, 90m or 1d (or 'off'), "
                         f"not '{value}'") from None


def find_open_incident(con: Connection, *, runbook: str, hosts: Sequence[str],
                       job: str | None, window: timedelta | None,
                       now: datetime | None = None, simulated: bool = False) -> Joined | None:
    """The open incident a new walk of *runbook* over *hosts* belongs to, if any.

    The same Slurm job joins its open incident whatever the time (a job is one problem);
    otherwise an open incident with a walk of the same runbook that shared hosts with this one
    and wrote its last step within *window* (None: never). Ties go to the larger overlap, then
    the more recent walk. Merged and closed incidents are never joined.
    """
    if job:
        row = con.execute("SELECT id FROM incidents WHERE status = 'open' AND simulated = ? "
                          "AND job_id = ? ORDER BY opened DESC LIMIT 1",
                          [simulated, str(job)]).fetchone()
        if row:
            return Joined(str(row[0]), f"same Slurm job {job}")
    if window is None or not hosts:
        return None
    since = (now or now_utc()) - window
    rows = con.execute("""
        SELECT s.incident_id, count(DISTINCT h.host) AS shared, max(s.updated) AS last
        FROM sessions s JOIN incidents i ON i.id = s.incident_id
        JOIN hosts h ON h.session_id = s.id
        WHERE i.status = 'open' AND i.simulated = ? AND s.runbook = ? AND s.updated >= ?
          AND list_contains(?::VARCHAR[], h.host)
        GROUP BY s.incident_id ORDER BY shared DESC, last DESC LIMIT 1""",
                       [simulated, runbook, since, list(hosts)]).fetchall()
    if not rows:
        return None
    incident, shared, last = rows[0]
    minutes = max(0, round(((now or now_utc()) - last).total_seconds() / 60))
    return Joined(str(incident), f"same runbook {runbook} on {shared} of the same host(s), "
                                 f"last step {minutes} min ago")


@dataclass(frozen=True)
class SessionStart:
    """A walk's new session, the incident it is in, and why it joined that one (None: the
    incident is new)."""

    session: str
    incident: str
    joined: str | None = None


def begin_session(con: Connection, *, runbook: str, hosts: Sequence[str],
                  attrs: Mapping[str, Mapping[str, Any]], incident: str | None, symptom: str,
                  job: str | None, title: str | None, tags: Sequence[str], operator: str,
                  target: Mapping[str, Any] | None, join: bool,
                  join_window: timedelta | None, session: str | None = None,
                  path: Path | str = "", simulated: bool = False) -> SessionStart:
    """Open a session in the incident it belongs to, inside the caller's transaction.

    With *incident* the walk joins that incident (refused when it is closed or merged);
    otherwise it joins the open incident of the same Slurm job, or of the same runbook on
    overlapping hosts within *join_window* (None: a new incident unless the job matches).
    *join* False always opens a new one. *session* keeps an id already handed out (a walk
    whose start was journalled while the store could not be written).
    """
    joined: Joined | None = None
    chosen = incident
    if chosen is not None:
        chosen = resolve(con, chosen, path)
        row = con.execute("SELECT status, merged_into FROM incidents WHERE id = ?",
                          [chosen]).fetchone()
        if row and row[0] != "open":
            into = f" into {row[1]}" if row[1] else ""
            hint = ("`diag incident reopen " + chosen + "` first" if row[0] == "closed"
                    else "join that one")
            raise StoreError(f"incident {chosen} is {row[0]}{into}; {hint}")
        joined = Joined(chosen, "asked for (--incident)")
    elif join:  # a replayed scenario joins only simulated incidents, a real walk real ones
        joined = find_open_incident(con, runbook=runbook, hosts=hosts, job=job,
                                    window=join_window, simulated=simulated)
        chosen = joined.incident if joined else None
    session = insert_session(con, runbook=runbook, hosts=list(hosts), attrs=attrs,
                             incident=chosen, symptom=symptom, job=job, title=title,
                             tags=list(tags), operator=operator, target=target,
                             session=session, simulated=simulated)
    row = con.execute("SELECT incident_id FROM sessions WHERE id = ?", [session]).fetchone()
    incident_id = str(row[0]) if row else ""
    touch(con, incident_id)
    reason = joined.reason if joined else None
    if reason is not None:  # a teammate's incident says whose: its JSON and first screen too
        others = con.execute("SELECT list(DISTINCT operator ORDER BY operator) FROM sessions "
                             "WHERE incident_id = ? AND id <> ? AND operator <> ?",
                             [incident_id, session, operator]).fetchone()
        if others and others[0]:
            reason += f"; a teammate's incident, walked by {', '.join(others[0])}"
    return SessionStart(session, incident_id, reason)


def touch(con: Connection, incident: str) -> None:
    con.execute("UPDATE incidents SET updated = ? WHERE id = ?", [now_utc(), incident])


def resolve(con: Connection, ident: str, path: Path | str = "") -> str:
    """An incident id, a unique prefix, or 'latest' (the newest opened) -> the id."""
    if ident == "latest":
        row = con.execute("SELECT id FROM incidents ORDER BY opened DESC, id LIMIT 1").fetchone()
        if row is None:
            raise StoreError("no incidents recorded yet")
        return str(row[0])
    return resolve_id(con, "incidents", ident, "incident", path)


# --- what an operator does with an incident ---------------------------------------------------

def close(con: Connection, ident: str, cause: str | None, by: str,
          path: Path | str = "") -> dict[str, Any]:
    """Close an incident, with *cause* as its root cause (else the one its walks set). The
    cause is typed by a person, who may paste a log line with a token in it: redacted."""
    cause = redact_text(cause) if cause else cause
    incident = resolve(con, ident, path)
    row = _row(con, incident)
    if row["status"] == "merged":
        raise StoreError(f"incident {incident} was merged into {row['merged_into']}; close "
                         "that one")
    if row["status"] == "closed" and not cause:
        raise StoreError(f"incident {incident} is already closed (root cause: "
                         f"{row['root_cause'] or 'not established'})")
    if not cause and not row["root_cause"]:
        raise StoreError(f"incident {incident} has no root cause yet (no walk concluded one): "
                         "say it with --cause TEXT")
    now = now_utc()
    con.execute("UPDATE incidents SET status = 'closed', closed = coalesce(closed, ?), "
                "closed_by = coalesce(closed_by, ?), root_cause = coalesce(?, root_cause), "
                "updated = ? WHERE id = ?", [now, by, cause or None, now, incident])
    # Its walks still waiting on a question (or interrupted) end with it: the problem is
    # settled, they are not open work, nor a time to conclusion. Reopening brings them back.
    con.execute(f"UPDATE sessions SET status = '{CLOSED_WAITING}', ended = ?, updated = ? "
                "WHERE incident_id = ? AND status IN ('waiting', 'interrupted')",
                [now, now, incident])
    return _row(con, incident)


CLOSED_WAITING = "closed-while-waiting"


def not_resumable(session: dict[str, Any]) -> str | None:
    """Why a recorded walk cannot be resumed, or None."""
    if session["status"] == "concluded":
        what = session["outcome"] or session["conclusion"]
        return (f"session {session['id']} is already concluded ({what}); nothing to resume "
                f"— `diag report {session['incident_id']}` shows it")
    if session["status"] == CLOSED_WAITING:
        return (f"session {session['id']} ended when its incident {session['incident_id']} "
                f"was closed while it waited; `diag incident reopen {session['incident_id']}` "
                "to resume it")
    return None


def reopen(con: Connection, ident: str, path: Path | str = "") -> dict[str, Any]:
    """Open a closed incident again: its root cause stays until a walk or a close replaces
    it; its time to resolve no longer counts until it is closed again."""
    incident = resolve(con, ident, path)
    row = _row(con, incident)
    if row["status"] != "closed":
        raise StoreError(f"incident {incident} is {row['status']}"
                         + (f" (into {row['merged_into']})" if row["merged_into"] else "")
                         + "; only a closed incident can be reopened")
    con.execute("UPDATE incidents SET status = 'open', closed = NULL, closed_by = NULL, "
                "updated = ? WHERE id = ?", [now_utc(), incident])
    con.execute(f"UPDATE sessions SET status = 'waiting', ended = NULL WHERE incident_id = ? "
                f"AND status = '{CLOSED_WAITING}'", [incident])
    return _row(con, incident)


def merge(con: Connection, keep_ident: str, absorb_ident: str,
          path: Path | str = "") -> dict[str, Any]:
    """Move every session of incident B into A: one problem recorded twice becomes one.

    A keeps its id, status and root cause (B's fill what A lacks); it opened when the first
    of the two did; tags are united. B stays as a row marked ``merged`` into A, so an id
    someone wrote in a ticket still leads somewhere.
    """
    keep, absorb = resolve(con, keep_ident, path), resolve(con, absorb_ident, path)
    if keep == absorb:
        raise StoreError(f"cannot merge incident {keep} into itself")
    for ident in (keep, absorb):
        row = _row(con, ident)
        if row["status"] == "merged":
            raise StoreError(f"incident {ident} was already merged into {row['merged_into']}")
    b = _row(con, absorb)
    moved = con.execute("SELECT count(*) FROM sessions WHERE incident_id = ?",
                        [absorb]).fetchone()
    con.execute("UPDATE sessions SET incident_id = ? WHERE incident_id = ?", [keep, absorb])
    con.execute("UPDATE incident_actions SET incident_id = ? WHERE incident_id = ?",
                [keep, absorb])
    con.execute("UPDATE incidents SET merged_into = ? WHERE merged_into = ?", [keep, absorb])
    con.execute("""
        UPDATE incidents SET opened = least(opened, ?), symptom = coalesce(symptom, ?),
               job_id = coalesce(job_id, ?), root_cause = coalesce(root_cause, ?),
               conclusion = coalesce(conclusion, ?),
               tags = list_sort(list_distinct(list_concat(tags, ?::VARCHAR[]))), updated = ?
        WHERE id = ?""", [b["opened"], b["symptom"], b["job_id"], b["root_cause"],
                          b["conclusion"], list(b["tags"] or []), now_utc(), keep])
    con.execute("UPDATE incidents SET status = 'merged', merged_into = ?, updated = ? "
                "WHERE id = ?", [keep, now_utc(), absorb])
    hostincidents.refresh(con, [keep, absorb])  # B's host-incidents are A's now
    result = _row(con, keep)
    result["sessions_moved"] = int(moved[0]) if moved else 0
    result["absorbed"] = absorb
    return result


def tag(con: Connection, ident: str, add: Sequence[str], remove: Sequence[str] = (),
        path: Path | str = "") -> dict[str, Any]:
    """Add and remove free labels (a ticket number, a team, 'vendor-rma'). Tags are typed
    text and kept as the store keeps all text: redacted (a tag removed is redacted the same
    way, so the tag as it was typed removes the tag as it was kept)."""
    incident = resolve(con, ident, path)
    bad = [t for t in [*add, *remove] if not t.strip() or "," in t or len(t) > 64]
    if bad:
        raise StoreError(f"a tag is one word or phrase of at most 64 characters without "
                         f"commas, not '{bad[0]}'")
    add, remove = [redact_text(t) for t in add], [redact_text(t) for t in remove]
    con.execute("UPDATE incidents SET tags = list_sort(list_filter(list_distinct("
                "list_concat(tags, ?::VARCHAR[])), lambda t: NOT list_contains(?::VARCHAR[], t))), "
                "updated = ? WHERE id = ?",
                [[t.strip() for t in add], [t.strip() for t in remove], now_utc(), incident])
    return _row(con, incident)


def _row(con: Connection, incident: str) -> dict[str, Any]:
    return fetch_rows(con, "SELECT * FROM incidents WHERE id = ?", [incident])[0]


# --- what an operator reads -------------------------------------------------------------------

def list_incidents(con: Connection, *, status: str = "open", since: datetime | None = None,
                   tagged: str | None = None, limit: int = 50,
                   simulated: bool = False) -> list[dict[str, Any]]:
    """Incidents newest first with their walks counted; *status* open, closed, merged or all.

    *simulated*: include simulated incidents and walks (demo, scenario, drill runs).
    """
    where, params = since_sql("i.opened", since)
    if not simulated:
        where += " AND NOT coalesce(i.simulated, false)"
    if status != "all":
        where += " AND i.status = ?"
        params.append(status)
    if tagged:
        where += " AND list_contains(i.tags, ?)"
        params.append(tagged)
    return fetch_rows(con, f"""
        SELECT i.id, i.status, i.opened, i.closed, i.title, i.job_id, i.root_cause, i.tags,
               i.merged_into, count(s.id) AS sessions, list(DISTINCT s.runbook) AS runbooks,
               max(s.hosts_n) AS hosts, max(coalesce(s.ended, s.updated)) AS last,
               list(DISTINCT s.operator ORDER BY s.operator)
                   FILTER (s.operator IS NOT NULL) AS operators,
               (SELECT list(DISTINCT f.host ORDER BY f.host) FROM findings f
                JOIN sessions fs ON fs.id = f.session_id
                WHERE fs.incident_id = i.id AND f.host IS NOT NULL
                  AND f.severity IN ('critical', 'error')) AS accused
        FROM incidents i LEFT JOIN {counted_sessions(simulated)} s ON s.incident_id = i.id
        WHERE {where} GROUP BY ALL ORDER BY i.opened DESC, i.id LIMIT {int(limit)}""", params)


def show(con: Connection, ident: str, path: Path | str = "") -> dict[str, Any]:
    """One incident: its row, its walks, the incidents merged into it, its finding codes."""
    incident = resolve(con, ident, path)
    row = _row(con, incident)
    row["sessions"] = fetch_rows(con, """
        SELECT id, runbook, operator, started, ended, status, conclusion, outcome, severity,
               hosts_n FROM sessions WHERE incident_id = ? ORDER BY started, id""", [incident])
    row["merged"] = [r[0] for r in con.execute(
        "SELECT id FROM incidents WHERE merged_into = ? ORDER BY opened", [incident]).fetchall()]
    row["codes"] = fetch_rows(con, """
        SELECT f.code, max_by(f.severity, CASE f.severity WHEN 'critical' THEN 3
                   WHEN 'error' THEN 2 WHEN 'warning' THEN 1 ELSE 0 END) AS severity,
               count(DISTINCT f.host) AS hosts, list(DISTINCT f.host ORDER BY f.host)[:8] AS some
        FROM findings f JOIN sessions s ON s.id = f.session_id WHERE s.incident_id = ?
        GROUP BY f.code ORDER BY hosts DESC, f.code""", [incident])
    return row


def time_to_resolve(con: Connection, start: datetime | None,
                    simulated: bool = False) -> list[dict[str, Any]]:
    """Per runbook of the incident's first walk: closed incidents and mean / median / p90
    seconds from opened to closed (reopened incidents count once closed again)."""
    cond, params = since_sql("i.opened", start)
    return fetch_rows(con, f"""
        WITH first AS (SELECT incident_id, arg_min(runbook, started) AS runbook
                       FROM {counted_sessions(simulated)} GROUP BY incident_id)
        SELECT f.runbook, count(*) AS incidents,
               count(*) FILTER (i.status = 'closed') AS closed,
               round(avg(epoch(i.closed - i.opened)) FILTER (i.status = 'closed'), 1) AS mean_s,
               round(median(epoch(i.closed - i.opened)) FILTER (i.status = 'closed'), 1)
                   AS median_s,
               round(quantile_cont(epoch(i.closed - i.opened), 0.9)
                     FILTER (i.status = 'closed'), 1) AS p90_s
        FROM incidents i JOIN first f ON f.incident_id = i.id
        WHERE {cond} AND i.status <> 'merged' GROUP BY f.runbook
        ORDER BY incidents DESC, f.runbook""", params)
