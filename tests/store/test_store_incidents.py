"""Incidents as the unit, on real DuckDB files: walks join the open incident they belong to
(and say so), operators close / reopen / merge / tag incidents, closed ones feed time to
resolve — and three runs over one faulty leaf are one incident whose leaf leads correlate."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.store import Store, StoreError
from assistant.store.correlate import correlate
from assistant.store.incidents import DEFAULT_JOIN_WINDOW, join_window, time_to_resolve
from tests.store.storehelpers import ATTRS, HOSTS, ROOT, one, rows

FAULTY = ["gpu018", "gpu021", "gpu027", "gpu032"]  # under leaf-02, in racks r03 and r04


def leaf_scenario(base: Path) -> Path:
    """48 hosts, 16 per leaf, 8 per rack, 8 rails; four trained at 200 Gb/s under leaf-02
    (the recorded output of the shipped ib-rate-degraded scenario), on four different rails
    and two racks — so the leaf, not a rack or a rail, is where they sit together."""
    directory = base / "leaf-02-links"
    (directory / "outputs").mkdir(parents=True)
    shutil.copy(ROOT / "fixtures/scenarios/low-bandwidth-ib-rate-degraded/outputs/"
                       "network-gpu010-mlx5_6-200g.txt", directory / "outputs/network-200g.txt")
    lines = ["title: Slow all_reduce on 48 nodes", "symptom: busbw halved since the weekend",
             "runbook: low-bandwidth", "hosts: gpu[001-048]", "attrs:"]
    lines += [f"  gpu{i + 1:03d}: {{rack: r{i // 8 + 1:02d}, leaf: leaf-{i // 16 + 1:02d}, "
              f"rail: '{i % 8}'}}" for i in range(48)]
    lines += ["outputs:", "  network:", f"    gpu[{','.join(h[3:] for h in FAULTY)}]: "
              "outputs/network-200g.txt", "expect:", "  conclusion: ib-link-fault",
              f"  hosts: [{FAULTY[0]}]"]
    (directory / "scenario.yaml").write_text("\n".join(lines) + "\n")
    return directory


def diag(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_three_runs_over_one_faulty_leaf_are_one_incident_and_the_leaf_leads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario, db = leaf_scenario(tmp_path), str(tmp_path / "diag.duckdb")
    said = []
    for _ in range(3):
        code, _, err = diag(capsys, "run", "low-bandwidth", "--scenario", str(scenario),
                            "--auto", "--db", db)
        assert code == 1, err  # error findings: the bad links
        said.append(next(line for line in err.splitlines() if "incident" in line))
    store = Store(db)
    incident = one(store, "SELECT id FROM incidents")
    assert one(store, "SELECT count(*) FROM incidents") == 1
    assert rows(store, "SELECT count(*) FROM sessions WHERE incident_id = ?", [incident]) == [(3,)]
    assert said[0] == f"diag: incident {incident}: new"
    assert said[1].startswith(f"diag: incident {incident}: joined (same runbook low-bandwidth "
                              "on 48 of the same host(s)")

    # replayed scenarios are simulated: correlate counts them only when asked
    code, out, _ = diag(capsys, "correlate", "--db", db, "--json")
    assert json.loads(out)["leads"]["placement"] == []
    for extra in ((), ("--min-count", "3")):
        code, out, _ = diag(capsys, "correlate", "--db", db, "--json", "--include-simulated",
                            *extra)
        report = json.loads(out)
        assert report["placement"] == []  # four hosts: not significant after correction ...
        lead = report["leads"]["placement"][0]  # ... but the first lead, with its figures
        assert (lead["code"], lead["dimension"], lead["value"]) == (
            "ib-rate-degraded", "leaf", "leaf-02")
        assert (lead["hosts"], lead["hosts_total"]) == (4, 4)
        assert (lead["fleet_hosts"], lead["fleet_hosts_total"]) == (16, 48)
        assert lead["p_value"] == pytest.approx(0.00935, rel=1e-2)  # C(16,4)/C(48,4)
        assert "not significant after correction" in lead["why"]
    code, out, _ = diag(capsys, "correlate", "--db", db, "--include-simulated")
    first = next(line for line in out.splitlines() if line.strip().startswith("lead:"))
    assert "ib-rate-degraded on leaf leaf-02: 4 of 4 affected hosts, 16 of 48 hosts of the " \
           "fleet (33%)" in first and "p=0.0094" in first


def test_a_walk_joins_only_the_incident_it_belongs_to(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    window = timedelta(hours=4)
    first = store.start_session("mini", HOSTS, ATTRS, join_window=window)
    assert first.joined is None
    # Same runbook, overlapping hosts, within the window: joined, and said why.
    again = store.start_session("mini", HOSTS[1:], ATTRS, join_window=window)
    assert again.incident == first.incident
    assert again.joined.startswith("same runbook mini on 2 of the same host(s)")
    # Another runbook, disjoint hosts, no window, or --new-incident: a new incident each.
    assert store.start_session("hang", HOSTS, ATTRS, join_window=window).joined is None
    assert store.start_session("mini", ["gpu100"], {}, join_window=window).joined is None
    assert store.start_session("mini", HOSTS, ATTRS, join_window=None).joined is None
    assert store.start_session("mini", HOSTS, ATTRS, join=False,
                               join_window=window).joined is None
    # Once its last walk is older than the window, the incident takes no new walk.
    store.write(lambda con: con.execute("UPDATE sessions SET updated = updated - INTERVAL 5 "
                                        "HOUR"))
    late = store.start_session("mini", HOSTS, ATTRS, join_window=window)
    assert late.joined is None and late.incident != first.incident


def test_the_same_slurm_job_joins_whatever_the_time_until_closed(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    first = store.start_session("hang", HOSTS, ATTRS, job="4471", join_window=None)
    store.write(lambda con: con.execute("UPDATE sessions SET updated = updated - INTERVAL 3 "
                                        "DAY"))
    other = store.start_session("crash", ["gpu200"], {}, job="4471", join_window=None)
    assert (other.incident, other.joined) == (first.incident, "same Slurm job 4471")
    store.close_incident(first.incident, "bad GPU on gpu002")
    assert store.start_session("crash", HOSTS, ATTRS, job="4471").incident != first.incident


def test_naming_an_incident(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "diag.duckdb")
    base = ["run", "hang", "--scenario", "hang-xid79-fallen-off-bus", "--auto", "--db", db]
    diag(capsys, *base)
    incident = one(Store(db), "SELECT id FROM incidents")
    code, out, err = diag(capsys, *base, "--new-incident", "--json")
    assert json.loads(out)["incident"]["joined"] is None
    assert one(Store(db), "SELECT count(*) FROM incidents") == 2
    code, out, err = diag(capsys, *base, "--incident", incident[:6], "--json")
    assert json.loads(out)["incident"] == {"id": incident, "joined": "asked for (--incident)"}
    diag(capsys, "incident", "close", incident, "--db", db)
    code, _, err = diag(capsys, *base, "--incident", incident)
    assert code == 2 and err == (f"diag: incident {incident} is closed; `diag incident reopen "
                                 f"{incident}` first\n")
    code, _, err = diag(capsys, *base, "--join-window", "soon")
    assert code == 2 and "join window takes a duration like 4h" in err
    assert join_window("off") is None and join_window("90m") == timedelta(minutes=90)
    assert join_window(None) == DEFAULT_JOIN_WINDOW


def test_close_reopen_merge_and_tag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "diag.duckdb")
    store = Store(db)
    a = store.start_session("hang", HOSTS, ATTRS, symptom="hang on job 1", job="1").incident
    b = store.start_session("hang", ["gpu009"], {}, symptom="hang again", job="2",
                            tags=["night"]).incident
    code, _, err = diag(capsys, "incident", "close", a, "--db", db)
    assert code == 2 and "has no root cause yet" in err
    code, out, _ = diag(capsys, "incident", "close", a, "--cause", "driver mismatch", "--db", db)
    assert code == 0 and "closed" in out
    assert rows(store, "SELECT status, root_cause, closed_by IS NOT NULL, closed IS NOT NULL "
                       "FROM incidents WHERE id = ?", [a]) == [
        ("closed", "driver mismatch", True, True)]
    code, out, _ = diag(capsys, "incident", "list", "--db", db)
    assert b in out and a not in out  # open ones by default
    code, out, _ = diag(capsys, "incident", "list", "--status", "all", "--json", "--db", db)
    assert {i["id"] for i in json.loads(out)["incidents"]} == {a, b}

    code, _, _ = diag(capsys, "incident", "reopen", a, "--db", db)
    assert one(store, "SELECT status FROM incidents WHERE id = ?", [a]) == "open"
    code, _, err = diag(capsys, "incident", "reopen", a, "--db", db)
    assert code == 2 and "only a closed incident can be reopened" in err

    code, out, _ = diag(capsys, "incident", "merge", a, b, "--json", "--db", db)
    merged = json.loads(out)
    assert merged["sessions_moved"] == 1 and merged["tags"] == ["night"]
    assert rows(store, "SELECT count(*) FROM sessions WHERE incident_id = ?", [a]) == [(2,)]
    assert rows(store, "SELECT status, merged_into FROM incidents WHERE id = ?", [b]) == [
        ("merged", a)]
    code, _, err = diag(capsys, "incident", "merge", a, b, "--db", db)
    assert code == 2 and "already merged" in err
    code, out, _ = diag(capsys, "report", b, "--db", db)
    assert f"- **Status:** merged into {a}" in out

    diag(capsys, "incident", "tag", a, "INC-4471", "vendor-rma", "--remove", "night", "--db", db)
    assert one(store, "SELECT tags FROM incidents WHERE id = ?", [a]) == ["INC-4471",
                                                                          "vendor-rma"]
    code, out, _ = diag(capsys, "incident", "show", a[:5], "--db", db)
    assert f"merged in   {b}" in out and "INC-4471" in out
    code, _, err = diag(capsys, "incident", "show", "nope", "--db", db)
    assert code == 2 and err.startswith("diag: no incident 'nope'")


def test_closed_incidents_feed_time_to_resolve(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    for hours in (1, 3):
        incident = store.start_session("hang", HOSTS, ATTRS).incident
        store.close_incident(incident, "bad GPU")
        store.write(lambda con, i=incident, h=hours: con.execute(
            f"UPDATE incidents SET opened = closed - INTERVAL {h} HOUR WHERE id = ?", [i]))
    store.start_session("hang", HOSTS, ATTRS)  # still open: not resolved
    [row] = store.read(lambda con: time_to_resolve(con, None))
    assert (row["runbook"], row["incidents"], row["closed"]) == ("hang", 3, 2)
    assert row["mean_s"] == pytest.approx(7200) and row["median_s"] == pytest.approx(7200)
    report = store.read(lambda con: correlate(con, since=None))
    assert report["time_to_resolve"] == [row]
    with pytest.raises(StoreError, match="already closed"):
        store.close_incident(store.read(lambda con: con.execute(
            "SELECT id FROM incidents WHERE status = 'closed' LIMIT 1").fetchone()[0]))
