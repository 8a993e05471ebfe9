"""Host-incidents kept as data: what ``diag correlate`` counts, maintained by every writer.

Correlation counts **host-incidents** (a host that took part in an incident, however many walks
of the incident probed it) and the finding codes each raised. Deriving them at question time
meant de-duplicating a year's ~810,000 findings into ~780,000 units and joining them to
~500,000 host-sessions for placement and versions: 0.6-0.7 s of wall time per report on the
bench year, on this 2-core machine, most of it those two hash operations. Nothing about an
incident's units changes once its walks are written, so they are now written with the walks:

- ``host_incidents``: one row per (incident, host) of the real (not simulated) sessions: the
  host's placement as of its latest walk of the incident (``hosts``), its driver / NCCL /
  kernel as of its latest versions run (the session's last versions step, as before), whether
  a walk listed it, and ``ts``, its latest time in the incident (any of those rows, or an
  evidence finding);
- ``host_incident_codes``: one row per (incident, host, code) of the evidence findings (not
  ``info``), with its latest ``ts`` and its host-incident's placement and versions copied beside
  it, so "how many host-incidents of leaf-02 raised this code" is one GROUP BY, not a join.

A unit's ``ts`` is never later than its host-incident's, so a ``--since`` window that counts a
unit always counts its host-incident too (a group can never have more affected host-incidents
than host-incidents).

One definition, rebuilt rather than patched: every writer that adds or moves an incident's
rows (a walk starting, a step written, ``incident merge``, ``diag import``, the bench's
generator, the schema migration) calls ``refresh`` for the incidents it touched, in its own
transaction, and their rows are computed again from the history by the SQL below. Readers
that cannot use the kept rows — pooled exports, which carry the history only, and
``--include-simulated`` — ``derive`` the same rows into temporary tables with the same SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from .base import Connection, counted_sessions, insert_rows, window

HINC, CODES = "host_incidents", "host_incident_codes"
PLACE = ("leaf", "rack", "rail")
STACK = ("driver_version", "nccl_version", "kernel")
REAL = counted_sessions()  # the real walks: what the rows are kept for

# What both tables carry after their key: the host-incident's latest time, whether a walk
# listed the host, and its placement and versions.
_FACTS = """
        ts             TIMESTAMP NOT NULL,
        listed         BOOLEAN NOT NULL,
        leaf           VARCHAR,
        rack           VARCHAR,
        rail           VARCHAR,
        driver_version VARCHAR,
        nccl_version   VARCHAR,
        kernel         VARCHAR)"""
CREATE_HINC = f"""CREATE TABLE {HINC} (
        incident_id    VARCHAR NOT NULL,
        host           VARCHAR NOT NULL,{_FACTS}"""
CREATE_CODES = f"""CREATE TABLE {CODES} (
        incident_id    VARCHAR NOT NULL,
        host           VARCHAR NOT NULL,
        code           VARCHAR NOT NULL,{_FACTS}"""


UNITS = "c_units"  # the evidence findings grouped into units, while the rows are made


def statements(sessions: str, hinc: str, codes: str, *, create: bool,
               floor: datetime | None = None) -> list[str]:
    """SQL that makes the rows of *sessions* (a table expression with ``id`` and
    ``incident_id``) into *hinc* and *codes*: new temporary tables (*create*) or the kept
    ones (inserted into). *floor*: no row of these sessions is older (zone maps then skip a
    long history's old row groups).

    The findings are grouped into units once, and a host-incident's latest evidence time is
    taken from the units, not from the findings a second time.
    """
    rows, runs, finds = (window(f"{alias}.ts", floor) for alias in "hpf")
    paths = ", ".join(f"'$.{d}'" for d in STACK)
    dims = ", ".join(f"h.{d}" for d in (*PLACE, *STACK))

    def into(table: str) -> str:
        return (f"CREATE OR REPLACE TEMP TABLE {table} AS" if create
                else f"INSERT INTO {table} BY NAME")
    # arg_max over (ts, session_id): of two rows at the same time, always the same one; the
    # values are wrapped in a struct because arg_max skips a NULL argument (an unplaced host
    # would otherwise take an older walk's placement).
    return [
        f"""CREATE OR REPLACE TEMP TABLE {UNITS} AS
            SELECT s.incident_id, f.host, f.code, max(f.ts) AS ts
            FROM findings f JOIN {sessions} s ON s.id = f.session_id
            WHERE f.host IS NOT NULL AND f.severity <> 'info' AND {finds} GROUP BY ALL""",
        f"""{into(hinc)}
        WITH s AS (SELECT id AS session_id, incident_id FROM {sessions}),
        placed AS (
            SELECT s.incident_id, h.host, max(h.ts) AS ts,
                   arg_max(struct_pack(leaf := h.leaf, rack := h.rack, rail := h.rail),
                           (h.ts, h.session_id)) AS p
            FROM hosts h JOIN s USING (session_id) WHERE {rows} GROUP BY ALL),
        runs AS (
            SELECT s.incident_id, p.session_id, p.host, p.ts, p.step_seq, p.state,
                   CAST(p.facts AS VARCHAR) AS fx
            FROM probe_runs p JOIN s USING (session_id) WHERE p.probe = 'versions' AND {runs}),
        -- a walk may run the versions probe twice: its last versions step is its stack
        ok AS (
            SELECT r.* FROM runs r SEMI JOIN (SELECT session_id, max(step_seq) AS step_seq
                                              FROM runs GROUP BY session_id) last
                ON last.session_id = r.session_id AND last.step_seq = r.step_seq
            WHERE r.state = 'ok'),
        -- a fleet runs a few dozen stacks: each distinct facts text is parsed once
        stx AS (SELECT fx, json_extract_string(fx, [{paths}]) AS v
                FROM (SELECT DISTINCT fx FROM ok)),
        stacked AS (
            SELECT incident_id, host, max(ts) AS ts,
                   arg_max(struct_pack(v := v), (ts, session_id)).v AS v
            FROM ok LEFT JOIN stx USING (fx) GROUP BY ALL),
        seen AS (SELECT incident_id, host, max(ts) AS ts FROM {UNITS} GROUP BY ALL)
        SELECT incident_id, host, greatest(placed.ts, stacked.ts, seen.ts) AS ts,
               placed.host IS NOT NULL AS listed, p.leaf, p.rack, p.rail,
               v[1] AS driver_version, v[2] AS nccl_version, v[3] AS kernel
        FROM placed FULL JOIN stacked USING (incident_id, host)
             LEFT JOIN seen USING (incident_id, host)""",
        # a host no walk listed and no versions run saw has no placement and no versions
        f"""{into(codes)}
        SELECT u.incident_id, u.host, u.code, u.ts, coalesce(h.listed, false) AS listed, {dims}
        FROM {UNITS} u LEFT JOIN {hinc} h USING (incident_id, host)""",
        f"DROP TABLE {UNITS}",
    ]


def refresh(con: Connection, incidents: Iterable[str] | None = None) -> None:
    """Compute the kept rows of *incidents* (None: every incident) again from the history,
    inside the caller's transaction."""
    if incidents is None:
        con.execute(f"DELETE FROM {CODES}")
        con.execute(f"DELETE FROM {HINC}")
        for statement in statements(REAL, HINC, CODES, create=False):
            con.execute(statement)
        return
    ids = sorted(set(incidents))
    if not ids:
        return
    con.execute("CREATE OR REPLACE TEMP TABLE c_refresh (incident_id VARCHAR)")
    try:
        insert_rows(con, "c_refresh", [("incident_id", "VARCHAR")], [[i] for i in ids])
        mine = (f"(SELECT * FROM {REAL} s "
                "WHERE incident_id IN (SELECT incident_id FROM c_refresh))")
        for table in (CODES, HINC):
            con.execute(f"DELETE FROM {table} WHERE incident_id IN "
                        "(SELECT incident_id FROM c_refresh)")
        # No row of these sessions is older than their start or their earliest step (hosts
        # carry the start's time, probe runs and findings their step's end; a journal
        # imported days later starts its session then, with its steps' own earlier times),
        # so a year's store is not scanned for one incident's step. A day's margin for a
        # clock stepped back.
        row = con.execute(
            f"SELECT least((SELECT min(started) FROM {mine}), (SELECT min(ended) FROM steps "
            f"WHERE session_id IN (SELECT id FROM {mine})))").fetchone()
        if not row or row[0] is None:
            return
        for statement in statements(mine, HINC, CODES, create=False,
                                    floor=row[0] - timedelta(days=1)):
            con.execute(statement)
    finally:
        con.execute("DROP TABLE IF EXISTS c_refresh")
        con.execute(f"DROP TABLE IF EXISTS {UNITS}")


def refresh_session(con: Connection, session_id: str) -> None:
    """``refresh`` the incident of *session_id*."""
    row = con.execute("SELECT incident_id FROM sessions WHERE id = ?", [session_id]).fetchone()
    if row:
        refresh(con, [row[0]])


def kept(con: Connection) -> bool:
    """Does this connection's database keep the rows: a store at schema 9 or later (tables),
    or a pool of exports whose rows can be read as they are (views: ``pool``)?"""
    row = con.execute(
        "SELECT count(*) FROM (SELECT table_name AS name FROM duckdb_tables() "
        "WHERE NOT temporary AND schema_name = 'main' UNION ALL SELECT view_name "
        "FROM duckdb_views() WHERE NOT temporary AND schema_name = 'main') "
        "WHERE name IN (?, ?)", [HINC, CODES]).fetchone()
    return bool(row and row[0] == 2)


def uncovered(con: Connection) -> str | None:
    """In a pool whose exports do not hold every incident's rows whole (``pool``), the real
    sessions of the incidents that must be derived, as a table expression; else None."""
    row = con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'pool_uncovered'"
                      ).fetchone()
    if not row or not row[0]:
        return None
    row = con.execute("SELECT count(*) FROM (SELECT id FROM pool_uncovered LIMIT 1)").fetchone()
    if not row or not row[0]:
        return None
    return f"(SELECT * FROM {REAL} s WHERE id IN (SELECT id FROM pool_uncovered))"


def derive(con: Connection, sessions: str, hinc: str, codes: str) -> None:
    """The same rows for *sessions*, into temporary tables *hinc* and *codes*."""
    try:
        for statement in statements(sessions, hinc, codes, create=True):
            con.execute(statement)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {UNITS}")
