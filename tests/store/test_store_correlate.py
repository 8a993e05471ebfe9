"""Correlation on a generated year of history with known patterns planted in it: it must name
exactly the planted leaf switch and NCCL version, the bad hosts, their XID — and nothing
else as significant; on a history without patterns, nothing at all."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from assistant.store import Store, hostincidents
from assistant.store.correlate import (
    correlate,
    placement_concentration,
    recurring_hosts,
    version_cohorts,
    xid_repeat_offenders,
)
from assistant.store.evidence import evidence, not_evidence
from assistant.store.history import history, parse_since
from assistant.store.stats import binom_log_sf, hypergeom_log_sf, lift
from bench import synth


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, synth.Synthetic]:
    store = Store(tmp_path_factory.mktemp("planted") / "diag.duckdb")
    result = store.write(lambda con: synth.generate(con, hosts=2000, findings=60_000,
                                                    seed=0.42, threads=1))
    return store, result


def test_generated_history_has_the_expected_shape(
        planted: tuple[Store, synth.Synthetic]) -> None:
    _store, result = planted
    counts = result.counts
    assert counts["findings"] == 60_000
    assert counts["incidents"] == 60_000 // 170
    assert counts["sessions"] > counts["incidents"]
    assert counts["probe_runs"] > counts["hosts"] > counts["sessions"]
    assert result.planted_leaf == "leaf-07" and result.planted_nccl == "2.18.3"


def test_correlate_names_exactly_the_planted_leaf_and_nccl_version(
        planted: tuple[Store, synth.Synthetic]) -> None:
    store, result = planted
    report = store.read(lambda con: correlate(con, since=None))
    assert [(p["code"], p["dimension"], p["value"]) for p in report["placement"]] == [
        ("ib-symbol-errors", "leaf", result.planted_leaf)]
    leaf = report["placement"][0]
    assert leaf["lift"] >= 3 and leaf["share"] > leaf["fleet_share"]
    assert leaf["findings"] <= leaf["findings_total"] and leaf["hosts"] <= leaf["fleet_hosts"]

    assert [(v["code"], v["dimension"], v["value"]) for v in report["versions"]] == [
        ("nccl-watchdog-timeout", "nccl_version", result.planted_nccl)]
    hangs = report["versions"][0]
    assert hangs["share"] == 1.0  # all the hangs
    assert 0.2 < hangs["fleet_share"] < 0.3  # on a quarter of the fleet


def test_bad_hosts_recur_and_their_xid_repeats(planted: tuple[Store, synth.Synthetic]) -> None:
    store, result = planted
    report = store.read(lambda con: correlate(con, since=None))
    xids = {x["xid"]: {h["host"] for h in x["hosts"]} for x in report["xid_repeat"]}
    assert set(xids) == {synth.BAD_HOST_XID}
    assert xids[synth.BAD_HOST_XID] <= set(result.bad_hosts)
    assert len(xids[synth.BAD_HOST_XID]) >= len(result.bad_hosts) - 1
    # Every recurring host is a planted bad host, or its recurrence is the planted leaf's or
    # NCCL version's pattern (and says so).
    for host in report["recurring_hosts"]:
        for code in host["codes"]:
            if host["host"] in result.bad_hosts and code["code"] == "xid-drain":
                continue
            assert code.get("explained_by") in (f"leaf {result.planted_leaf}",
                                                f"nccl_version {result.planted_nccl}"), host
    recurring = {h["host"] for h in report["recurring_hosts"]}
    assert len(recurring & set(result.bad_hosts)) >= len(result.bad_hosts) - 1


def test_no_pattern_no_report(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    store.write(lambda con: synth.generate(con, hosts=2000, findings=60_000, seed=0.42,
                                           threads=1, plant=False))
    report = store.read(lambda con: correlate(con, since=None))
    assert report["placement"] == [] and report["versions"] == []
    assert report["xid_repeat"] == [] and report["recurring_hosts"] == []
    assert {r["runbook"] for r in report["time_to_conclusion"]} >= {"hang", "crash"}


def test_window_and_time_to_conclusion(planted: tuple[Store, synth.Synthetic]) -> None:
    store, _ = planted
    recent = store.read(lambda con: correlate(con, since=parse_since("30d")))
    whole = store.read(lambda con: correlate(con, since=None))
    n_recent = sum(r["sessions"] for r in recent["time_to_conclusion"])
    n_whole = sum(r["sessions"] for r in whole["time_to_conclusion"])
    assert 0 < n_recent < n_whole / 6
    for row in whole["time_to_conclusion"]:
        assert row["concluded"] <= row["sessions"]
        assert 0 < row["median_s"] <= row["p90_s"]


def test_history_filters(planted: tuple[Store, synth.Synthetic]) -> None:
    store, result = planted
    bad = result.bad_hosts[0]
    out = store.read(lambda con: history(con, host=bad, code="xid-drain"))
    assert out["host"]["host"] == bad and out["host"]["leaf"]
    assert [f["code"] for f in out["findings"]] == ["xid-drain"]
    assert out["counts"]["incidents"] == out["findings"][0]["incidents"] > 3
    assert all(i["findings"] >= 1 for i in out["incidents"])
    opened = [i["opened"] for i in out["incidents"]]
    assert opened == sorted(opened, reverse=True)
    hang = store.read(lambda con: history(con, runbook="hang", since=parse_since("60d")))
    assert hang["counts"]["incidents"] > 0
    assert all(i["runbooks"] == ["hang"] for i in hang["incidents"])


def test_parse_since() -> None:
    assert parse_since("30d").days == 30 and parse_since("12h").seconds == 12 * 3600
    assert parse_since("2w").days == 14 and parse_since("7").days == 7
    assert parse_since("all") is None and parse_since(None) is None
    with pytest.raises(ValueError, match="30d"):
        parse_since("yesterday")


def test_hypergeometric_tail_matches_a_direct_sum() -> None:
    def direct(k: int, big_n: int, big_k: int, n: int) -> float:
        return sum(math.comb(big_k, x) * math.comb(big_n - big_k, n - x)
                   for x in range(k, min(n, big_k) + 1)) / math.comb(big_n, n)

    # The example: 4 of the 4 affected hosts under the leaf holding 16 of 48.
    assert math.exp(hypergeom_log_sf(4, 48, 16, 4)) == pytest.approx(0.009353, rel=1e-3)
    for args in [(4, 48, 16, 4), (2, 48, 8, 4), (1, 48, 8, 4), (10, 100, 30, 20),
                 (7, 100, 30, 20), (3, 10, 5, 5), (40, 2000, 128, 300)]:
        assert math.exp(hypergeom_log_sf(*args)) == pytest.approx(direct(*args), rel=1e-9)
    assert hypergeom_log_sf(0, 48, 16, 4) == 0.0  # "at least none": p = 1
    assert hypergeom_log_sf(5, 48, 16, 4) == -math.inf  # impossible
    assert hypergeom_log_sf(2000, 500_000, 125_000, 2000) < -2700  # far out, still ordered


def test_binomial_tail_matches_a_direct_sum() -> None:
    def direct(k: int, n: int, p: float) -> float:
        return sum(math.comb(n, x) * p ** x * (1 - p) ** (n - x) for x in range(k, n + 1))

    for args in [(3, 10, 0.1), (1, 10, 0.1), (8, 10, 0.5), (2, 10, 0.5), (10, 40, 0.02)]:
        assert math.exp(binom_log_sf(*args)) == pytest.approx(direct(*args), rel=1e-9)
    assert binom_log_sf(0, 10, 0.1) == 0.0 and binom_log_sf(11, 10, 0.1) == -math.inf
    assert lift(60, 100, 10, 100) == pytest.approx(6.0)


def _direct_recurrence(con: Any, alpha: float) -> set[tuple[str, str, int, float]]:
    """Recurring (host, code, incidents, expected) counted in Python from the rows."""
    incident = {s: i for s, i in con.execute(
        "SELECT id, incident_id FROM sessions WHERE NOT coalesce(simulated, false)"
    ).fetchall()}
    involved: dict[str, set[str]] = {}
    for session, host in con.execute("SELECT session_id, host FROM hosts").fetchall():
        if session in incident:
            involved.setdefault(host, set()).add(incident[session])
    skip = set(not_evidence())
    seen: dict[tuple[str, str], set[str]] = {}
    for code, host, session in con.execute(
            "SELECT code, host, session_id FROM findings WHERE host IS NOT NULL "
            "AND severity <> 'info'").fetchall():
        if code not in skip and session in incident:
            seen.setdefault((code, host), set()).add(incident[session])
    units = sum(len(v) for v in involved.values())
    rate: dict[str, float] = {}
    for (code, _host), incidents in seen.items():  # a host no walk listed counts here too
        rate[code] = rate.get(code, 0.0) + len(incidents) / units
    scored = [(code, host, len(inc), len(involved[host]))
              for (code, host), inc in seen.items() if host in involved]
    threshold = math.log(alpha / len(scored))
    return {(host, code, k, round(n * rate[code], 2)) for code, host, k, n in scored
            if k >= 3 and k >= 2 * n * rate[code]
            and binom_log_sf(k, n, rate[code]) < threshold}


def _reported_recurrence(con: Any, alpha: float) -> set[tuple[str, str, int, float]]:
    return {(h["host"], c["code"], c["incidents"], c["expected"])
            for h in recurring_hosts(con, None, alpha=alpha, limit=10**6)
            for c in h["codes"]}


def test_recurrence_matches_a_direct_count(planted: tuple[Store, synth.Synthetic]) -> None:
    """Recurring hosts against the definition counted in Python from the rows: the SQL's
    deduplication into host-incidents and its pmf bound (which spares the exact tail for
    pairs that cannot pass) must flag exactly the (host, code) pairs the exact test flags."""
    store, _ = planted
    expected = store.read(lambda con: _direct_recurrence(con, 0.01))
    assert expected  # the planted bad hosts at least
    assert store.read(lambda con: _reported_recurrence(con, 0.01)) == expected


def test_hosts_no_walk_listed_still_count(planted: tuple[Store, synth.Synthetic],
                                          tmp_path: Path) -> None:
    """Correlation numbers the hosts of the window's host-sessions; a finding or a versions
    run on a host its walk did not list is numbered too, not dropped: the findings still
    raise their code's fleet rate, and the run is one more host of its NCCL version."""
    shutil.copy(planted[0].path, tmp_path / "diag.duckdb")
    store = Store(tmp_path / "diag.duckdb")
    nccl = planted[1].planted_nccl

    def cohort(con: Any) -> dict[str, Any]:
        patterns, _ = version_cohorts(con, None)
        return next(p for p in patterns if p["dimension"] == "nccl_version")

    def xid79(con: Any) -> dict[str, float]:
        return {h["host"]: h["expected"] for x in xid_repeat_offenders(con, None)
                if x["xid"] == synth.BAD_HOST_XID for h in x["hosts"]}

    before, xid_before = store.read(cohort), store.read(xid79)
    store.write(lambda con: con.execute(
        "INSERT INTO findings (session_id, step_seq, step_index, finding_no, ts, code, "
        "severity, host, hosts_n, xids) SELECT id, 0, 0, 99, started, 'xid-drain', "
        f"'critical', 'stray01', 1, [{synth.BAD_HOST_XID}] FROM sessions"))
    store.write(lambda con: con.execute(
        "INSERT INTO probe_runs BY NAME SELECT * REPLACE ('stray02' AS host) FROM probe_runs "
        "WHERE probe = 'versions' AND state = 'ok' AND json_extract_string(facts, "
        "'$.nccl_version') = ? LIMIT 1", [nccl]))
    store.write(hostincidents.refresh)  # rows written by hand: derived as diag's writers do
    expected = store.read(lambda con: _direct_recurrence(con, 0.01))
    assert store.read(lambda con: _reported_recurrence(con, 0.01)) == expected
    assert expected != planted[0].read(lambda con: _direct_recurrence(con, 0.01))
    xid_after = store.read(xid79)  # XID 79's fleet rate counts stray01's incidents
    assert xid_before and all(xid_after.get(h, 0) > e for h, e in xid_before.items())
    after = store.read(cohort)
    assert after["fleet_hosts"] == before["fleet_hosts"] + 1
    assert after["fleet_hosts_total"] == before["fleet_hosts_total"] + 1


def test_one_correlate_call_equals_each_report_asked_alone(
        planted: tuple[Store, synth.Synthetic]) -> None:
    """``diag correlate`` reads the host-incidents once for all its reports: each report must
    be what it is when asked alone, rows derived at question time must count what the store
    keeps, and nothing is left on the connection afterwards."""
    store, _ = planted
    kw: dict[str, Any] = {"min_lift": 2.0, "alpha": 0.01}

    def check(con: Any) -> None:
        whole = correlate(con, since=None, min_count=3, leads=8, **kw)
        for host in whole["recurring_hosts"]:
            for code in host["codes"]:
                code.pop("explained_by", None)
        assert whole["recurring_hosts"] == recurring_hosts(con, None, **kw)
        placement = placement_concentration(con, None, min_count=3, leads=8, **kw)
        assert (whole["placement"], whole["leads"]["placement"]) == placement
        versions = version_cohorts(con, None, min_count=3, leads=8, **kw)
        assert (whole["versions"], whole["leads"]["versions"]) == versions
        assert whole["xid_repeat"] == xid_repeat_offenders(con, None, **kw)
        # Rows derived at question time (as for pooled exports and --include-simulated:
        # this history has no simulated walk) count exactly what the store keeps.
        with evidence(con, True):
            derived = recurring_hosts(con, None, simulated=True, **kw)
            assert derived == whole["recurring_hosts"]
            assert version_cohorts(con, None, min_count=3, leads=8, simulated=True,
                                   **kw) == versions
        left = con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()
        assert left == []

    store.read(check)


def test_no_progress_bar_on_stdout(planted: tuple[Store, synth.Synthetic],
                                   tmp_path: Path) -> None:
    """DuckDB draws a progress bar on stdout for a query over ~2 s: it was mixed into
    `diag correlate --json` over a year. The store's and the pool's connections have it off."""
    from assistant.store.pool import Pool

    def setting(con: Any) -> Any:
        return con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0]

    assert planted[0].read(setting) is False
    export = tmp_path / "export"
    planted[0].read(lambda con: con.execute(f"EXPORT DATABASE '{export}' (FORMAT parquet)"))
    assert Pool(str(export)).read(setting) is False


def test_nested_groups_are_tested_again_without_the_accepted_ones(tmp_path: Path) -> None:
    """A rack inside an accepted leaf is no pattern once the leaf's hosts are left out (it was
    one only because of its leaf); a second leaf is judged against the fleet without the
    first, where it stands out (1.8x the fleet's rate with the first leaf counted, 3.4x
    without). The accepted groups' combinations are taken out once per acceptance."""
    import duckdb

    from assistant.store.concentration import _explain_nested

    con = duckdb.connect(str(tmp_path / "nested.duckdb"))
    try:
        con.execute("CREATE TABLE c_cexp (leaf VARCHAR, rack VARCHAR, rail VARCHAR, e BIGINT)")
        con.execute("CREATE TABLE c_combo (code VARCHAR, leaf VARCHAR, rack VARCHAR, "
                    "rail VARCHAR, n BIGINT)")
        # (leaf, rack, host-incidents, of them with the code): 200 with it of 2,000.
        racks = [("L1", "R11", 50, 50), ("L1", "R12", 50, 50), ("L2", "R21", 100, 18),
                 ("L2", "R22", 100, 18)] + [("L3", f"R3{i}", 425, 16) for i in range(4)]
        for leaf, rack, e, n in racks:
            con.execute("INSERT INTO c_cexp VALUES (?, ?, '0', ?)", [leaf, rack, e])
            con.execute("INSERT INTO c_combo VALUES ('x', ?, ?, '0', ?)", [leaf, rack, n])

        def cand(dim: str, value: str, log_p: float) -> dict[str, Any]:
            return {"code": "x", "dim": dim, "value": value, "log_p": log_p, "n": 0}

        def accepted(*candidates: dict[str, Any]) -> list[tuple[str, str]]:
            return [(r["dim"], r["value"]) for r in _explain_nested(
                con, ("leaf", "rack", "rail"), {"x": list(candidates)},
                math.log(0.01 / 100), 10, 2.0)]

        assert accepted(cand("rack", "R11", -30.0), cand("leaf", "L2", -20.0),
                        cand("leaf", "L1", -50.0), cand("rail", "0", -1.0)) \
            == [("leaf", "L1"), ("leaf", "L2")]
        # Alone, the rack is a pattern (50 of 200 where 50 of 2,000 host-incidents are), and
        # the second leaf is not (36 of 200 where 200 of 2,000 are: 1.8x).
        assert accepted(cand("rack", "R11", -30.0), cand("rail", "0", -1.0)) == [("rack", "R11")]
        assert accepted(cand("leaf", "L2", -20.0), cand("rail", "0", -1.0)) == []
    finally:
        con.close()
