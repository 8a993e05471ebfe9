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
  (not ``info``, not a code that says diag could not look), with the newest time it was seen;
- ``c_inv``: per host, the incidents it took part in (what recurrence measures against).

``diag correlate`` opens one ``evidence`` block around all its reports, and each report asks
(``need``) for the tables it reads: built on first need, reused after; a report asked alone
builds and drops what it needs. The tables live only as long as the outermost
``evidence`` block, so a later question on the same connection never reads stale rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime

from probes.catalog import load_catalog

from .base import Connection, counted_sessions, since_sql, sql_list

TEMPS = ("c_smap", "c_fev", "c_inv")
_SCOPES: dict[int, tuple[tuple[datetime | None, bool], set[str]]] = {}  # id(con) -> scope


def not_evidence() -> tuple[str, ...]:
    """Codes that say diag could not look, not that a host is bad: never evidence."""
    return load_catalog().category("not-evidence")


@contextlib.contextmanager
def evidence(con: Connection, start: datetime | None, simulated: bool) -> Iterator[None]:
    """Inside the block, ``need`` builds the shared tables for findings since *start*.

    An enclosing block on the same connection for the same window is reused, with what it
    has built; otherwise the tables built inside are dropped on leaving (a nested block for
    another window starts afresh, and the outer block's next question rebuilds its own).
    """
    key = (start, simulated)
    scope = _SCOPES.get(id(con))
    if scope is not None and scope[0] == key:
        yield
        return
    _SCOPES[id(con)] = (key, set())
    try:
        yield
    finally:
        if scope is None:
            del _SCOPES[id(con)]
        else:
            _SCOPES[id(con)] = (scope[0], set())  # the outer block rebuilds what it needs
        for temp in TEMPS:
            with contextlib.suppress(Exception):
                con.execute(f"DROP TABLE IF EXISTS {temp}")


def need(con: Connection, *tables: str) -> None:
    """Build *tables* (of ``TEMPS``) in the current ``evidence`` block unless already built:
    ``c_fev`` needs ``c_smap``; ``c_inv`` is the host-incidents each host took part in."""
    (start, simulated), built = _SCOPES[id(con)]
    for table in ("c_smap", *tables):
        if table in built:
            continue
        if table == "c_smap":
            con.execute(f"CREATE OR REPLACE TEMP TABLE c_smap AS SELECT id AS session_id, "
                        f"hash(incident_id) AS ih FROM {counted_sessions(simulated)}")
        elif table == "c_fev":
            fcond, fparams = since_sql("f.ts", start)
            con.execute("SET preserve_insertion_order = false")  # no order to keep
            con.execute(f"""
                CREATE OR REPLACE TEMP TABLE c_fev AS
                SELECT f.code, m.ih, f.host, max(f.ts) AS last_seen
                FROM findings f JOIN c_smap m USING (session_id)
                WHERE {fcond} AND f.host IS NOT NULL AND f.severity <> 'info'
                      AND f.code NOT IN ({sql_list(not_evidence())})
                GROUP BY ALL""", fparams)
            con.execute("RESET preserve_insertion_order")
        elif table == "c_inv":
            hcond, hparams = since_sql("h.ts", start)
            con.execute(f"CREATE OR REPLACE TEMP TABLE c_inv AS SELECT h.host, "
                        f"count(DISTINCT m.ih) AS n FROM hosts h JOIN c_smap m "
                        f"USING (session_id) WHERE {hcond} GROUP BY h.host", hparams)
        else:
            raise ValueError(f"no shared table {table}")
        built.add(table)
