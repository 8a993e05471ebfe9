"""``diag history``: the incidents and findings of a window, filtered and counted, as SQL.

History is a filter and a count: which incidents a host, a runbook, a finding code or a
scheduler job took part in, newest first, with the findings behind them. ``parse_since`` and
``cutoff`` turn ``--since`` into the window both ``history`` and ``correlate`` use.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from .base import Connection, fetch_rows, now_utc

_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|h|d|w|y)?\s*$", re.IGNORECASE)
_UNIT = {"m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


def parse_since(text: str | None) -> timedelta | None:
    """'30d', '12h', '2w', '1y', '90m' (a bare number is days); 'all' or '' is no limit."""
    if text is None or text.strip().lower() in ("", "all", "0"):
        return None
    match = _SINCE.match(text)
    if not match:
        raise ValueError(f"--since takes a duration like 30d, 12h, 2w or 1y, not '{text}'")
    unit = (match.group(2) or "d").lower()
    return timedelta(seconds=float(match.group(1)) * _UNIT[unit])


def cutoff(since: timedelta | None, now: datetime | None = None) -> datetime | None:
    return None if since is None else (now or now_utc()) - since


def history(con: Connection, *, host: str | None = None, since: timedelta | None = None,
            runbook: str | None = None, code: str | None = None, job: str | None = None,
            limit: int = 50, now: datetime | None = None,
            include_simulated: bool = False) -> dict[str, Any]:
    """Incidents (newest first) and the findings behind them, filtered and counted.

    Simulated sessions (a replayed demo or scenario) are left out unless *include_simulated*.
    *host*: incidents whose sessions covered that host, and that host's findings only.
    *code*: incidents with that finding code, and findings of that code only.
    *job*: incidents recorded for that scheduler job id (``diag run --job ID``).
    """
    start = cutoff(since, now)
    where: list[str] = ["true" if include_simulated else "NOT coalesce(s.simulated, false)"]
    params: list[Any] = []
    if start is not None:
        where.append("s.started >= ?")
        params.append(start)
    if runbook:
        where.append("s.runbook = ?")
        params.append(runbook)
    if job:
        where.append("s.incident_id IN (SELECT id FROM incidents WHERE job_id = ?)")
        params.append(str(job))
    if host:
        where.append("s.id IN (SELECT session_id FROM hosts WHERE host = ?)")
        params.append(host)
    fwhere: list[str] = ["true"]
    fparams: list[Any] = []
    if start is not None:  # implied by the sessions' start; lets zone maps skip old rows
        fwhere.append("f.ts >= ?")
        fparams.append(start)
    if host:
        fwhere.append("f.host = ?")
        fparams.append(host)
    if code:
        fwhere.append("f.code = ?")
        fparams.append(code)
    con.execute("CREATE OR REPLACE TEMP TABLE h_sessions AS SELECT s.*, "
                "hash(s.incident_id) AS ih FROM sessions s "
                f"WHERE {' AND '.join(where)}", params)
    # The matching findings, as a subquery (not a copy: unfiltered, that is every row).
    hf = (f"(SELECT f.code, f.severity, f.host, f.ts, s.incident_id, s.ih FROM findings f "
          f"JOIN h_sessions s ON s.id = f.session_id WHERE {' AND '.join(fwhere)})")
    restrict = "WHERE i.id IN (SELECT s.incident_id FROM h_sessions s)"
    rparams: list[Any] = []
    if code:
        restrict += f" AND i.id IN (SELECT incident_id FROM {hf})"
        rparams = list(fparams)
    total = con.execute(f"SELECT count(*) FROM incidents i {restrict}", rparams).fetchone()
    incidents = fetch_rows(con, f"""
        WITH inc AS (SELECT i.* FROM incidents i {restrict}
                     ORDER BY i.opened DESC, i.id LIMIT {int(limit)}),
        sess AS (SELECT s.incident_id, count(*) AS sessions, list(DISTINCT s.runbook) AS runbooks,
                        list(DISTINCT s.operator ORDER BY s.operator) AS operators,
                        max(s.hosts_n) AS hosts, max(coalesce(s.ended, s.updated)) AS last
                 FROM h_sessions s WHERE s.incident_id IN (SELECT id FROM inc) GROUP BY 1),
        fnd AS (SELECT f.incident_id, count(*) AS findings,
                       count(*) FILTER (f.severity = 'critical') AS critical,
                       count(*) FILTER (f.severity = 'error') AS error,
                       count(*) FILTER (f.severity = 'warning') AS warning,
                       count(DISTINCT f.host) AS hosts_with_findings,
                       list(DISTINCT f.host ORDER BY f.host)
                           FILTER (f.severity IN ('critical', 'error')) AS accused
                FROM {hf} f WHERE f.incident_id IN (SELECT id FROM inc) GROUP BY 1)
        SELECT inc.id, inc.opened, inc.status, inc.title, inc.job_id, inc.conclusion,
               inc.root_cause, inc.simulated, sess.runbooks, sess.operators, sess.sessions,
               sess.hosts, sess.last, coalesce(fnd.accused, []) AS accused,
               coalesce(fnd.findings, 0) AS findings, coalesce(fnd.critical, 0) AS critical,
               coalesce(fnd.error, 0) AS error, coalesce(fnd.warning, 0) AS warning,
               coalesce(fnd.hosts_with_findings, 0) AS hosts_with_findings
        FROM inc JOIN sess ON sess.incident_id = inc.id
        LEFT JOIN fnd ON fnd.incident_id = inc.id
        ORDER BY inc.opened DESC, inc.id""", [*rparams, *fparams])
    findings = fetch_rows(con, f"""
        SELECT f.code, max_by(f.severity, CASE f.severity WHEN 'critical' THEN 3
                   WHEN 'error' THEN 2 WHEN 'warning' THEN 1 ELSE 0 END) AS severity,
               count(*) AS findings, count(DISTINCT f.host) AS hosts,
               count(DISTINCT f.ih) AS incidents, max(f.ts) AS last_seen
        FROM {hf} f
        GROUP BY f.code ORDER BY findings DESC, f.code LIMIT {int(limit)}""", fparams)
    totals = con.execute(f"SELECT (SELECT count(*) FROM h_sessions WHERE incident_id IN "
                         f"(SELECT i.id FROM incidents i {restrict})), count(*), "
                         f"count(DISTINCT host) FROM {hf}", [*rparams, *fparams]).fetchone()
    result: dict[str, Any] = {
        "filters": {"host": host, "since": start, "runbook": runbook, "code": code,
                    "job": job, "include_simulated": include_simulated},
        "counts": {"incidents": int(total[0]) if total else 0,
                   "sessions": int(totals[0]) if totals else 0,
                   "findings": int(totals[1]) if totals else 0,
                   "hosts_with_findings": int(totals[2]) if totals else 0},
        "incidents": incidents, "findings": findings}
    if host:
        result["host"] = _host_profile(con, host, include_simulated)
    con.execute("DROP TABLE IF EXISTS h_sessions")
    return result


def _host_profile(con: Connection, host: str, include_simulated: bool) -> dict[str, Any]:
    """Where the host sits (as of its latest run) and how often diag has looked at it."""
    rows = fetch_rows(con, """
        SELECT h.host, arg_max(h.rack, h.ts) AS rack, arg_max(h.leaf, h.ts) AS leaf,
               arg_max(h.rail, h.ts) AS rail, count(*) AS sessions,
               count(DISTINCT s.incident_id) AS incidents, min(h.ts) AS first_seen,
               max(h.ts) AS last_seen
        FROM hosts h JOIN sessions s ON s.id = h.session_id
        WHERE h.host = ? AND (? OR NOT coalesce(s.simulated, false))
        GROUP BY h.host""", [host, include_simulated])
    profile = rows[0] if rows else {"host": host, "sessions": 0, "incidents": 0}
    # Its acceptance records, newest first: did it pass, and which test failed (diag accept).
    profile["acceptance"] = fetch_rows(con, """
        SELECT session_id AS session, max(ts) AS ts, max(level) AS max_level,
               count(DISTINCT test) AS tests,
               coalesce(list(DISTINCT test ORDER BY test) FILTER (WHERE verdict = 'fail'), [])
                   AS failed_tests,
               count(*) FILTER (WHERE verdict = 'fail') AS failed_figures
        FROM acceptance WHERE host = ?
        GROUP BY session_id ORDER BY max(ts) DESC LIMIT 20""", [host])
    return profile
