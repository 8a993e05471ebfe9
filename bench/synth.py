"""A synthetic fleet history: a year of incidents over a large fleet, built inside DuckDB.

The benchmark needs a million findings to time the correlation queries against, the tests need
a history with a known pattern planted in it, and a demo needs a store that is not empty. All
three are this generator; it lives with the benchmark, outside the installed package, because
diag itself never fabricates history. Rows are produced by DuckDB's own ``range()`` / ``random()`` /
``hash()`` in a handful of INSERT ... SELECT statements — no Python loop per row — so a
realistic year (1,000,000 findings, 10,000 hosts, ~1.3 M probe runs) is built in seconds.

The shape follows a real GPU fleet: 32 hosts per rack, 4 racks per leaf switch, 8 rails;
each host has a software stack (driver / NCCL / kernel / CUDA) assigned by a stable hash; jobs
take contiguous blocks of 8 to 256 hosts; each session walks a real runbook and ends in one of
its real conclusions; finding codes follow a weighted mix of the catalog's codes with their
catalog severities. Raw outputs are not synthesized (their column stays NULL).

Planted on request (``plant=True``), so correlation can be checked against a known truth:

- ``ib-symbol-errors`` at 6x the fleet rate on one leaf switch (``PLANTED_LEAF``);
- every ``nccl-watchdog-timeout`` (the hangs) on hosts running one NCCL (``PLANTED_NCCL``);
- a few "bad" hosts that raise XID 79 (``xid-drain``) in most of their sessions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from assistant.store import hostincidents
from assistant.store.base import Connection, insert_rows, now_utc

HOSTS_PER_RACK, RACKS_PER_LEAF, RAILS = 32, 4, 8
PLANTED_LEAF = "leaf-07"
PLANTED_LEAF_FACTOR = 6.0
PLANTED_NCCL = "2.18.3"
HANG_CODE = "nccl-watchdog-timeout"
SYMBOL_CODE = "ib-symbol-errors"
BAD_HOST_XID = 79

# (value, share in %) per version key; assigned to hosts by independent stable hashes.
VERSIONS: dict[str, list[tuple[str, int]]] = {
    "driver_version": [("535.154.05", 45), ("550.54.15", 35), ("550.90.07", 20)],
    "nccl_version": [(PLANTED_NCCL, 25), ("2.19.3", 40), ("2.20.5", 35)],
    "kernel": [("5.15.0-105-generic", 60), ("5.15.0-119-generic", 40)],
    "cuda_version": [("12.2", 50), ("12.4", 50)],
}

# The finding mix: code -> relative weight (per mille of findings). Planted codes have their
# own generators; their weights say how many of them to make.
CODE_WEIGHTS: dict[str, float] = {
    "not-measured": 150, "tcp-retransmits": 80, "gpu-throttle-thermal": 55,
    "gpu-throttle-power": 50, "ib-rcv-errors": 45, "rx-discards": 45, "pfc-pause-high": 40,
    "port-counter-outlier": 40, "gpu-util-outlier": 40, "gpu-low-utilization": 40,
    "storage-latency-high": 35, "nccl-debug-off": 35, "iowait-high": 30, "version-drift": 30,
    "xid-application": 30, SYMBOL_CODE: 30, HANG_CODE: 20, "ib-link-flapping": 20,
    "xid-other": 15, "xid-reset": 15, "xid-drain": 10, "host-memory-pressure": 20,
    "cpu-saturated": 20, "storage-bandwidth-low": 20, "busbw-low": 20, "host-unreachable": 15,
    "nccl-socket-transport": 10, "nccl-env-drift": 10, "ib-port-down": 10,
    "ib-rate-degraded": 10, "cuda-oom": 10, "probe-parse-error": 10, "ecc-uncorrectable": 5,
    "row-remap-pending": 5, "pfc-storm": 5, "gpu-fallen-off-bus": 3, "host-oom-killer": 5,
    "storage-outlier": 5,
}
XIDS = {"xid-drain": [79, 48, 64], "xid-reset": [94, 92], "xid-application": [13, 31, 43],
        "xid-other": [119, 154]}
RUNBOOK_WEIGHTS = {"hang": 25, "low-bandwidth": 20, "crash": 15, "low-utilization": 10,
                   "checkpoint-stall": 8, "oom": 8, "launch-failure": 7, "loss-divergence": 4,
                   "queue-idle": 3}
JOB_SIZES = [(8, 20), (16, 20), (32, 20), (64, 20), (128, 12), (256, 8)]
PROBES = ["gpu", "network", "nccl", "storage", "host", "topology"]
OPERATORS = [f"oncall{i:02d}" for i in range(1, 26)]


def bad_host_names(hosts: int) -> list[str]:
    """The hosts planted as bad (XID 79 in most of their sessions) in a fleet of *hosts*."""
    return [f"gpu{i:05d}" for i in sorted({(hosts * k) // 7 + 3 for k in range(1, 7)}
                                          & set(range(hosts)))]


@dataclass
class Synthetic:
    """What was generated: row counts per table, and the truth that was planted."""

    counts: dict[str, int] = field(default_factory=dict)
    planted_leaf: str | None = None
    planted_nccl: str | None = None
    bad_hosts: list[str] = field(default_factory=list)


def _slots(weights: Mapping[str, float], size: int = 1000) -> list[tuple[int, str]]:
    """A lookup table of *size* slots, each value taking slots in proportion to its weight:
    a uniform random slot then picks a value with an equi-join instead of a range join."""
    total = sum(weights.values())
    slots, edge = [], 0.0
    for value, weight in weights.items():
        start, edge = round(edge), edge + weight * size / total
        slots += [(i, value) for i in range(start, round(edge))]
    return slots


def _case(shares: list[tuple[str, int]]) -> str:
    """SQL picking a value from the bucket ``h`` (0..99) by cumulative share."""
    parts, edge = [], 0
    for value, share in shares:
        edge += share
        parts.append(f"WHEN h < {edge} THEN '{value}'")
    return "CASE " + " ".join(parts) + " END"


def generate(con: Connection, *, hosts: int = 10_000, findings: int = 1_000_000,
             days: int = 365, seed: float = 0.42, end: datetime | None = None,
             plant: bool = True, threads: int | None = None) -> Synthetic:
    """Append a synthetic history to the open store (inside the caller's transaction).

    *threads*: DuckDB threads while generating; 1 makes the result identical for one *seed*
    (tests), the default uses every core (benchmark).
    """
    from assistant.runbook.library import all_runbooks
    from probes.catalog import load_catalog

    end = end or now_utc()
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    con.execute("SELECT setseed(?)", [seed])
    catalog = load_catalog().codes
    n_incidents = max(1, findings // 170)

    # --- dimension tables ----------------------------------------------------------------
    version_cols = ", ".join(
        f"(SELECT {_case(shares)} FROM (SELECT hash(i, '{key}') % 100 AS h)) AS {key}"
        for key, shares in VERSIONS.items())
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE syn_fleet AS
        SELECT i, printf('gpu%05d', i) AS host,
               printf('r%03d', i // {HOSTS_PER_RACK}) AS rack,
               printf('leaf-%02d', i // {HOSTS_PER_RACK * RACKS_PER_LEAF}) AS leaf,
               CAST(i % {RAILS} AS VARCHAR) AS rail, {version_cols}
        FROM range({hosts}) t(i)""")
    codes = {c: w for c, w in CODE_WEIGHTS.items() if c in catalog}
    base_codes = {c: w for c, w in codes.items() if not (plant and c in (SYMBOL_CODE,
                                                                           HANG_CODE))}
    con.execute("CREATE OR REPLACE TEMP TABLE syn_codes (code VARCHAR, no INTEGER, "
                "severity VARCHAR, probe VARCHAR)")
    insert_rows(con, "syn_codes", [("code", "VARCHAR"), ("no", "INTEGER"),
                                   ("severity", "VARCHAR"), ("probe", "VARCHAR")],
                [[c, i, catalog[c].severity, catalog[c].probe if catalog[c].probe != "common"
                  else "gpu"] for i, c in enumerate(codes)])
    con.execute("CREATE OR REPLACE TEMP TABLE syn_slots (slot INTEGER, code VARCHAR)")
    insert_rows(con, "syn_slots", [("slot", "INTEGER"), ("code", "VARCHAR")],
                _slots(base_codes))
    con.execute("CREATE OR REPLACE TEMP TABLE syn_runbook_slots (slot INTEGER, runbook VARCHAR)")
    insert_rows(con, "syn_runbook_slots", [("slot", "INTEGER"), ("runbook", "VARCHAR")],
                _slots(RUNBOOK_WEIGHTS, 100))
    con.execute("CREATE OR REPLACE TEMP TABLE syn_size_slots (slot INTEGER, size INTEGER)")
    insert_rows(con, "syn_size_slots", [("slot", "INTEGER"), ("size", "INTEGER")],
                [(s, int(v)) for s, v in _slots({str(k): w for k, w in JOB_SIZES}, 100)])
    conclusions = [[r.id, k, n.id, n.title, n.cause, n.severity]
                   for r in all_runbooks() if r.id in RUNBOOK_WEIGHTS
                   for k, n in enumerate(x for x in r.nodes.values() if x.kind == "conclusion")]
    con.execute("CREATE OR REPLACE TEMP TABLE syn_conc (runbook VARCHAR, k INTEGER, "
                "node VARCHAR, title VARCHAR, cause VARCHAR, severity VARCHAR)")
    insert_rows(con, "syn_conc", [("runbook", "VARCHAR"), ("k", "INTEGER"), ("node", "VARCHAR"),
                                  ("title", "VARCHAR"), ("cause", "VARCHAR"),
                                  ("severity", "VARCHAR")], conclusions)

    # --- incidents and sessions ----------------------------------------------------------
    start = end - timedelta(days=days)
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE syn_inc AS
        SELECT j, substr(md5(j::VARCHAR || '-inc-' || {seed}), 1, 12) AS id,
               ?::TIMESTAMP + to_microseconds(CAST(random() * {days} * 86400e6 AS BIGINT))
                   AS opened,
               rb.runbook,
               1 + CAST(random() < 0.3 AS INTEGER) + CAST(random() < 0.1 AS INTEGER) AS n_sess,
               random() < 0.9 AS closed,
               printf('job-%07d', 1000000 + j) AS job_id
        FROM range({n_incidents}) t(j)
        JOIN syn_runbook_slots rb ON rb.slot = CAST(floor(hash(j, {seed}) % 100) AS INTEGER)
        """, [start])
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE syn_sess AS
        SELECT *, row_number() OVER (ORDER BY started) - 1 AS sno FROM (
            SELECT substr(md5(i.id || '-' || k), 1, 12) AS id, i.id AS incident_id, i.runbook,
                   i.opened + to_microseconds(CAST((k * 2400 + random() * 600) * 1e6 AS BIGINT))
                       AS started,
                   ['{"','".join(OPERATORS)}'][1 + CAST(floor(random() * {len(OPERATORS)})
                                                          AS INTEGER)] AS operator,
                   sz.size,
                   CAST(floor(random() * {hosts}) AS INTEGER) AS first_host,
                   exp(ln(900) + (random() + random() + random() - 1.5) * 1.6) AS duration_s,
                   CASE WHEN random() < 0.93 OR k < i.n_sess - 1 THEN 'concluded'
                        WHEN random() < 0.5 THEN 'waiting' ELSE 'running' END AS status,
                   3 + CAST(floor(random() * 5) AS INTEGER) AS n_steps,
                   random() < 0.3 AS has_action,
                   k, i.n_sess
            FROM (SELECT *, CAST(floor(random() * 100) AS INTEGER) AS size_slot
                  FROM (SELECT *, unnest(range(n_sess)) AS k FROM syn_inc)) i
            JOIN syn_size_slots sz ON sz.slot = i.size_slot)
        """)
    con.execute("""
        CREATE OR REPLACE TEMP TABLE syn_sess_conc AS
        SELECT s.id, c.node, c.title, c.cause, c.severity FROM (
            SELECT s.id, s.runbook, CAST(floor(random() * n.n) AS INTEGER) AS k
            FROM syn_sess s JOIN (SELECT runbook, count(*) AS n FROM syn_conc GROUP BY runbook) n
            USING (runbook)) s
        JOIN syn_conc c ON c.runbook = s.runbook AND c.k = s.k""")
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE syn_hs AS
        SELECT row_number() OVER () - 1 AS rn, s.id AS session_id, s.started, f.*
        FROM (SELECT id, started, size, first_host, unnest(range(size)) AS o FROM syn_sess) s
        JOIN syn_fleet f ON f.i = (s.first_host + s.o) % {hosts}""")

    # --- the real tables ---------------------------------------------------------------
    con.execute("""
        INSERT INTO incidents (id, title, symptom, job_id, status, opened, closed, root_cause,
                               conclusion, tags)
        SELECT i.id, i.runbook || ' on ' || i.job_id, 'synthetic ' || i.runbook || ' incident',
               i.job_id, CASE WHEN i.closed THEN 'closed' ELSE 'open' END, i.opened,
               CASE WHEN i.closed THEN last.started + to_microseconds(
                   CAST((last.duration_s + 3600) * 1e6 AS BIGINT)) END,
               c.title || ': ' || c.cause, i.runbook || '/' || c.node, [i.runbook, 'synthetic']
        FROM syn_inc i
        JOIN syn_sess last ON last.incident_id = i.id AND last.k = i.n_sess - 1
        JOIN syn_sess_conc c ON c.id = last.id
        ORDER BY i.opened""")
    con.execute("""
        INSERT INTO sessions (id, incident_id, runbook, operator, started, updated, ended,
                              status, conclusion, outcome, severity, hosts_n)
        SELECT s.id, s.incident_id, s.runbook, s.operator, s.started,
               s.started + to_microseconds(CAST(s.duration_s * 1e6 AS BIGINT)),
               CASE WHEN s.status = 'concluded'
                    THEN s.started + to_microseconds(CAST(s.duration_s * 1e6 AS BIGINT)) END,
               s.status,
               CASE WHEN s.status = 'concluded' THEN c.node END,
               CASE WHEN s.status = 'concluded' THEN c.title || ': ' || c.cause END,
               CASE WHEN s.status = 'concluded' THEN c.severity END, s.size
        FROM syn_sess s JOIN syn_sess_conc c USING (id) ORDER BY s.started""")
    con.execute("""
        INSERT INTO hosts (session_id, host, ts, rack, leaf, rail, attrs)
        SELECT session_id, host, started, rack, leaf, rail,
               to_json({'pod': 'pod-' || (i // 2048)})
        FROM syn_hs ORDER BY started, host""")
    # Steps: 0 = the versions probe, last = the conclusion, the one before it an action when
    # the session has one; in between, probes (odd) and questions (even).
    con.execute("""
        CREATE OR REPLACE TEMP TABLE syn_steps AS
        SELECT s.id AS session_id, q AS idx, s.started + to_microseconds(
                   CAST(s.duration_s * 1e6 * q / s.n_steps AS BIGINT)) AS ts,
               CASE WHEN q = 0 THEN 'probe' WHEN q = s.n_steps - 1 THEN 'conclusion'
                    WHEN q = s.n_steps - 2 AND s.has_action AND s.n_steps >= 4 THEN 'action'
                    WHEN q % 2 = 1 THEN 'probe' ELSE 'question' END AS kind,
               s.n_steps, s.status, s.operator, s.has_action
        FROM (SELECT *, unnest(range(n_steps)) AS q FROM syn_sess) s
        WHERE s.status = 'concluded' OR q < s.n_steps - 1""")
    con.execute(f"""
        INSERT INTO steps (session_id, seq, idx, node, kind, answer, goto, because, started,
                           ended, undone)
        SELECT st.session_id, st.idx, st.idx,
               CASE st.kind WHEN 'conclusion' THEN c.node WHEN 'action' THEN 'drain-nodes'
                    WHEN 'question' THEN 'ask-' || st.idx
                    ELSE CASE WHEN st.idx = 0 THEN 'check-versions'
                              ELSE 'check-' || ['{"','".join(PROBES)}'][
                                  1 + (hash(st.session_id, st.idx) % {len(PROBES)})::INTEGER]
                         END END,
               st.kind, CASE WHEN st.kind = 'question' THEN 'no' END,
               CASE WHEN st.kind <> 'conclusion' THEN 'step-' || (st.idx + 1) END,
               CASE st.kind WHEN 'question' THEN 'answer: No' WHEN 'probe' THEN 'fallback'
                    ELSE '' END,
               st.ts, st.ts + INTERVAL 20 SECOND, false
        FROM syn_steps st JOIN syn_sess_conc c ON c.id = st.session_id
        ORDER BY st.ts""")
    con.execute(f"""
        INSERT INTO probe_runs (session_id, step_seq, step_index, ts, host, probe, state,
                                reason, duration_s, raw, raw_bytes, facts)
        SELECT hs.session_id, st.idx, st.idx, st.ts + INTERVAL 20 SECOND, hs.host,
               CASE WHEN st.idx = 0 THEN 'versions'
                    ELSE ['{"','".join(PROBES)}'][
                        1 + (hash(st.session_id, st.idx) % {len(PROBES)})::INTEGER] END,
               CASE WHEN r < 0.995 THEN 'ok' WHEN r < 0.9975 THEN 'timeout'
                    ELSE 'unreachable' END,
               CASE WHEN r >= 0.995 THEN 'synthetic failure' END,
               0.2 + r * 3, NULL, NULL,
               CASE WHEN st.idx = 0 AND r < 0.995 THEN to_json({{
                        'driver_version': hs.driver_version, 'nccl_version': hs.nccl_version,
                        'kernel': hs.kernel, 'cuda_version': hs.cuda_version}})
                    ELSE '{{}}'::JSON END
        FROM (SELECT *, random() AS r FROM syn_hs) hs
        JOIN syn_steps st ON st.session_id = hs.session_id AND st.kind = 'probe'""")
    con.execute("""
        INSERT INTO actions (session_id, step_seq, step_index, ts, node, command, hosts,
                             confirmed, confirmed_by, result)
        SELECT st.session_id, st.idx, st.idx, st.ts + INTERVAL 20 SECOND, 'drain-nodes',
               'scontrol update NodeName=$HOST State=DRAIN Reason=diag',
               [hs.host], c, CASE WHEN c THEN st.operator END,
               CASE WHEN c THEN 'drained' ELSE 'not confirmed; not run' END
        FROM (SELECT *, random() < 0.6 AS c FROM syn_steps WHERE kind = 'action') st
        JOIN (SELECT session_id, min(host) AS host FROM syn_hs GROUP BY session_id) hs
        USING (session_id)""")

    # --- findings --------------------------------------------------------------------------
    # syn_find: which host-session (rn) raised which code, and its XID codes for xid-*.
    n_hs = int(con.execute("SELECT count(*) FROM syn_hs").fetchone()[0])  # type: ignore[index]
    xid_expr = "CASE code " + " ".join(
        f"WHEN '{code}' THEN [[{','.join(map(str, v))}][1 + CAST(floor(random() * {len(v)}) "
        "AS INTEGER)]]" for code, v in XIDS.items()) + " END"
    con.execute("CREATE OR REPLACE TEMP TABLE syn_find (rn BIGINT, code VARCHAR, x INTEGER[])")
    planted = 0
    bad_hosts: list[str] = []
    if plant:
        total_weight = sum(codes.values())
        target_symbol = round(findings * codes.get(SYMBOL_CODE, 0) / total_weight)
        target_hang = round(findings * codes.get(HANG_CODE, 0) / total_weight)
        leaf_share = float(con.execute(  # type: ignore[index]
            "SELECT avg(CAST(leaf = ? AS DOUBLE)) FROM syn_hs", [PLANTED_LEAF]).fetchone()[0])
        keep = leaf_share + (1 - leaf_share) / PLANTED_LEAF_FACTOR
        con.execute(f"""
            INSERT INTO syn_find
            SELECT hs.rn, '{SYMBOL_CODE}', NULL FROM (
                SELECT CAST(floor(random() * {n_hs}) AS BIGINT) AS rn, random() AS u
                FROM range({round(target_symbol / keep)})) c
            JOIN syn_hs hs USING (rn)
            WHERE hs.leaf = '{PLANTED_LEAF}' OR c.u < {1 / PLANTED_LEAF_FACTOR}""")
        nccl_share = float(con.execute(  # type: ignore[index]
            "SELECT avg(CAST(nccl_version = ? AS DOUBLE)) FROM syn_hs",
            [PLANTED_NCCL]).fetchone()[0]) or 1.0
        con.execute(f"""
            INSERT INTO syn_find
            SELECT hs.rn, '{HANG_CODE}', NULL FROM (
                SELECT CAST(floor(random() * {n_hs}) AS BIGINT) AS rn
                FROM range({round(target_hang / nccl_share)})) c
            JOIN syn_hs hs USING (rn) WHERE hs.nccl_version = '{PLANTED_NCCL}'""")
        bad = sorted({(hosts * k) // 7 + 3 for k in range(1, 7)} & set(range(hosts)))
        bad_hosts = bad_host_names(hosts)
        con.execute(f"""
            INSERT INTO syn_find
            SELECT rn, 'xid-drain', [{BAD_HOST_XID}] FROM syn_hs
            WHERE i IN ({','.join(map(str, bad)) or 'NULL'}) AND random() < 0.6""")
        planted = int(con.execute("SELECT count(*) FROM syn_find").fetchone()[0])  # type: ignore[index]
    con.execute(f"""
        INSERT INTO syn_find
        SELECT rn, code, {xid_expr} FROM (
            SELECT CAST(floor(random() * {n_hs}) AS BIGINT) AS rn, sl.code
            FROM (SELECT CAST(floor(random() * 1000) AS INTEGER) AS slot
                  FROM range({max(0, findings - planted)})) r
            JOIN syn_slots sl USING (slot))""")
    con.execute("""
        INSERT INTO findings (session_id, step_seq, step_index, finding_no, ts, code, severity,
                              host, hosts_n, probe, message, evidence, xids)
        SELECT hs.session_id, s.idx, s.idx, c.no, s.ts + INTERVAL 20 SECOND, f.code,
               c.severity, hs.host, 1, c.probe, f.code || ' on ' || hs.host,
               CASE WHEN f.x IS NULL THEN '{}'::JSON
                    ELSE to_json({'xids': f.x, 'count': 1}) END, f.x
        FROM syn_find f
        JOIN syn_hs hs USING (rn)
        JOIN syn_codes c USING (code)
        JOIN syn_steps s ON s.session_id = hs.session_id
             AND s.idx = CASE WHEN c.probe = 'versions' THEN 0 ELSE 1 END
        ORDER BY s.ts""")
    # What correlate counts is kept beside the history, as diag's own writers keep it.
    hostincidents.refresh(con)

    counts = {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
              for t in ("incidents", "sessions", "hosts", "steps", "probe_runs", "findings",
                        "actions")}
    for temp in ("syn_fleet", "syn_codes", "syn_slots", "syn_runbook_slots", "syn_size_slots",
                 "syn_conc", "syn_inc", "syn_sess", "syn_sess_conc", "syn_hs", "syn_steps",
                 "syn_find"):
        con.execute(f"DROP TABLE IF EXISTS {temp}")
    return Synthetic(counts, PLANTED_LEAF if plant else None, PLANTED_NCCL if plant else None,
                     bad_hosts)

