"""The evidence ``diag correlate`` counts, deduplicated once per question or per whole report.

Recurrence, placement concentration and version cohorts all count the same thing: a finding
code raised by a host in an incident (a host-incident), whatever the number of walks and
steps that raised it. Deduplicating a year's million findings into those units is the
expensive part of each question (a hash aggregate over ~750,000 distinct units), and on
pooled exports each pass re-reads the Parquet files. So it is done once, into temporary
tables on the connection, and every question reads them:

- ``c_smap``: the sessions that count (simulated ones left out unless asked), each with its
  incident's number ``inc`` (a dense rank of the incident ids);
- ``c_hd`` and ``c_cd``: the window's hosts and finding codes numbered (``hno``, ``cno``; a
  host only a finding or a versions run names is numbered when it is met: ``number_hosts``);
- ``c_fev``: one row per (code, host-incident) among the findings that count as evidence (not
  ``info``, not a code that says diag could not look): ``cno`` and the unit ``u``;
- ``c_inv``: per host (``hno``), the incidents it took part in (what recurrence measures
  against).

The units are integers, not strings: a host-incident is ``u = inc << 24 | hno`` (``unit``),
so deduplicating, joining and grouping a year's ~800,000 of them hashes and compares one
64-bit number instead of an incident id, a host name and a code (on the bench year the
deduplication took ~0.25 s of CPU instead of ~0.4 s, and grouping the units per code and host
half as long). Numbers are exact (dictionaries, not hashes); names come back only for the few
rows a report shows.

``diag correlate`` opens one ``evidence`` block around all its reports, and each report asks
(``need``) for the tables it reads: built on first need, reused after; a report asked alone
builds and drops what it needs. The tables live only as long as the outermost
``evidence`` block, so a later question on the same connection never reads stale rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from probes.catalog import load_catalog

from .base import Connection, StoreError, counted_sessions, since_sql, sql_list

TEMPS = ("c_smap", "c_hd", "c_cd", "c_fev", "c_inv")
HOST_BITS = 24  # host numbers below 2**24 (16 M hosts); incidents below 2**39: a unit fits
HOST_MASK = (1 << HOST_BITS) - 1
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


def unit(inc: str, hno: str) -> str:
    """SQL: the host-incident of incident number *inc* and host number *hno*, one BIGINT."""
    return f"(({inc} << {HOST_BITS}) | {hno})"


def host_of(u: str) -> str:
    """SQL: the host number of unit *u*."""
    return f"({u} & {HOST_MASK})"


def need(con: Connection, *tables: str) -> None:
    """Build *tables* (of ``TEMPS``) in the current ``evidence`` block unless already built,
    with the tables they read (``c_smap``, ``c_hd``, ``c_cd``) first."""
    (start, simulated), built = _SCOPES[id(con)]
    for table in ("c_smap", "c_hd", *tables):
        if table in built:
            continue
        if table == "c_fev":
            need(con, "c_cd")
        fcond, fparams = since_sql("f.ts", start)
        hcond, hparams = since_sql("h.ts", start)
        con.execute("SET preserve_insertion_order = false")  # no order to keep
        if table == "c_smap":
            con.execute(f"CREATE OR REPLACE TEMP TABLE c_smap AS SELECT id AS session_id, "
                        f"CAST(dense_rank() OVER (ORDER BY incident_id) AS BIGINT) AS inc "
                        f"FROM {counted_sessions(simulated)}")
        elif table == "c_hd":
            # Every host of the window's host-sessions; a finding (or a versions run) on a
            # host its walk did not list is numbered after them (``number_hosts``).
            con.execute(f"CREATE OR REPLACE TEMP TABLE c_hd AS SELECT host, CAST(row_number() "
                        f"OVER () AS BIGINT) AS hno FROM (SELECT DISTINCT h.host FROM hosts h "
                        f"WHERE {hcond})", hparams)
            _check_bits(con)
        elif table == "c_cd":
            con.execute(f"CREATE OR REPLACE TEMP TABLE c_cd AS SELECT code, CAST(row_number() "
                        f"OVER () AS BIGINT) AS cno FROM (SELECT DISTINCT f.code FROM "
                        f"findings f WHERE {fcond})", fparams)
        elif table == "c_fev":
            # A finding on a host c_hd has no number for leaves u NULL: its host is numbered
            # (rare: a host its walk did not list), then the table is built again.
            fev = f"""
                CREATE OR REPLACE TEMP TABLE c_fev AS
                SELECT DISTINCT c.cno, {unit("m.inc", "d.hno")} AS u
                FROM findings f JOIN c_smap m USING (session_id) LEFT JOIN c_hd d USING (host)
                     JOIN c_cd c USING (code)
                WHERE {fcond} AND f.host IS NOT NULL AND f.severity <> 'info'
                      AND f.code NOT IN ({sql_list(not_evidence())})"""
            con.execute(fev, fparams)
            lost = con.execute("SELECT count(*) FROM c_fev WHERE u IS NULL").fetchone()
            if lost and lost[0] and number_hosts(
                    con, f"(SELECT f.host FROM findings f WHERE {fcond})", fparams):
                con.execute(fev, fparams)
        elif table == "c_inv":
            con.execute(f"CREATE OR REPLACE TEMP TABLE c_inv AS SELECT d.hno, "
                        f"count(DISTINCT m.inc) AS n FROM hosts h JOIN c_smap m "
                        f"USING (session_id) JOIN c_hd d USING (host) WHERE {hcond} "
                        f"GROUP BY d.hno", hparams)
        else:
            raise ValueError(f"no shared table {table}")
        con.execute("RESET preserve_insertion_order")
        built.add(table)


def _check_bits(con: Connection) -> None:
    """The numbers fit their bits (a unit is one BIGINT): said plainly if a history is ever
    that large, rather than miscounted."""
    row = con.execute("SELECT (SELECT max(hno) FROM c_hd), (SELECT max(inc) FROM c_smap)"
                      ).fetchone()
    if row and ((row[0] or 0) > HOST_MASK or (row[1] or 0) >= 1 << (63 - HOST_BITS)):
        raise StoreError(f"history too large to correlate: {row[0]} hosts, {row[1]} incidents "
                         f"(at most {HOST_MASK} hosts); narrow it with --since")


def number_hosts(con: Connection, table: str, params: Sequence[Any] = ()) -> int:
    """Give the hosts of *table* (a ``host`` column) missing from ``c_hd`` numbers after the
    others', and say how many there were: a finding or a versions run on a host its walk
    did not list still counts."""
    row = con.execute(f"SELECT count(*) FROM (SELECT DISTINCT host FROM {table} "
                      f"WHERE host IS NOT NULL AND host NOT IN (SELECT host FROM c_hd))",
                      list(params)).fetchone()
    if not row or not row[0]:
        return 0
    con.execute(f"INSERT INTO c_hd SELECT host, (SELECT coalesce(max(hno), 0) FROM c_hd) "
                f"+ row_number() OVER () FROM (SELECT DISTINCT host FROM {table} "
                f"WHERE host IS NOT NULL AND host NOT IN (SELECT host FROM c_hd))", list(params))
    _check_bits(con)
    return int(row[0])
