"""The questions asked of the history: ``diag history`` and ``diag correlate``, as SQL.

History is a filter and a count. Correlation is the post-mortem author's questions — which
nodes keep failing, which leaf switch do the errors sit under, which driver/NCCL/kernel do the
hangs share, which XIDs keep coming back, how long does each runbook take — each answered as
"observed versus what the fleet's rate predicts", so the output names only patterns that are
both large (lift >= 2, a minimum count) and unlikely to be chance (Poisson tail, Bonferroni-
corrected over every group tested). Two guards keep it honest:

- *one host is not a pattern*: a group stays significant with its busiest host left out;
- *nested groups are explained away*: when a leaf switch is flagged, its racks are tested again
  without the leaf's hosts (likewise an NCCL version and the version tuples containing it), so
  the report names the leaf, not the leaf and each of its racks.

Units are host-sessions (one host probed in one session), deduplicated per finding code, so a
node probed twice as often is expected to show twice the findings, and a finding repeated in
two steps of one walk counts once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from .base import Connection, insert_rows, now_utc
from .stats import lift as lift_of
from .stats import poisson_log_sf

# Codes that say diag could not look (not that the host is bad): never evidence of a pattern.
NOT_EVIDENCE = ("not-measured", "probe-parse-error", "host-access-failed")
# Codes that are themselves a placement or version comparison: grouping them again by
# placement or version only restates how they were computed.
PLACEMENT_CODES = ("job-spans-leaves", "leaf-concentration")
VERSION_CODES = ("version-drift", "version-baseline-mismatch")
PLACEMENT_DIMS = ("leaf", "rack", "rail")
VERSION_DIMS = ("driver_version", "nccl_version", "kernel")

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


def _rows(con: Connection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    cur = con.execute(sql, list(params))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _in(values: Sequence[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values) or "NULL"


# --- history -------------------------------------------------------------------------------

def history(con: Connection, *, host: str | None = None, since: timedelta | None = None,
            runbook: str | None = None, code: str | None = None, job: str | None = None,
            limit: int = 50, now: datetime | None = None) -> dict[str, Any]:
    """Incidents (newest first) and the findings behind them, filtered and counted.

    *host*: incidents whose sessions covered that host, and that host's findings only.
    *code*: incidents with that finding code, and findings of that code only.
    *job*: incidents recorded for that scheduler job id (``diag run --job ID``).
    """
    start = cutoff(since, now)
    where, params = ["true"], []
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
    fwhere, fparams = ["true"], []
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
    incidents = _rows(con, f"""
        WITH inc AS (SELECT i.* FROM incidents i {restrict}
                     ORDER BY i.opened DESC, i.id LIMIT {int(limit)}),
        sess AS (SELECT s.incident_id, count(*) AS sessions, list(DISTINCT s.runbook) AS runbooks,
                        max(s.hosts_n) AS hosts, max(coalesce(s.ended, s.updated)) AS last
                 FROM h_sessions s WHERE s.incident_id IN (SELECT id FROM inc) GROUP BY 1),
        fnd AS (SELECT f.incident_id, count(*) AS findings,
                       count(*) FILTER (f.severity = 'critical') AS critical,
                       count(*) FILTER (f.severity = 'error') AS error,
                       count(*) FILTER (f.severity = 'warning') AS warning,
                       count(DISTINCT f.host) AS hosts_with_findings
                FROM {hf} f WHERE f.incident_id IN (SELECT id FROM inc) GROUP BY 1)
        SELECT inc.id, inc.opened, inc.status, inc.title, inc.job_id, inc.conclusion,
               inc.root_cause, sess.runbooks, sess.sessions, sess.hosts, sess.last,
               coalesce(fnd.findings, 0) AS findings, coalesce(fnd.critical, 0) AS critical,
               coalesce(fnd.error, 0) AS error, coalesce(fnd.warning, 0) AS warning,
               coalesce(fnd.hosts_with_findings, 0) AS hosts_with_findings
        FROM inc JOIN sess ON sess.incident_id = inc.id
        LEFT JOIN fnd ON fnd.incident_id = inc.id
        ORDER BY inc.opened DESC, inc.id""", [*rparams, *fparams])
    findings = _rows(con, f"""
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
                    "job": job},
        "counts": {"incidents": int(total[0]) if total else 0,
                   "sessions": int(totals[0]) if totals else 0,
                   "findings": int(totals[1]) if totals else 0,
                   "hosts_with_findings": int(totals[2]) if totals else 0},
        "incidents": incidents, "findings": findings}
    if host:
        result["host"] = _host_profile(con, host)
    con.execute("DROP TABLE IF EXISTS h_sessions")
    return result


def _host_profile(con: Connection, host: str) -> dict[str, Any]:
    """Where the host sits (as of its latest run) and how often diag has looked at it."""
    rows = _rows(con, """
        SELECT h.host, arg_max(h.rack, h.ts) AS rack, arg_max(h.leaf, h.ts) AS leaf,
               arg_max(h.rail, h.ts) AS rail, count(*) AS sessions,
               count(DISTINCT s.incident_id) AS incidents, min(h.ts) AS first_seen,
               max(h.ts) AS last_seen
        FROM hosts h JOIN sessions s ON s.id = h.session_id WHERE h.host = ?
        GROUP BY h.host""", [host])
    return rows[0] if rows else {"host": host, "sessions": 0, "incidents": 0}


# --- correlate -----------------------------------------------------------------------------

def correlate(con: Connection, *, since: timedelta | None = timedelta(days=90),
              min_count: int = 10, min_lift: float = 2.0, alpha: float = 0.01,
              limit: int = 20, now: datetime | None = None,
              timings: dict[str, float] | None = None) -> dict[str, Any]:
    """Every correlation report over the window; *timings* (if given) gets seconds per part."""
    start = cutoff(since, now)
    parts: list[tuple[str, Callable[[], Any]]] = [
        ("recurring_hosts", lambda: recurring_hosts(con, start, min_lift=min_lift,
                                                    alpha=alpha, limit=limit)),
        ("placement", lambda: placement_concentration(con, start, min_count=min_count,
                                                      min_lift=min_lift, alpha=alpha)),
        ("versions", lambda: version_cohorts(con, start, min_count=min_count,
                                             min_lift=min_lift, alpha=alpha)),
        ("xid_repeat", lambda: xid_repeat_offenders(con, start, min_lift=min_lift,
                                                    alpha=alpha, limit=limit)),
        ("time_to_conclusion", lambda: time_to_conclusion(con, start)),
    ]
    result: dict[str, Any] = {"since": start, "thresholds": {
        "min_count": min_count, "min_lift": min_lift, "alpha": alpha}}
    for name, run in parts:
        began = time.perf_counter()
        result[name] = run()
        if timings is not None:
            timings[name] = time.perf_counter() - began
    _explain_recurrence(con, result["recurring_hosts"], result["placement"],
                        result["versions"])
    return result


def _explain_recurrence(con: Connection, hosts: list[dict[str, Any]],
                        placement: list[dict[str, Any]],
                        versions: list[dict[str, Any]]) -> None:
    """A host that recurs with a code its leaf / rack / rail or its driver / NCCL / kernel is
    flagged for is part of that pattern, not a lone bad node: say so next to it (as of the
    host's latest run)."""
    flagged = {(p["code"], p["dimension"], p["value"]) for p in [*placement, *versions]}
    if not hosts or not flagged:
        return
    names = _in([h["host"] for h in hosts])
    where: dict[str, dict[str, Any]] = {}
    for row in con.execute(
            "SELECT host, arg_max(leaf, ts), arg_max(rack, ts), arg_max(rail, ts) FROM hosts "
            f"WHERE host IN ({names}) GROUP BY host").fetchall():
        where.setdefault(row[0], {}).update(zip(PLACEMENT_DIMS, row[1:], strict=True))
    paths = ", ".join(f"'$.{d}'" for d in VERSION_DIMS)
    for host, values in con.execute(
            f"SELECT host, arg_max(json_extract_string(facts, [{paths}]), ts) FROM probe_runs "
            f"WHERE probe = 'versions' AND state = 'ok' AND host IN ({names}) "
            "GROUP BY host").fetchall():
        where.setdefault(host, {}).update(zip(VERSION_DIMS, values, strict=True))
    for entry in hosts:
        for code in entry["codes"]:
            for dim, value in where.get(entry["host"], {}).items():
                if (code["code"], dim, value) in flagged:
                    code["explained_by"] = f"{dim} {value}"
                    break


def _since_sql(column: str, start: datetime | None) -> tuple[str, list[Any]]:
    return (f"{column} >= ?", [start]) if start is not None else ("true", [])


def _excluded(extra: Sequence[str]) -> str:
    return f"f.code NOT IN ({_in([*NOT_EVIDENCE, *extra])}) AND f.severity <> 'info'"


# Recurrence: a host that raises the same code in more incidents than its share predicts.

def recurring_hosts(con: Connection, start: datetime | None, *, min_incidents: int = 3,
                    min_lift: float = 2.0, alpha: float = 0.01,
                    limit: int = 20) -> list[dict[str, Any]]:
    """Hosts that recur across incidents: per (host, code), the incidents in which the host
    raised the code, against the incidents it took part in times the code's fleet rate."""
    cond, params = _since_sql("f.ts", start)
    events = (f"SELECT f.code, f.host, f.session_id, f.ts FROM findings f "
              f"WHERE {cond} AND f.host IS NOT NULL AND {_excluded(())}")
    rows = _recurrence(con, events, params, start, min_incidents, min_lift)
    flagged = _significant(rows, alpha)
    by_host: dict[str, dict[str, Any]] = {}
    for row in flagged:
        entry = by_host.setdefault(row["host"], {
            "host": row["host"], "incidents_involved": row["involved"], "codes": [],
            "incidents_with_findings": 0, "last_seen": row["last_seen"], "log_p": 0.0})
        entry["codes"].append({"code": row["code"], "incidents": row["k"],
                               "expected": round(row["expected"], 2),
                               "lift": round(row["lift"], 1), "p_value": row["p_value"]})
        entry["incidents_with_findings"] = max(entry["incidents_with_findings"], row["k"])
        entry["last_seen"] = max(entry["last_seen"], row["last_seen"])
        entry["log_p"] = min(entry["log_p"], row["log_p"])
    hosts = sorted(by_host.values(), key=lambda h: (h["log_p"], h["host"]))[:limit]
    for entry in hosts:
        entry.pop("log_p")
        entry["codes"].sort(key=lambda c: (-c["incidents"], c["code"]))
    return hosts


def xid_repeat_offenders(con: Connection, start: datetime | None, *, min_incidents: int = 2,
                         min_lift: float = 2.0, alpha: float = 0.01,
                         limit: int = 20) -> list[dict[str, Any]]:
    """Per XID code, the hosts that raised it in more incidents than chance allows."""
    cond, params = _since_sql("f.ts", start)
    events = (f"SELECT CAST(unnest(f.xids) AS VARCHAR) AS code, f.host, f.session_id, f.ts "
              f"FROM findings f WHERE {cond} AND f.xids IS NOT NULL AND f.host IS NOT NULL")
    rows = _recurrence(con, events, params, start, min_incidents, min_lift)
    totals = {str(r[0]): (int(r[1]), int(r[2])) for r in con.execute(
        f"SELECT x, count(DISTINCT host), count(*) FROM (SELECT unnest(f.xids) AS x, f.host "
        f"FROM findings f WHERE {cond} AND f.xids IS NOT NULL) GROUP BY x", params).fetchall()}
    by_xid: dict[str, dict[str, Any]] = {}
    for row in _significant(rows, alpha):
        hosts_n, rows_n = totals.get(row["code"], (0, 0))
        entry = by_xid.setdefault(row["code"], {"xid": int(row["code"]), "hosts": [],
                                                 "hosts_with_xid": hosts_n,
                                                 "findings": rows_n})
        entry["hosts"].append({"host": row["host"], "incidents": row["k"],
                               "incidents_involved": row["involved"],
                               "expected": round(row["expected"], 2),
                               "lift": round(row["lift"], 1), "p_value": row["p_value"],
                               "last_seen": row["last_seen"]})
    result = sorted(by_xid.values(), key=lambda e: (-len(e["hosts"]), e["xid"]))
    for entry in result:
        entry["hosts"] = sorted(entry["hosts"], key=lambda h: (-h["incidents"], h["host"]))
        entry["repeat_hosts"] = len(entry["hosts"])
        entry["hosts"] = entry["hosts"][:limit]
    return result


def _recurrence(con: Connection, events_sql: str, params: list[Any], start: datetime | None,
                min_incidents: int, min_lift: float) -> list[dict[str, Any]]:
    """(code, host) pairs with k incidents against expected = incidents involved x rate.

    *events_sql* yields (code, host, session_id, ts). The rate of a code is its incidents-
    with-the-code per host-incident over the fleet. Incidents are counted through a 64-bit
    hash of their id, and distinct (code, host, incident) first, then counted: a third
    faster than count(DISTINCT incident_id) over a million findings."""
    hcond, hparams = _since_sql("h.ts", start)
    return _rows(con, f"""
        WITH si AS (SELECT id AS session_id, hash(incident_id) AS ih FROM sessions),
        involved AS (
            SELECT h.host, count(DISTINCT si.ih) AS n
            FROM hosts h JOIN si USING (session_id) WHERE {hcond} GROUP BY h.host),
        pairs AS (SELECT e.code, e.host, si.ih, max(e.ts) AS last_seen
                  FROM ({events_sql}) e JOIN si USING (session_id) GROUP BY ALL),
        ev AS (SELECT code, host, count(*) AS k, max(last_seen) AS last_seen
               FROM pairs GROUP BY code, host),
        rate AS (SELECT code, sum(k) / (SELECT sum(n) FROM involved) AS rate
                 FROM ev GROUP BY code),
        scored AS (SELECT ev.code, ev.host, ev.k, involved.n AS involved,
                          involved.n * rate.rate AS expected, ev.last_seen,
                          count(*) OVER () AS tests
                   FROM ev JOIN involved USING (host) JOIN rate USING (code))
        SELECT * FROM scored WHERE k >= ? AND k >= ? * expected
        ORDER BY k DESC""", [*hparams, *params, min_incidents, min_lift])


def _significant(rows: list[dict[str, Any]], alpha: float) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        log_p = poisson_log_sf(int(row["k"]), float(row["expected"]))
        tests = max(1, int(row["tests"]))
        if log_p < _log(alpha / tests):
            row.update(log_p=log_p, p_value=_p(log_p),
                       lift=row["k"] / row["expected"] if row["expected"] else float("inf"))
            out.append(row)
    return out


# Concentration: a code's share of one leaf / rack / rail / version against its share of the
# fleet's host-sessions.

def placement_concentration(con: Connection, start: datetime | None, *, min_count: int = 10,
                            min_lift: float = 2.0, alpha: float = 0.01) -> list[dict[str, Any]]:
    """Finding codes concentrated on one leaf switch, rack or rail (placement as of the run)."""
    cond, params = _since_sql("h.ts", start)
    units = (f"SELECT hash(h.session_id, h.host) AS k, h.host, h.leaf, h.rack, h.rail "
             f"FROM hosts h WHERE {cond}")
    return _concentration(con, units, params, PLACEMENT_DIMS, None, start, PLACEMENT_CODES,
                          min_count, min_lift, alpha)


def version_cohorts(con: Connection, start: datetime | None, *, min_count: int = 10,
                    min_lift: float = 2.0, alpha: float = 0.01) -> list[dict[str, Any]]:
    """Finding codes that co-occur with one driver, NCCL or kernel version, or one
    (driver / NCCL / kernel) tuple, per the versions probe's facts of the same session."""
    cond, params = _since_sql("p.ts", start)
    # A walk may run the versions probe twice: the session's last versions step is its stack
    # (picking it per session is cheap; per host-session it cost twice the whole query).
    paths = ", ".join(f"'$.{d}'" for d in VERSION_DIMS)
    units = (f"SELECT k, host, v[1] AS {VERSION_DIMS[0]}, v[2] AS {VERSION_DIMS[1]}, "
             f"v[3] AS {VERSION_DIMS[2]} FROM ("
             f"SELECT hash(p.session_id, p.host) AS k, p.host, "
             f"json_extract_string(p.facts, [{paths}]) AS v FROM probe_runs p "
             f"SEMI JOIN (SELECT session_id, max(step_seq) AS step_seq FROM probe_runs "
             f"WHERE probe = 'versions' GROUP BY session_id) last "
             f"ON last.session_id = p.session_id AND last.step_seq = p.step_seq "
             f"WHERE p.probe = 'versions' AND p.state = 'ok' AND {cond})")
    return _concentration(con, units, params, VERSION_DIMS, ("tuple", VERSION_DIMS), start,
                          VERSION_CODES, min_count, min_lift, alpha)


def _concentration(con: Connection, units_sql: str, params: list[Any], dims: Sequence[str],
                   tuple_dim: tuple[str, Sequence[str]] | None, start: datetime | None,
                   excluded: Sequence[str], min_count: int, min_lift: float,
                   alpha: float) -> list[dict[str, Any]]:
    """Codes whose share in one group (a value of one of *dims*) is >= min_lift times the
    group's share of the exposure; *units_sql* yields one row per host-session with
    ``k = hash(session_id, host)``, ``host`` and the dims.

    Host-sessions are joined on that one 64-bit hash instead of the two strings: half the time
    on a year of history; a collision among a few million units has a probability near 1e-7
    and would shift one count by one.
    """
    all_dims = list(dims)
    tuple_sql = ""
    if tuple_dim is not None:
        name, parts = tuple_dim
        all_dims.append(name)
        tuple_sql = (f", CASE WHEN {' AND '.join(f'{p} IS NOT NULL' for p in parts)} "
                     f"THEN concat_ws(' / ', {', '.join(parts)}) END AS {name}")
    cols = ", ".join(all_dims)
    fcond, fparams = _since_sql("f.ts", start)
    # c: a 64-bit hash of the group combination (leaf, rack, rail / driver, nccl, kernel), so
    # the big grouping is on (code, host, c) and the few thousand combinations are spelled
    # out once in c_dims.
    con.execute(f"CREATE OR REPLACE TEMP TABLE c_units AS SELECT *, hash({', '.join(dims)}) AS c"
                f"{tuple_sql} FROM ({units_sql})", params)
    con.execute(f"CREATE OR REPLACE TEMP TABLE c_dims AS SELECT DISTINCT c, {cols} "
                "FROM c_units")
    # Per (code, host, combination): host-sessions that raised the code.
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE c_events AS
        SELECT e.code, u.host, u.c, count(*) AS n
        FROM (SELECT DISTINCT f.code, hash(f.session_id, f.host) AS k FROM findings f
              WHERE {fcond} AND f.host IS NOT NULL AND {_excluded(excluded)}) e
        JOIN c_units u USING (k)
        GROUP BY ALL""", fparams)
    con.execute("CREATE OR REPLACE TEMP TABLE c_exposure AS SELECT host, c, count(*) AS e "
                "FROM c_units GROUP BY ALL")
    # The same without the host, spelled out: cheap to group per dimension.
    con.execute(f"CREATE OR REPLACE TEMP TABLE c_combo AS SELECT x.code, {cols}, x.n FROM "
                f"(SELECT code, c, sum(n) AS n FROM c_events GROUP BY ALL) x JOIN c_dims "
                "USING (c)")
    con.execute(f"CREATE OR REPLACE TEMP TABLE c_cexp AS SELECT {cols}, x.e FROM "
                "(SELECT c, sum(e) AS e FROM c_exposure GROUP BY c) x JOIN c_dims USING (c)")
    cells = " UNION ALL ".join(f"""
        SELECT '{d}' AS dim, c.code, c.value, c.n, t.n AS n_total, x.e, xt.e AS e_total
        FROM (SELECT code, {d} AS value, sum(n) AS n FROM c_combo WHERE {d} IS NOT NULL
              GROUP BY ALL) c
        JOIN (SELECT code, sum(n) AS n FROM c_combo WHERE {d} IS NOT NULL GROUP BY code) t
             USING (code)
        JOIN (SELECT {d} AS value, sum(e) AS e FROM c_cexp WHERE {d} IS NOT NULL
              GROUP BY ALL) x USING (value)
        CROSS JOIN (SELECT sum(e) AS e FROM c_cexp WHERE {d} IS NOT NULL) xt"""
                               for d in all_dims)
    rows = _rows(con, f"""
        SELECT * FROM (SELECT *, count(*) OVER () AS tests FROM ({cells}))
        WHERE n >= ? AND n * e_total >= ? * e * n_total""", [min_count, min_lift])
    threshold = _log(alpha / max(1, rows[0]["tests"])) if rows else 0.0
    rows = [r for r in rows if _tail(r["n"], r["n_total"], r["e"], r["e_total"]) < threshold]
    _host_stats(con, rows, all_dims)

    survivors: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        row["log_p"] = _tail(row["n"], row["n_total"], row["e"], row["e_total"])
        # One host is not a pattern: the group must still stand with its busiest host out.
        n1, nt1 = row["n"] - row["top_n"], row["n_total"] - row["top_n"]
        e1, et1 = row["e"] - row["top_e"], row["e_total"] - row["top_e"]
        if row["hosts"] < 3 or n1 < min_count or e1 <= 0 \
                or lift_of(n1, nt1, e1, et1) < min_lift or _tail(n1, nt1, e1, et1) >= threshold:
            continue
        survivors.setdefault(row["code"], []).append(row)

    accepted: list[dict[str, Any]] = []
    exposure: list[tuple[Any, ...]] | None = None
    for code, candidates in sorted(survivors.items()):
        candidates.sort(key=lambda r: (r["log_p"], -r["n"]))
        if len(candidates) == 1:
            accepted.append(candidates[0])
            continue
        # Nested groups: test each again without the hosts of the groups already accepted.
        if exposure is None:
            exposure = con.execute(f"SELECT {cols}, e FROM c_cexp").fetchall()
        events = con.execute(f"SELECT {cols}, n FROM c_combo WHERE code = ?",
                             [code]).fetchall()
        taken: list[tuple[int, Any]] = []
        for row in candidates:
            col = all_dims.index(row["dim"])

            def free(unit: tuple[Any, ...], taken: list[tuple[int, Any]] = taken) -> bool:
                return not any(unit[c] == v for c, v in taken)

            n = sum(u[-1] for u in events if free(u) and u[col] == row["value"])
            nt = sum(u[-1] for u in events if free(u) and u[col] is not None)
            e = sum(u[-1] for u in exposure if free(u) and u[col] == row["value"])
            et = sum(u[-1] for u in exposure if free(u) and u[col] is not None)
            if n >= min_count and e > 0 and lift_of(n, nt, e, et) >= min_lift \
                    and _tail(n, nt, e, et) < threshold:
                accepted.append(row)
                taken.append((col, row["value"]))
    for temp in ("c_units", "c_dims", "c_events", "c_exposure", "c_combo", "c_cexp"):
        con.execute(f"DROP TABLE IF EXISTS {temp}")
    out = [{"code": r["code"], "dimension": r["dim"], "value": r["value"],
            "findings": int(r["n"]), "findings_total": int(r["n_total"]),
            "share": round(r["n"] / r["n_total"], 4),
            "fleet_share": round(r["e"] / r["e_total"], 4),
            "lift": round(lift_of(r["n"], r["n_total"], r["e"], r["e_total"]), 2),
            "hosts": int(r["hosts"]), "fleet_hosts": int(r["fleet_hosts"]),
            "expected": round(r["n_total"] * r["e"] / r["e_total"], 1),
            "p_value": _p(r["log_p"])} for r in accepted]
    return sorted(out, key=lambda r: (-r["lift"], r["code"]))


def _tail(n: float, n_total: float, e: float, e_total: float) -> float:
    """ln P(at least n | the group's exposure share of n_total)."""
    return poisson_log_sf(int(n), n_total * e / e_total) if e_total else 0.0


def _host_stats(con: Connection, rows: list[dict[str, Any]], dims: Sequence[str]) -> None:
    """For the few candidate groups only: hosts affected, hosts in the group, the busiest
    host, its count and its exposure (the per-host detail is the expensive part)."""
    for row in rows:
        row.update(hosts=0, fleet_hosts=0, top_host=None, top_n=0, top_e=0)
    if not rows:
        return
    con.execute("CREATE OR REPLACE TEMP TABLE c_cand (code VARCHAR, dim VARCHAR, "
                "value VARCHAR)")
    insert_rows(con, "c_cand", [("code", "VARCHAR"), ("dim", "VARCHAR"), ("value", "VARCHAR")],
                [[r["code"], r["dim"], r["value"]] for r in rows])
    stats = " UNION ALL ".join(f"""
        SELECT c.code, c.dim, c.value, h.hosts, h.top_host, h.top_n,
               (SELECT count(DISTINCT x.host) FROM c_exposure x JOIN c_dims d USING (c)
                WHERE d.{d} = c.value) AS fleet_hosts,
               (SELECT coalesce(sum(x.e), 0) FROM c_exposure x JOIN c_dims d USING (c)
                WHERE d.{d} = c.value AND x.host = h.top_host) AS top_e
        FROM c_cand c JOIN (
            SELECT e.code, d.{d} AS value, count(DISTINCT e.host) AS hosts,
                   arg_max(e.host, e.n) AS top_host, max(e.n) AS top_n
            FROM c_events e JOIN c_dims d USING (c) SEMI JOIN c_cand c2
                 ON c2.dim = '{d}' AND c2.code = e.code AND c2.value = d.{d}
            GROUP BY ALL) h ON h.code = c.code AND h.value = c.value
        WHERE c.dim = '{d}'""" for d in dims if any(r["dim"] == d for r in rows))
    found = {(r[0], r[1], r[2]): r[3:] for r in con.execute(stats).fetchall()}
    for row in rows:
        hit = found.get((row["code"], row["dim"], row["value"]))
        if hit:
            hosts, top_host, top_n, fleet_hosts, top_e = hit
            row.update(hosts=int(hosts), top_host=top_host, top_n=int(top_n),
                       fleet_hosts=int(fleet_hosts), top_e=int(top_e))
    con.execute("DROP TABLE IF EXISTS c_cand")


def time_to_conclusion(con: Connection, start: datetime | None) -> list[dict[str, Any]]:
    """Per runbook: sessions, how many concluded, and mean / median / p90 minutes to do so."""
    cond, params = _since_sql("started", start)
    return _rows(con, f"""
        SELECT runbook, count(*) AS sessions,
               count(*) FILTER (status = 'concluded') AS concluded,
               round(avg(epoch(ended - started)) FILTER (ended IS NOT NULL), 1) AS mean_s,
               round(median(epoch(ended - started)) FILTER (ended IS NOT NULL), 1) AS median_s,
               round(quantile_cont(epoch(ended - started), 0.9)
                     FILTER (ended IS NOT NULL), 1) AS p90_s
        FROM sessions WHERE {cond} GROUP BY runbook
        ORDER BY sessions DESC, runbook""", params)


def _log(p: float) -> float:
    import math

    return math.log(p) if p > 0 else -math.inf


def _p(log_p: float) -> float:
    import math

    return float(f"{math.exp(log_p):.3g}") if log_p > -745 else 0.0
