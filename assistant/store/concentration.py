"""The concentration test behind ``diag correlate``'s placement and version reports.

Is a finding code concentrated in a group — one leaf switch, rack, rail, driver, NCCL
version? The unit is the **host-incident**: a host that took part in an incident, however many
walks of that incident probed it (three ``low-bandwidth`` runs over the same 48 hosts are one
look at them, not three). A group holds *e* of the window's *E* host-incidents; the code was
raised in *N* host-incidents, *n* of them in the group. If the group had nothing to do with
the code, those *N* would be a random draw of the *E*, and *n* would be **hypergeometric**:
the p-value is its exact upper tail — right for 4 hosts of 48 as for 2,000 of 500,000, where
the Poisson tail used before was not.

A group is a **pattern** (significant) when its share of the code's host-incidents is at least
``min_lift`` times its share of the fleet's, it holds at least ``min_count`` of them, and the
tail is below ``alpha`` after a Bonferroni correction over every group tested; and it is
judged on **distinct hosts**: at least ``MIN_HOSTS`` of them affected, and still significant
with its busiest host left out (a node that keeps failing is a recurring host, not a pattern).
Nested groups are explained away: when a leaf is a pattern its racks are tested again without
the leaf's hosts (likewise an NCCL version and the version tuples containing it).

The groups that fall short but are at ``min_lift`` or more, on two hosts or more, with a p
below ``LEAD_P`` before the correction are **leads**: shown with their figures and why they
are not significant — "leaf-02: 4 of 4 affected hosts, 16 of 48 hosts of the fleet, p=0.0094,
not significant after correction" — instead of a bare "none significant".

The units come from ``evidence`` (the store's kept host-incidents); the caller says which
dimensions to test and which codes are left out; this module only counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from .base import Connection, fetch_rows, insert_rows, sql_list
from .evidence import evidence, not_evidence, sources, window
from .stats import hypergeom_log_sf, p_from_log
from .stats import lift as lift_of

MIN_HOSTS = 3  # distinct affected hosts a pattern needs: one or two are recurrence
# A lead is a group whose own p (before the correction for the number of groups tested) is
# below the conventional 5% level: worth a look, said plainly to be not significant.
LEAD_P = 0.05
LEAD_POOL = 200  # groups ranked cheaply in SQL before exact tails are computed for leads
_TEMPS = ("c_hosts", "c_dims", "c_cexp", "c_cand", "c_hev", "c_rsub", "c_cells")


def concentrated_codes(con: Connection, dims: Sequence[str],
                       tuple_dim: tuple[str, Sequence[str]] | None,
                       start: datetime | None, excluded: Sequence[str], min_count: int,
                       min_lift: float, alpha: float, simulated: bool = False,
                       leads: int = 5) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(patterns, leads) of codes concentrated in one value of one of *dims*.

    The units are ``evidence``'s host-incidents and their codes, each carrying its *dims*.
    The cells (dimension, code, value) are counted in one pass over the units; ``combo`` is
    the SQL hash of a combination of *dims* (``hash(leaf, rack, rail)``, computed as it is
    read: 64 random bits per row do not compress), by which the few thousand combinations are
    spelled out once (``c_dims``), each host's share of them counted, and a code's units
    grouped for the nested-group check (``c_combo``). The evidence is every code but the
    *excluded* ones and those that are not evidence; *simulated* counts simulated walks too.
    """
    all_dims = list(dims)
    combo = f"hash({', '.join(dims)})"
    tuple_sql = ""
    if tuple_dim is not None:
        name, parts = tuple_dim
        all_dims.append(name)
        tuple_sql = (f", CASE WHEN {' AND '.join(f'{p} IS NOT NULL' for p in parts)} "
                     f"THEN concat_ws(' / ', {', '.join(parts)}) END AS {name}")
    cols = ", ".join(all_dims)
    known = " OR ".join(f"{d} IS NOT NULL" for d in dims)
    skip = sql_list([*excluded, *not_evidence()])
    with evidence(con, simulated):
        hinc, codes = sources(con)
        con.execute("SET preserve_insertion_order = false")  # temp tables: no order to keep
        try:
            # The combinations, each with its dimensions and its host-incidents (e), in one
            # pass over the host-incidents: a hash names one combination, so any row of it
            # gives its values.
            # (And, in the same pass, each host's host-incidents per combination: the
            # per-host detail of the groups shown reads them.)
            con.execute(f"CREATE OR REPLACE TEMP TABLE c_hosts AS SELECT {combo} AS c, host, "
                        + ", ".join(f"any_value({d}) AS {d}" for d in dims)
                        + f", count(*) AS e FROM {hinc} WHERE {window('ts', start)} "
                        f"GROUP BY GROUPING SETS ((c), (c, host))")
            con.execute(f"CREATE OR REPLACE TEMP TABLE c_dims AS SELECT c, {', '.join(dims)}"
                        f"{tuple_sql}, e FROM c_hosts WHERE host IS NULL AND ({known})")
            con.execute(f"CREATE OR REPLACE TEMP TABLE c_cexp AS SELECT {cols}, e FROM c_dims")
            # Every (dimension, code, value) cell in one pass over the units (GROUPING SETS;
            # a tuple is grouped on its parts, and spelled out on the few groups), rather
            # than through every (code, combination) pair: ~40% less time for placement,
            # whose ~2,500 combinations make ~90,000 such pairs over a year.
            con.execute(f"CREATE OR REPLACE TEMP TABLE c_cells AS "
                        f"{_cells_sql(codes, dims, tuple_dim, window('ts', start), skip)}")
            # The units per (code, combination), asked only for the codes the nested-group
            # check needs (a view: the code's filter reaches the scan).
            con.execute(f"CREATE OR REPLACE TEMP VIEW c_combo AS SELECT code, "
                        f"{', '.join(dims)}{tuple_sql}, n FROM (SELECT code, "
                        f"{', '.join(dims)}, count(*) AS n FROM {codes} "
                        f"WHERE {window('ts', start)} AND ({known}) GROUP BY ALL)")
            return _judge(con, all_dims, min_count, min_lift, alpha, leads,
                          lambda rows: _host_stats(con, rows, all_dims, hinc, codes, combo,
                                                   start))
        finally:
            con.execute("DROP VIEW IF EXISTS c_combo")
            for temp in _TEMPS:
                con.execute(f"DROP TABLE IF EXISTS {temp}")
            con.execute("RESET preserve_insertion_order")


def _cells_sql(codes: str, dims: Sequence[str], tuple_dim: tuple[str, Sequence[str]] | None,
               window_sql: str, skip: str) -> str:
    """Every (dimension, code, value): n of the code's n_total host-incidents in the group,
    e of the e_total host-incidents of the fleet (where the dimension is known; exposures
    from ``c_dims``)."""
    sets = [(d,) for d in dims] + ([tuple(tuple_dim[1])] if tuple_dim else [])
    names = [*dims, *([tuple_dim[0]] if tuple_dim else [])]

    def grouped(cols: Sequence[str]) -> str:
        return " AND ".join(f"GROUPING({d}) = {0 if d in cols else 1}" for d in dims)
    label = " ".join(f"WHEN {grouped(cols)} THEN '{name}'" for cols, name in zip(sets, names,
                                                                                 strict=True))
    value = " ".join(
        f"WHEN {grouped(cols)} THEN "
        + (f"CAST({cols[0]} AS VARCHAR)" if len(cols) == 1 else
           f"CASE WHEN {' AND '.join(f'{c} IS NOT NULL' for c in cols)} "
           f"THEN concat_ws(' / ', {', '.join(cols)}) END")
        for cols, name in zip(sets, names, strict=True))
    known = " OR ".join(f"{d} IS NOT NULL" for d in dims)
    exposure = " UNION ALL ".join(
        f"SELECT '{d}' AS dim, CAST({d} AS VARCHAR) AS value, sum(e) AS e FROM c_dims "
        f"WHERE {d} IS NOT NULL GROUP BY ALL" for d in names)
    return f"""
        WITH g AS MATERIALIZED (
            SELECT * FROM (
                SELECT any_value(code) AS code, CASE {label} END AS dim,
                       CASE {value} END AS value, count(*) AS n
                FROM {codes} WHERE {window_sql} AND ({known})
                GROUP BY GROUPING SETS ({", ".join(f"(hash(code), {', '.join(c)})"
                                                    for c in sets)}))
            WHERE value IS NOT NULL AND code NOT IN ({skip})),
        t AS (SELECT dim, code, sum(n) AS n_total FROM g GROUP BY ALL),
        x AS MATERIALIZED ({exposure}),
        xt AS (SELECT dim, sum(e) AS e_total FROM x GROUP BY dim)
        SELECT g.dim, g.code, g.value, g.n, t.n_total, x.e, xt.e_total
        FROM g JOIN t USING (dim, code) JOIN x USING (dim, value) JOIN xt USING (dim)"""


def _log_pmf_sql() -> str:
    """ln of the hypergeometric pmf at n (population e_total, e in the group, n_total drawn),
    in SQL: a lower bound of the tail that picks the few groups worth an exact one."""
    def lnc(a: str, b: str) -> str:
        return f"(lgamma({a} + 1) - lgamma({b} + 1) - lgamma({a} - {b} + 1))"
    return (f"{lnc('e', 'n')} + {lnc('e_total - e', 'n_total - n')} "
            f"- {lnc('e_total', 'n_total')}")


def _tail(n: float, n_total: float, e: float, e_total: float) -> float:
    """ln P(at least n of the n_total in a group holding e of the e_total units)."""
    return hypergeom_log_sf(int(n), int(e_total), int(e), int(n_total)) if e_total else 0.0


def _judge(con: Connection, dims: Sequence[str], min_count: int, min_lift: float,
           alpha: float, leads: int, host_stats: Callable[[list[dict[str, Any]]], None]
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    # Counted once, then ranked: the cells are both the number of tests and the candidates.
    cells = "SELECT * FROM c_cells"  # made by the caller
    row = con.execute(f"SELECT count(*) FROM ({cells})").fetchone()
    tests = max(1, int(row[0]) if row else 0)
    threshold = math.log(alpha / tests)
    big = f"n * e_total >= {float(min_lift)} * e * n_total"
    # Every group that could be a pattern (its pmf is already below the threshold), and the
    # most promising few for leads.
    rows = fetch_rows(con, f"""
        SELECT * EXCLUDE (rk) FROM (
            SELECT *, row_number() OVER (ORDER BY bound, code, dim, value) AS rk FROM (
                SELECT *, {_log_pmf_sql()} AS bound FROM ({cells}) WHERE {big} AND n >= 2))
        WHERE rk <= {LEAD_POOL if leads else 0} OR (n >= {int(min_count)}
                                                    AND bound < {threshold})""")
    for r in rows:
        r["log_p"] = _tail(r["n"], r["n_total"], r["e"], r["e_total"])
    candidates = [r for r in rows if r["n"] >= min_count and r["log_p"] < threshold]
    pool = sorted((r for r in rows if r["log_p"] < math.log(LEAD_P)),
                  key=lambda r: (r["log_p"], -r["n"]))[:max(0, leads) * 4]
    chosen = {id(r): r for r in [*candidates, *pool]}
    host_stats(list(chosen.values()))

    survivors: dict[str, list[dict[str, Any]]] = {}
    for r in chosen.values():
        # One host is not a pattern: the group must still stand with its busiest host out.
        n1, nt1 = r["n"] - r["top_n"], r["n_total"] - r["top_n"]
        e1, et1 = r["e"] - r["top_e"], r["e_total"] - r["top_e"]
        r["alone"] = r["hosts"] >= MIN_HOSTS and n1 >= min_count and e1 > 0 \
            and lift_of(n1, nt1, e1, et1) >= min_lift and _tail(n1, nt1, e1, et1) < threshold
    for r in candidates:
        if r["alone"]:
            survivors.setdefault(r["code"], []).append(r)
    accepted = _explain_nested(con, dims, survivors, threshold, min_count, min_lift)

    nesting = _nesting(con, dims, [*accepted, *pool])
    shown: list[dict[str, Any]] = []
    for r in pool:
        if len(shown) >= leads or any(r is a for a in accepted) or r["hosts"] < 2:
            continue
        mine = (r["dim"], r["value"])
        if any(o["code"] == r["code"] and _related(nesting, mine, (o["dim"], o["value"]))
               for o in [*accepted, *shown]):
            continue  # inside (or around) a stronger pattern or lead of the same code
        shown.append(r)
    return ([_out(r, tests, threshold, min_count, min_lift, True) for r in
             sorted(accepted, key=lambda r: (-lift_of(r["n"], r["n_total"], r["e"],
                                                      r["e_total"]), r["code"]))],
            [_out(r, tests, threshold, min_count, min_lift, False) for r in shown])


def _explain_nested(con: Connection, dims: Sequence[str],
                    survivors: dict[str, list[dict[str, Any]]], threshold: float,
                    min_count: int, min_lift: float) -> list[dict[str, Any]]:
    """Accept each code's candidates strongest first, testing each again without the hosts of
    the groups already accepted: the leaf, not the leaf and each of its racks."""
    accepted: list[dict[str, Any]] = []
    exposure: list[tuple[Any, ...]] | None = None
    cols = ", ".join(dims)
    for code, candidates in sorted(survivors.items()):
        candidates.sort(key=lambda r: (r["log_p"], -r["n"]))
        if len(candidates) == 1:
            accepted.append(candidates[0])
            continue
        if exposure is None:
            exposure = con.execute(f"SELECT {cols}, e FROM c_cexp").fetchall()
        events = con.execute(f"SELECT {cols}, n FROM c_combo WHERE code = ?",
                             [code]).fetchall()
        # The combinations still free (outside every group accepted so far) are filtered
        # again only when a group is accepted, not once per candidate and sum: a year's
        # placement has ~2,500 combinations and dozens of candidates.
        free_events, free_exposure = events, exposure
        for row in candidates:
            col = list(dims).index(row["dim"])
            value = row["value"]
            n = nt = e = et = 0
            for u in free_events:
                if u[col] is not None:
                    nt += u[-1]
                    if str(u[col]) == value:
                        n += u[-1]
            for u in free_exposure:
                if u[col] is not None:
                    et += u[-1]
                    if str(u[col]) == value:
                        e += u[-1]
            if n >= min_count and e > 0 and lift_of(n, nt, e, et) >= min_lift \
                    and _tail(n, nt, e, et) < threshold:
                accepted.append(row)
                free_events = [u for u in free_events
                               if u[col] is None or str(u[col]) != value]
                free_exposure = [u for u in free_exposure
                                 if u[col] is None or str(u[col]) != value]
    return accepted


def _host_stats(con: Connection, rows: list[dict[str, Any]], dims: Sequence[str],
                hinc: str, codes: str, combo: str, start: datetime | None) -> None:
    """For the few chosen groups only: distinct hosts affected (of the code's, where the
    dimension is known), hosts in the group (of the fleet's), the busiest host, its
    host-incidents with the code and in all — the per-host detail is the expensive part, so
    it is computed over the chosen codes and groups alone."""
    for row in rows:
        row.update(hosts=0, hosts_total=0, fleet_hosts=0, fleet_hosts_total=0, top_host=None,
                   top_n=0, top_e=0)
    if not rows:
        return
    con.execute("CREATE OR REPLACE TEMP TABLE c_cand (code VARCHAR, dim VARCHAR, "
                "value VARCHAR)")
    insert_rows(con, "c_cand", [("code", "VARCHAR"), ("dim", "VARCHAR"), ("value", "VARCHAR")],
                [[r["code"], r["dim"], r["value"]] for r in rows])
    codes_in = sql_list(sorted({r["code"] for r in rows}))
    used = [d for d in dims if any(r["dim"] == d for r in rows)]
    w = window("ts", start)
    # Per host and combination: the chosen codes' units (n) and the fleet's host-incidents
    # (e), with the combination's dimensions spelled out from c_dims (a unit whose
    # combination has none known keeps its host: it still counts the host as affected).
    # A few tens of thousands of rows, so the per-host statistics below stay small.
    con.execute(f"CREATE OR REPLACE TEMP TABLE c_hev AS SELECT x.code, x.host, x.n, "
                f"d.* EXCLUDE (c, e) FROM (SELECT code, host, {combo} AS c, count(*) AS n "
                f"FROM {codes} WHERE {w} AND code IN ({codes_in}) GROUP BY ALL) x "
                f"LEFT JOIN c_dims d USING (c)")
    con.execute("CREATE OR REPLACE TEMP TABLE c_rsub AS SELECT x.host, x.e, d.* EXCLUDE (c, e) "
                "FROM c_hosts x JOIN c_dims d USING (c) WHERE x.host IS NOT NULL")
    stats = " UNION ALL ".join(f"""
        (WITH ev AS (SELECT code, CAST({d} AS VARCHAR) AS value, host, sum(n) AS n
                     FROM c_hev WHERE {d} IS NOT NULL GROUP BY ALL),
              -- the busiest host; of two as busy, the first by name (arg_max alone
              -- picked either, so the same history could name another host)
              per AS (SELECT code, value, count(*) AS hosts,
                             arg_min(host, (-n, host)) AS top_host, max(n) AS top_n
                      FROM ev GROUP BY ALL),
              fleet AS (SELECT CAST({d} AS VARCHAR) AS value, count(DISTINCT host) AS hosts
                        FROM c_rsub WHERE {d} IS NOT NULL GROUP BY ALL),
              known AS (SELECT DISTINCT host FROM c_rsub WHERE {d} IS NOT NULL)
         SELECT c.code, c.dim, c.value, per.hosts, per.top_host, per.top_n, fleet.hosts,
                (SELECT sum(r.e) FROM c_rsub r WHERE r.host = per.top_host
                 AND CAST(r.{d} AS VARCHAR) = c.value) AS top_e,
                (SELECT count(DISTINCT e.host) FROM c_hev e SEMI JOIN known USING (host)
                 WHERE e.code = c.code) AS hosts_total,
                (SELECT count(*) FROM known) AS fleet_total
         FROM c_cand c JOIN per ON per.code = c.code AND per.value = c.value
         JOIN fleet ON fleet.value = c.value WHERE c.dim = '{d}')""" for d in used)
    found = {(r[0], r[1], r[2]): r[3:] for r in con.execute(stats).fetchall()}
    for row in rows:
        hit = found.get((row["code"], row["dim"], row["value"]))
        if hit:
            hosts, top_host, top_n, fleet_hosts, top_e, hosts_total, fleet_total = hit
            row.update(hosts=int(hosts), top_host=top_host, top_n=int(top_n),
                       fleet_hosts=int(fleet_hosts), top_e=int(top_e),
                       hosts_total=int(hosts_total), fleet_hosts_total=int(fleet_total))


def _nesting(con: Connection, dims: Sequence[str],
             rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], set[Any]]:
    """For each group of *rows*: the combinations it covers, to tell nested groups (a rack
    of a leaf, a version tuple of an NCCL version) apart."""
    out: dict[tuple[str, str], set[Any]] = {(r["dim"], r["value"]): set() for r in rows}
    if not out:
        return out
    for row in con.execute(f"SELECT c, {', '.join(dims)} FROM c_dims").fetchall():
        for i, dim in enumerate(dims):
            key = (dim, str(row[1 + i]))
            if key in out:
                out[key].add(row[0])
    return out


def _related(nesting: dict[tuple[str, str], set[Any]], a: tuple[str, str],
             b: tuple[str, str]) -> bool:
    """Is one group inside the other (all its combinations are the other's)?"""
    sa, sb = nesting.get(a, set()), nesting.get(b, set())
    return bool(sa) and bool(sb) and (sa <= sb or sb <= sa)


def _out(r: dict[str, Any], tests: int, threshold: float, min_count: int, min_lift: float,
         significant: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "code": r["code"], "dimension": r["dim"], "value": r["value"],
        "findings": int(r["n"]), "findings_total": int(r["n_total"]),
        "share": round(r["n"] / r["n_total"], 4),
        "fleet_share": round(r["e"] / r["e_total"], 4),
        "lift": round(lift_of(r["n"], r["n_total"], r["e"], r["e_total"]), 2),
        "hosts": int(r["hosts"]), "hosts_total": int(r["hosts_total"]),
        "fleet_hosts": int(r["fleet_hosts"]),
        "fleet_hosts_total": int(r["fleet_hosts_total"]),
        "expected": round(r["n_total"] * r["e"] / r["e_total"], 1),
        "p_value": p_from_log(r["log_p"]), "tests": tests,
        "p_needed": float(f"{math.exp(threshold):.3g}"), "significant": significant}
    if not significant:
        why = []
        if r["log_p"] >= threshold:
            why.append("not significant after correction")
        if r["n"] < min_count:
            why.append(f"fewer than {min_count} host-incidents")
        if r["hosts"] < MIN_HOSTS:
            why.append(f"fewer than {MIN_HOSTS} affected hosts")
        if r["top_host"] and (2 * r["top_n"] > r["n"] or (not why and not r["alone"])):
            why.append(f"not without its busiest host, {r['top_host']} ({r['top_n']} of "
                       f"{r['n']})")
        if not why:
            why.append("explained by a stronger group")
        out["why"] = why
    return out
