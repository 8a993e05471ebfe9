"""The evidence ``diag correlate`` counts, deduplicated once per question or per whole report.

Recurrence, placement concentration and version cohorts all count the same thing: a finding
code raised by a host in an incident (a host-incident), whatever the number of walks and
steps that raised it. Deduplicating a year's million findings into those units is the
expensive part of each question (a hash aggregate over ~750,000 distinct units), and on
pooled exports each pass re-reads the Parquet files. So it is done once, into two temporary
tables on the connection, and every question reads them:

- ``c_smap``: the sessions that count (simulated ones left out unless asked), with a 64-bit
  hash of their incident (``ih``);
- ``c_fev``: one row per (code, incident, host) among the findings that count as evidence
  (not ``info``, not a code that says diag could not look), with the newest time it was seen.

``diag correlate`` builds them once for all its reports (``evidence`` around them); a report
asked alone builds and drops them itself. The tables live only as long as the outermost
``evidence`` block, so a later question on the same connection never reads stale rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime

from probes.catalog import load_catalog

from .base import Connection, counted_sessions, since_sql, sql_list

TEMPS = ("c_smap", "c_fev")
_BUILT: dict[int, tuple[datetime | None, bool]] = {}  # id(connection) -> window it holds


def not_evidence() -> tuple[str, ...]:
    """Codes that say diag could not look, not that a host is bad: never evidence."""
    return load_catalog().category("not-evidence")


@contextlib.contextmanager
def evidence(con: Connection, start: datetime | None, simulated: bool) -> Iterator[None]:
    """``c_smap`` and ``c_fev`` for findings since *start* exist inside the block.

    Reused when an enclosing block on the same connection built them for the same window;
    otherwise built here and dropped on leaving (a nested block for another window rebuilds
    them, and the next question of the outer block rebuilds its own).
    """
    key = (start, simulated)
    if _BUILT.get(id(con)) == key:
        yield
        return
    fcond, fparams = since_sql("f.ts", start)
    try:
        con.execute("SET preserve_insertion_order = false")  # temp tables: no order to keep
        con.execute(f"CREATE OR REPLACE TEMP TABLE c_smap AS SELECT id AS session_id, "
                    f"hash(incident_id) AS ih FROM {counted_sessions(simulated)}")
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE c_fev AS
            SELECT f.code, m.ih, f.host, max(f.ts) AS last_seen
            FROM findings f JOIN c_smap m USING (session_id)
            WHERE {fcond} AND f.host IS NOT NULL AND f.severity <> 'info'
                  AND f.code NOT IN ({sql_list(not_evidence())})
            GROUP BY ALL""", fparams)
        con.execute("RESET preserve_insertion_order")
        _BUILT[id(con)] = key
        yield
    finally:
        if _BUILT.get(id(con)) == key:
            del _BUILT[id(con)]
        for temp in TEMPS:
            with contextlib.suppress(Exception):
                con.execute(f"DROP TABLE IF EXISTS {temp}")
