"""Repeat offenders: the same hardware-class fault on the same host (or the same GPU, by
serial or UUID) in N separate incidents within a window — counted plainly.

The statistics of ``correlate`` ask whether a host recurs more than the fleet's rate predicts;
a team-sized history cannot reach their corrected p, and more unrelated history raises the bar
further. A GPU that fell off the bus in three incidents this week is a part to replace
whatever the fleet does, so this count has no test and no fleet rate: more evidence never
hides a host that recurs. The defaults and the hardware-class codes are data, each with its
source (``repeat_offenders.yaml``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from .base import Connection, counted_sessions, since_sql, sql_list

RULES_FILE = Path(__file__).with_name("repeat_offenders.yaml")


@dataclass(frozen=True)
class Rule:
    min_incidents: int
    window: timedelta


@dataclass(frozen=True)
class Rules:
    host: Rule
    gpu: Rule
    gpu_keys: tuple[str, ...]
    codes: tuple[str, ...]  # globs


def load_rules(path: Path = RULES_FILE) -> Rules:
    from probes import shipped

    data: dict[str, Any] = shipped.data(path)

    def rule(key: str) -> Rule:
        return Rule(int(data[key]["min_incidents"]),
                    timedelta(days=float(data[key]["window_days"])))

    return Rules(rule("host"), rule("gpu"), tuple(data["gpu_keys"]), tuple(data["codes"]))


def hardware_codes(rules: Rules) -> list[str]:
    """The catalog's codes the rules' globs name."""
    from probes.catalog import load_catalog

    catalog = load_catalog()
    return sorted({c for pattern in rules.codes for c in catalog.match_codes(pattern)})


def _boards(evidence: str | None, keys: tuple[str, ...]) -> set[str]:
    """The GPU serials / UUIDs a finding's evidence names (strings or lists of them)."""
    if not evidence or not any(k in evidence for k in ("serial", "uuid")):
        return set()
    try:
        data = json.loads(evidence)
    except ValueError:
        return set()
    found: set[str] = set()
    if isinstance(data, dict):
        for key in keys:
            value = data.get(key)
            values = value if isinstance(value, list) else [value]
            found.update(str(v) for v in values if isinstance(v, str | int) and str(v).strip()
                         and str(v).lower() not in ("n/a", "[n/a]", "unknown"))
    return found


def _most_within(times: list[datetime], window: timedelta) -> tuple[int, datetime, datetime]:
    """The largest number of *times* (sorted) within one window, and its first and last."""
    best = (0, times[0], times[0])
    lo = 0
    for hi, t in enumerate(times):
        while t - times[lo] > window:
            lo += 1
        if hi - lo + 1 > best[0]:
            best = (hi - lo + 1, times[lo], t)
    return best


# (kind, key, fault) -> incident -> (its first time there, the hosts)
Seen = dict[tuple[str, str, str], dict[str, tuple[datetime, set[str]]]]


def _faults(con: Connection, start: datetime | None, simulated: bool,
            rules: Rules) -> tuple[str, list[Any]]:
    """The findings that can make a repeat offender, one row per fault a finding carries (its
    code when hardware-class, each of its XIDs as "xid N"), as a ``WITH`` clause defining
    ``faults``, and its parameters. The findings are filtered once, before the XIDs are
    unnested (of a year's million findings, the error/critical ones with a hardware code or
    an XID), and read once for both branches (materialized: 0.36 -> 0.15 s on the bench year)."""
    codes = hardware_codes(rules)
    cond, params = since_sql("f.ts", start)
    hardware = f"f.code IN ({sql_list(codes) if codes else 'NULL'})"
    return (f"""WITH picked AS MATERIALIZED (
            SELECT f.code, f.host, s.incident_id, f.ts, f.xids, {hardware} AS hardware,
                   -- kept only where it can name a board (_boards)
                   CASE WHEN f.evidence LIKE '%serial%' OR f.evidence LIKE '%uuid%'
                        THEN f.evidence END AS evidence
            FROM findings f JOIN {counted_sessions(simulated)} s ON s.id = f.session_id
            WHERE {cond} AND f.host IS NOT NULL AND f.severity IN ('error', 'critical')
              AND ({hardware} OR len(coalesce(f.xids, [])) > 0)),
        faults AS (
            SELECT code AS fault, host, incident_id, ts, evidence FROM picked WHERE hardware
            UNION ALL
            SELECT 'xid ' || x, host, incident_id, ts, evidence
            FROM (SELECT *, unnest(xids) AS x FROM picked WHERE len(coalesce(xids, [])) > 0)
            WHERE x IS NOT NULL)""", params)


def _host_faults(con: Connection, start: datetime | None, simulated: bool,
                 rules: Rules) -> Seen:
    """Per (host, fault) seen in at least the host rule's number of incidents within its
    window: each incident with its first time. Counted in the database (a window over each
    pair's incidents): of the bench year's ~144,000 (fault, host, incident) groups only the
    pairs that qualify (~200) cross into Python, where converting every group cost 1.3 s."""
    faults, params = _faults(con, start, simulated, rules)
    span = f"INTERVAL '{int(rules.host.window.total_seconds())} seconds'"
    seen: Seen = {}
    for host, fault, incidents, firsts in con.execute(f"""
            {faults},
            firsts AS (SELECT host, fault, incident_id, min(ts) AS ts FROM faults GROUP BY ALL),
            counted AS (
                SELECT host, fault, count(*) OVER (
                    PARTITION BY host, fault ORDER BY ts
                    RANGE BETWEEN CURRENT ROW AND {span} FOLLOWING) AS n
                FROM firsts)
            SELECT host, fault, list(incident_id), list(ts) FROM firsts
            SEMI JOIN (SELECT DISTINCT host, fault FROM counted WHERE n >= ?) q
                USING (host, fault)
            GROUP BY ALL ORDER BY host, fault""",
            [*params, rules.host.min_incidents]).fetchall():
        seen[("host", host, fault)] = {
            incident: (ts, {host}) for incident, ts in zip(incidents, firsts, strict=True)}
    return seen


def _board_faults(con: Connection, start: datetime | None, simulated: bool,
                  rules: Rules) -> Seen:
    """Per (GPU board, fault): the incidents whose findings name the board (a serial or UUID
    in their evidence), with their first time and hosts. Only findings whose evidence can name
    a board are read."""
    faults, params = _faults(con, start, simulated, rules)
    seen: Seen = {}
    for fault, host, incident, ts, evidences in con.execute(f"""
            {faults}
            SELECT fault, host, incident_id, min(ts), list(DISTINCT evidence) FROM faults
            WHERE evidence IS NOT NULL GROUP BY ALL""", params).fetchall():
        for evidence in evidences or []:
            for board in _boards(evidence, rules.gpu_keys):
                incidents = seen.setdefault(("gpu", board, fault), {})
                first, hosts = incidents.get(incident, (ts, set()))
                incidents[incident] = (min(first, ts), hosts | {host})
    return seen


def repeat_offenders(con: Connection, start: datetime | None, *, simulated: bool = False,
                     rules: Rules | None = None) -> list[dict[str, Any]]:
    """Hosts and GPUs with the same hardware-class fault in at least N incidents within the
    rule's window: one row per (what, fault), most incidents first."""
    rules = rules or load_rules()
    seen = _host_faults(con, start, simulated, rules)
    seen.update(_board_faults(con, start, simulated, rules))
    # One line per (host or GPU, incidents): an XID 79 finding's code and its XID are one fault.
    merged: dict[tuple[str, str, frozenset[str]], dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for (kind, key, fault), incidents in seen.items():
        rule = rules.host if kind == "host" else rules.gpu
        if len(incidents) < rule.min_incidents:
            continue
        times = sorted(t for t, _ in incidents.values())
        count, first, last = _most_within(times, rule.window)
        if count < rule.min_incidents:
            continue
        same = merged.get((kind, key, frozenset(incidents)))
        if same is not None:
            same["faults"].append(fault)
            # the code first, then its XIDs ("xid-drain / xid 79"), whatever came first
            same["fault"] = " / ".join(sorted(same["faults"],
                                              key=lambda f: (f.startswith("xid "), f)))
            continue
        row = {"kind": kind, "key": key, "fault": fault, "faults": [fault], "incidents": count,
               "incidents_total": len(incidents), "first": first, "last": last,
               "hosts": sorted(set().union(*(h for _, h in incidents.values()))),
               "min_incidents": rule.min_incidents,
               "window_days": rule.window / timedelta(days=1)}
        merged[(kind, key, frozenset(incidents))] = row
        out.append(row)
    out.sort(key=lambda r: (-r["incidents"], r["kind"] != "gpu", r["key"], r["fault"]))
    return out


def repeat_text(row: dict[str, Any]) -> str:
    """One repeat offender as a lead line."""
    what = (f"host {row['key']}" if row["kind"] == "host"
            else f"GPU {row['key']} (on {', '.join(row['hosts'])})")
    span = row["last"] - row["first"]
    days = span / timedelta(days=1)
    within = f"{days:.1f} days" if days >= 1 else f"{span / timedelta(hours=1):.1f} hours"
    total = (f" ({row['incidents_total']} in all)"
             if row["incidents_total"] > row["incidents"] else "")
    return (f"repeat offender: {row['fault']} on {what}: {row['incidents']} incidents within "
            f"{within}{total} — {row['min_incidents']} within {row['window_days']:g} days "
            "make a repeat offender (repeat_offenders.yaml); replace or escalate, not resume")
