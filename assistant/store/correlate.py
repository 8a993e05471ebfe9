"""``diag correlate``: the patterns in the history, as SQL.

Correlation is the post-mortem author's questions — which nodes keep failing, which leaf switch
do the errors sit under, which driver/NCCL/kernel do the hangs share, which XIDs keep coming
back, how long does each runbook take — each answered as "observed versus what the fleet's rate
predicts", so the output names as significant only patterns that are both large (lift >= 2, a
minimum count) and unlikely to be chance (exact tails, Bonferroni-corrected over every group
tested) — and shows the strongest groups that fall short as *leads*, with their figures.
Recurrence (a host against its own rate) is tested here; concentration (a leaf, rack, rail or
version against its share of the fleet's hosts) in ``concentration``.

Units are host-incidents (one host in one incident, however many walks of the incident probed
it), deduplicated per finding code: three runs over the same hosts while fixing one problem
are one look at them, and a finding repeated in two steps of one walk counts once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from probes.catalog import load_catalog

from . import hostincidents
from .base import Connection, counted_sessions, fetch_rows, since_sql, sql_list
from .concentration import concentrated_codes
from .evidence import evidence, not_evidence, sources, window
from .history import cutoff
from .incidents import time_to_resolve
from .repeats import repeat_offenders
from .stats import binom_log_sf, p_from_log, safe_log

# Which codes count as evidence of a pattern comes from the catalog's categories
# (probes/catalog.yaml): codes that say diag could not look ("not-evidence") never do; codes
# that are themselves a placement or version comparison are left out of that grouping, where
# they would only restate how they were computed.
PLACEMENT_DIMS = hostincidents.PLACE  # ("leaf", "rack", "rail"), as the kept rows carry them
VERSION_DIMS = hostincidents.STACK  # ("driver_version", "nccl_version", "kernel")


def correlate(con: Connection, *, since: timedelta | None = timedelta(days=90),
              min_count: int = 10, min_lift: float = 2.0, alpha: float = 0.01,
              limit: int = 20, leads: int = 5, now: datetime | None = None,
              simulated: bool = False,
              timings: dict[str, float] | None = None) -> dict[str, Any]:
    """Every correlation report over the window; *timings* (if given) gets seconds per part.

    *leads*: at most that many leads per concentration report (0: none). *simulated*: count
    simulated walks too.
    """
    start = cutoff(since, now)
    kw: dict[str, Any] = {"min_lift": min_lift, "alpha": alpha, "simulated": simulated}
    parts: list[tuple[str, Callable[[], Any]]] = [
        ("recurring_hosts", lambda: recurring_hosts(con, start, limit=limit, **kw)),
        ("placement", lambda: placement_concentration(con, start, min_count=min_count,
                                                      leads=leads, **kw)),
        ("versions", lambda: version_cohorts(con, start, min_count=min_count, leads=leads,
                                             **kw)),
        ("xid_repeat", lambda: xid_repeat_offenders(con, start, limit=limit, **kw)),
        ("repeat_offenders", lambda: repeat_offenders(con, start, simulated=simulated)),
        ("time_to_conclusion", lambda: time_to_conclusion(con, start, simulated=simulated)),
        ("time_to_resolve", lambda: time_to_resolve(con, start, simulated=simulated)),
    ]
    result: dict[str, Any] = {"since": start, "thresholds": {
        "min_count": min_count, "min_lift": min_lift, "alpha": alpha}}
    # The host-incidents are read (or, where not kept, derived) once for all the reports.
    with evidence(con, simulated):
        for name, run in parts:
            began = time.perf_counter()
            result[name] = run()
            if timings is not None:
                timings[name] = time.perf_counter() - began
    result["leads"] = {key: result[key][1] for key in ("placement", "versions")}
    for key in ("placement", "versions"):
        result[key] = result[key][0]
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
    names = sql_list([h["host"] for h in hosts])
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


# Recurrence: a host that raises the same code in more incidents than its share predicts.

def recurring_hosts(con: Connection, start: datetime | None, *, min_incidents: int = 3,
                    min_lift: float = 2.0, alpha: float = 0.01, limit: int = 20,
                    simulated: bool = False) -> list[dict[str, Any]]:
    """Hosts that recur across incidents: per (host, code), the incidents in which the host
    raised the code, against the incidents it took part in times the code's fleet rate."""
    with evidence(con, simulated):
        hinc, codes = sources(con)
        rows = _recurrence(
            con, f"SELECT code, host, ts FROM {codes} WHERE {window('ts', start)} "
                 f"AND code NOT IN ({sql_list(not_evidence())})",
            hinc, start, min_incidents, min_lift, alpha)
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
                         min_lift: float = 2.0, alpha: float = 0.01, limit: int = 20,
                         simulated: bool = False) -> list[dict[str, Any]]:
    """Per XID code, the hosts that raised it in more incidents than chance allows."""
    cond, params = since_sql("f.ts", start)
    # An XID is its own code: the units are (XID, host-incident), few enough (XID findings
    # are a small share) to derive here, each with its newest time.
    units = (f"CREATE OR REPLACE TEMP TABLE c_xev AS SELECT CAST(f.x AS VARCHAR) AS code, "
             f"s.incident_id, f.host, max(f.ts) AS ts "
             f"FROM (SELECT unnest(f.xids) AS x, f.host, f.session_id, f.ts FROM findings f "
             f"WHERE {cond} AND f.xids IS NOT NULL AND f.host IS NOT NULL) f "
             f"JOIN {counted_sessions(simulated)} s ON s.id = f.session_id GROUP BY ALL")
    with evidence(con, simulated):
        hinc, _ = sources(con)
        try:
            con.execute(units, params)
            rows = _recurrence(con, "SELECT code, host, ts FROM c_xev", hinc, start,
                               min_incidents, min_lift, alpha)
        finally:
            con.execute("DROP TABLE IF EXISTS c_xev")
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


def _recurrence(con: Connection, units_sql: str, hinc: str, start: datetime | None,
                min_incidents: int, min_lift: float, alpha: float) -> list[dict[str, Any]]:
    """(code, host) pairs with k incidents against expected = incidents involved x rate.

    *units_sql* yields one row per (code, host-incident): ``code``, ``host`` and its newest
    ``ts``; the hosts' incidents are the host-incidents of *hinc* a walk listed. The rate of
    a code is its incidents-with-the-code per host-incident over the fleet (a host no walk
    listed still raises it).

    Only the pairs that may pass *alpha* come back: the binomial pmf at k is a lower bound of
    the tail P(X >= k) (the tail sums it and more), so a pair whose pmf is already above
    alpha / tests cannot be significant. Over a year that leaves ~100 of ~20,000 pairs for
    the exact tail in Python (which cost more than the query itself); the bound is computed
    in SQL with a margin of 1e-6 in log space, so rounding between DuckDB's and Python's
    lgamma never drops a pair Python would pass. ``tests`` still counts every pair (a count
    of the materialised pairs: a ``count(*) OVER ()`` window over a year's ~260,000 cost
    ~50 ms of CPU)."""
    # Grouped on the code's hash and the host (an integer and a name: a quarter less time
    # than on two names over a year's ~900,000 units); the few dozen codes are named from
    # their hashes at the end, for the rows that come back.
    return fetch_rows(con, f"""
        WITH involved AS (SELECT host, count(*) AS n FROM {hinc}
                          WHERE listed AND {window('ts', start)} GROUP BY host),
        ev AS MATERIALIZED (SELECT hash(code) AS h, host, count(*) AS k, max(ts) AS last_seen
                            FROM ({units_sql}) GROUP BY ALL),
        rate AS (SELECT h, sum(k) / (SELECT sum(n) FROM involved) AS rate
                 FROM ev GROUP BY h),
        scored AS MATERIALIZED (
            SELECT ev.h, ev.host, ev.k, involved.n AS involved,
                   involved.n * rate.rate AS expected, rate.rate, ev.last_seen
            FROM ev JOIN involved USING (host) JOIN rate USING (h)),
        tests AS (SELECT count(*) AS tests FROM scored),
        named AS (SELECT DISTINCT code, hash(code) AS h FROM ({units_sql}))
        SELECT named.code, s.* EXCLUDE (bound, h) FROM (
            SELECT *, CASE WHEN k > involved THEN -1e308 WHEN rate >= 1 THEN 0.0
                           ELSE lgamma(involved + 1) - lgamma(k + 1) - lgamma(involved - k + 1)
                                + k * ln(rate) + (involved - k) * ln(1 - rate) END AS bound
            FROM scored CROSS JOIN tests WHERE k >= ? AND k >= ? * expected) s
        JOIN named USING (h)
        WHERE bound < ln(? / tests) + 1e-6
        ORDER BY k DESC, code, host""", [min_incidents, min_lift, max(alpha, 1e-300)])


def _significant(rows: list[dict[str, Any]], alpha: float) -> list[dict[str, Any]]:
    """The rows whose exact binomial tail — k or more of the host's incidents with the code,
    each with the code's fleet rate — passes alpha over the number of (code, host) tested."""
    out = []
    for row in rows:
        log_p = binom_log_sf(int(row["k"]), int(row["involved"]), float(row["rate"]))
        tests = max(1, int(row["tests"]))
        if log_p < safe_log(alpha / tests):
            row.update(log_p=log_p, p_value=p_from_log(log_p),
                       lift=row["k"] / row["expected"] if row["expected"] else float("inf"))
            out.append(row)
    return out


# Concentration: a code's share of one leaf / rack / rail / version against its share of the
# fleet's host-sessions.

Report = tuple[list[dict[str, Any]], list[dict[str, Any]]]  # (patterns, leads)


def placement_concentration(con: Connection, start: datetime | None, *, min_count: int = 10,
                            min_lift: float = 2.0, alpha: float = 0.01, leads: int = 5,
                            simulated: bool = False) -> Report:
    """Finding codes concentrated on one leaf switch, rack or rail (a host-incident is
    placed where its latest walk of the incident found the host): (patterns, leads)."""
    return concentrated_codes(con, PLACEMENT_DIMS, None, start,
                              load_catalog().category("placement"), min_count, min_lift, alpha,
                              simulated, leads)


def version_cohorts(con: Connection, start: datetime | None, *, min_count: int = 10,
                    min_lift: float = 2.0, alpha: float = 0.01, leads: int = 5,
                    simulated: bool = False) -> Report:
    """Finding codes that co-occur with one driver, NCCL or kernel version, or one
    (driver / NCCL / kernel) tuple, per the versions probe's facts (a host-incident's stack
    is its latest versions run's, in its session's last versions step): (patterns, leads)."""
    return concentrated_codes(con, VERSION_DIMS, ("tuple", VERSION_DIMS), start,
                              load_catalog().category("version"), min_count, min_lift, alpha,
                              simulated, leads)


def time_to_conclusion(con: Connection, start: datetime | None,
                       simulated: bool = False) -> list[dict[str, Any]]:
    """Per runbook: sessions, how many concluded (and how many ended when their incident was
    closed while they waited: neither open nor timed), and mean / median / p90 minutes to
    conclude."""
    cond, params = since_sql("started", start)
    timed = "ended IS NOT NULL AND status <> 'closed-while-waiting'"
    return fetch_rows(con, f"""
        SELECT runbook, count(*) AS sessions,
               count(*) FILTER (status = 'concluded') AS concluded,
               count(*) FILTER (status = 'closed-while-waiting') AS closed_waiting,
               round(avg(epoch(ended - started)) FILTER ({timed}), 1) AS mean_s,
               round(median(epoch(ended - started)) FILTER ({timed}), 1) AS median_s,
               round(quantile_cont(epoch(ended - started), 0.9)
                     FILTER ({timed}), 1) AS p90_s
        FROM {counted_sessions(simulated)} WHERE {cond} GROUP BY runbook
        ORDER BY sessions DESC, runbook""", params)
