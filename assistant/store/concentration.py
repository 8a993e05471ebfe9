"""The concentration test behind ``diag correlate``'s placement and version reports.

A finding code is concentrated in a group (one leaf switch, rack, rail, driver, NCCL version,
...) when its share of the code's host-sessions is at least ``min_lift`` times the group's
share of all host-sessions, and a Poisson tail, Bonferroni-corrected over every group tested,
says chance does not explain it. Two guards keep the report honest:

- *one host is not a pattern*: a group must still stand with its busiest host left out;
- *nested groups are explained away*: when a leaf switch is flagged, its racks are tested again
  without the leaf's hosts (likewise an NCCL version and the version tuples containing it), so
  the report names the leaf, not the leaf and each of its racks.

The caller says what the units are and which findings count; this module only counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .base import Connection, fetch_rows, insert_rows, since_sql
from .stats import lift as lift_of
from .stats import p_from_log, poisson_log_sf, safe_log


def concentrated_codes(con: Connection, units_sql: str, params: list[Any],
                       dims: Sequence[str], tuple_dim: tuple[str, Sequence[str]] | None,
                       start: datetime | None, evidence_sql: str, min_count: int,
                       min_lift: float, alpha: float) -> list[dict[str, Any]]:
    """Codes whose share in one group (a value of one of *dims*) is >= min_lift times the
    group's share of the exposure; *units_sql* yields one row per host-session with
    ``k = hash(session_id, host)``, ``host`` and the dims; *evidence_sql* is the condition on
    the findings ``f`` that may count (the caller's choice of codes).

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
    fcond, fparams = since_sql("f.ts", start)
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
              WHERE {fcond} AND f.host IS NOT NULL AND {evidence_sql}) e
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
    rows = fetch_rows(con, f"""
        SELECT * FROM (SELECT *, count(*) OVER () AS tests FROM ({cells}))
        WHERE n >= ? AND n * e_total >= ? * e * n_total""", [min_count, min_lift])
    threshold = safe_log(alpha / max(1, rows[0]["tests"])) if rows else 0.0
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
            "p_value": p_from_log(r["log_p"])} for r in accepted]
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
