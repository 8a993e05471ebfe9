"""Every step is in the store the moment it finishes, with its probe runs, findings, action and
the walk state to resume from — checked row by row on a real DuckDB file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from assistant.runbook import events as ev
from assistant.runbook.engine import Walk
from assistant.store import Recorder, Store, StoreError
from tests.store.storehelpers import (
    ATTRS,
    DRIFT,
    DRIFT_ANSWERS,
    DRIFT_PATH,
    HOSTS,
    XID,
    RawProvider,
    dump_all,
    mini_runbook,
    one,
    raw_texts,
    record_walk,
    rows,
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "data" / "diag.duckdb")


def test_each_step_is_committed_when_it_finishes(store: Store) -> None:
    seen: list[dict[str, Any]] = []

    def check(event: ev.Event) -> None:
        # Runs after the Recorder: what it wrote must already be readable by anyone.
        if isinstance(event, ev.StepFinished):
            live = rows(store, "SELECT idx, node, kind FROM steps WHERE NOT undone "
                               "ORDER BY seq")
            head = json.loads(one(store, "SELECT walk_state FROM sessions"))
            state = store.load_session(one(store, "SELECT id FROM sessions"))["state"]
            seen.append({"live": live, "state_steps": len(state["steps"]),
                         "head_only": "steps" not in head,
                         "findings": one(store, "SELECT count(*) FROM findings"),
                         "probe_runs": one(store, "SELECT count(*) FROM probe_runs")})

    _session, walk = record_walk(store, DRIFT, DRIFT_ANSWERS, listeners=[check])
    assert walk.path() == DRIFT_PATH
    assert [len(s["live"]) for s in seen] == [1, 2, 3, 4]
    assert seen[-1]["live"] == [(0, "check-gpu", "probe"), (1, "ask-change", "question"),
                                (2, "check-versions", "probe"), (3, "drift", "conclusion")]
    assert [s["state_steps"] for s in seen] == [1, 2, 3, 4]
    # Each step is written once, with its row: the saved state is only where the walk is.
    assert all(s["head_only"] for s in seen)
    # check-gpu: 3 hosts probed, nothing found; check-versions: 3 runs, one finding row.
    assert [s["probe_runs"] for s in seen] == [3, 3, 6, 6]
    assert [s["findings"] for s in seen] == [0, 0, 1, 1]


def test_session_incident_and_hosts_rows(store: Store) -> None:
    session, _walk = record_walk(store, DRIFT, DRIFT_ANSWERS, symptom="job 12345 hangs\nat step 9")
    (status, conclusion, outcome, severity, hosts_n, operator, ended, incident_id) = rows(
        store, "SELECT status, conclusion, outcome, severity, hosts_n, operator, ended, "
               "incident_id FROM sessions WHERE id = ?", [session])[0]
    assert (status, conclusion, severity, hosts_n) == ("concluded", "drift", "error", 3)
    assert outcome == "Version drift: Versions differ."
    assert operator and ended is not None
    incident = rows(store, "SELECT title, symptom, job_id, status, root_cause, conclusion "
                           "FROM incidents WHERE id = ?", [incident_id])[0]
    assert incident == ("job 12345 hangs", "job 12345 hangs\nat step 9", "12345", "open",
                        "Version drift: Versions differ.", "mini/drift")
    hosts = rows(store, "SELECT host, rack, leaf, rail, attrs FROM hosts ORDER BY host")
    assert [(h, r, lf, rl) for h, r, lf, rl, _ in hosts] == [
        (h, ATTRS[h]["rack"], ATTRS[h]["leaf"], str(ATTRS[h]["rail"])) for h in HOSTS]
    assert json.loads(hosts[0][4]) == {"pod": "p1"}


def test_step_details_probe_runs_findings_and_action(store: Store) -> None:
    provider = RawProvider(XID, raw={("gpu", "gpu002"): "Xid 79 on 0000:3b:00\n" * 3})
    _session, walk = record_walk(store, XID, {}, provider=provider)
    assert walk.path() == ["check-gpu", "drain", "hardware"]
    steps = rows(store, "SELECT seq, idx, node, kind, goto, because, undone FROM steps "
                        "ORDER BY seq")
    assert steps == [(0, 0, "check-gpu", "probe", "drain", "any of xid-drain", False),
                     (1, 1, "drain", "action", "hardware", None, False),
                     (2, 2, "hardware", "conclusion", None, None, False)]
    runs = rows(store, "SELECT host, probe, state, facts FROM probe_runs ORDER BY host")
    assert [(h, p, s) for h, p, s, *_ in runs] == [(h, "gpu", "ok") for h in HOSTS]
    assert raw_texts(store)[("gpu002", "gpu")] == ("Xid 79 on 0000:3b:00\n" * 3, 63)
    assert json.loads(runs[0][3]) == {"temperature_max_c": 60}
    finding = rows(store, "SELECT step_seq, code, severity, host, hosts_n, probe, evidence, "
                          "xids FROM findings")
    assert len(finding) == 1
    seq, code, severity, host, hosts_n, probe, evidence, xids = finding[0]
    assert (seq, code, severity, host, hosts_n, probe) == (0, "xid-drain", "critical",
                                                           "gpu002", 1, "gpu")
    assert json.loads(evidence) == {"xids": [79], "count": 2} and xids == [79]
    action = rows(store, "SELECT step_seq, node, command, hosts, confirmed, confirmed_by, "
                         "result FROM actions")
    assert action == [(1, "drain", mini_runbook().node("drain").command, ["gpu002"], False,
                       None, "not confirmed; not run")]


def test_confirmed_action_records_who(store: Store) -> None:
    session = store.open_session("mini", HOSTS, ATTRS, operator="alice")
    recorder = Recorder(store, session, operator="alice")
    walk = Walk(mini_runbook(), HOSTS, sweep=False, provider=RawProvider(XID), listeners=[recorder],
                confirm=lambda node, hosts: True,
                run_action=lambda cmd, hosts: {h: {"state": "done", "detail": ""} for h in hosts})
    walk.run()
    assert rows(store, "SELECT confirmed, confirmed_by, result FROM actions") == [
        (True, "alice", "gpu002: done")]


def test_a_multi_host_finding_is_one_row_per_host(store: Store) -> None:
    wide = {"gpu": {"findings": [{"code": "xid-drain", "hosts": HOSTS,
                                  "evidence": {"xids": [48, 79]}}]}}
    record_walk(store, wide, {})
    found = rows(store, "SELECT host, hosts_n, finding_no, xids FROM findings ORDER BY host")
    assert found == [(h, 3, 0, [48, 79]) for h in HOSTS]


def test_undo_marks_steps_and_rewinds_the_resume_point(store: Store) -> None:
    session = store.open_session("mini", HOSTS, ATTRS)
    walk = Walk(mini_runbook(), HOSTS, sweep=False, provider=RawProvider(DRIFT | {"versions": {}}),
                listeners=[Recorder(store, session)])
    assert walk.run() == "waiting"
    assert one(store, "SELECT status FROM sessions") == "waiting"
    walk.answer("ask-change", "yes")
    walk.run()  # ask-change(yes) -> check-versions (no drift) -> ask-change again: waits
    assert walk.status == "waiting"
    assert walk.undo()  # takes back the last answer... there is only one: 'yes'
    flags = rows(store, "SELECT idx, node, undone FROM steps ORDER BY seq")
    assert flags == [(0, "check-gpu", False), (1, "ask-change", True),
                     (2, "check-versions", True)]
    state = store.load_session_state(session)
    assert [s["node"] for s in state["steps"]] == ["check-gpu"]
    assert state["current"] == "ask-change"
    walk.answer("ask-change", "no")
    walk.run()
    assert walk.path() == ["check-gpu", "ask-change", "nothing"]
    live = rows(store, "SELECT idx, node, answer FROM steps WHERE NOT undone ORDER BY seq")
    assert live == [(0, "check-gpu", None), (1, "ask-change", "no"), (2, "nothing", None)]
    assert one(store, "SELECT count(*) FROM steps") == 5  # the undone ones are kept


def test_info_conclusion_does_not_replace_a_root_cause(store: Store) -> None:
    first, _ = record_walk(store, DRIFT, DRIFT_ANSWERS)
    incident = one(store, "SELECT incident_id FROM sessions WHERE id = ?", [first])
    record_walk(store, {}, {"ask-change": "no"}, incident=incident)  # -> nothing (info)
    assert one(store, "SELECT root_cause FROM incidents") == "Version drift: Versions differ."
    assert one(store, "SELECT count(*) FROM sessions WHERE incident_id = ?", [incident]) == 2
    store.close_incident(incident[:6], "driver mismatch on gpu003")
    assert rows(store, "SELECT status, root_cause FROM incidents") == [
        ("closed", "driver mismatch on gpu003")]


def test_secrets_in_raw_output_facts_and_evidence_are_redacted(store: Store) -> None:
    token = "ghp_" + "a1B2" * 9
    leaky = {"gpu": {"findings": [{"code": "xid-drain", "hosts": ["gpu001"],
                                   "evidence": {"xids": [79], "env": f"HF_TOKEN={token}",
                                                "password": "hunter2"}}],
                     "facts": {"gpu001": {"cmdline": f"train.py --api-key {token}"}}}}
    provider = RawProvider(leaky, raw={("gpu", "gpu001"): f"export GITHUB_TOKEN={token}\n"
                                                          "AKIAABCDEFGHIJKLMNOP\n"})
    _session, _ = record_walk(store, leaky, {}, provider=provider,
                              symptom=f"launcher printed HF_TOKEN={token}")
    dump = dump_all(store.path)
    assert token not in dump and "hunter2" not in dump and "AKIAABCDEFGHIJKLMNOP" not in dump
    assert "[REDACTED]" in raw_texts(store)[("gpu001", "gpu")][0]


def test_raw_output_is_bounded(store: Store) -> None:
    provider = RawProvider(XID, raw={("gpu", "gpu001"): "x" * 200_000})
    record_walk(store, XID, {}, provider=provider)
    raw, size = raw_texts(store)[("gpu001", "gpu")]
    assert size == 200_000 and len(raw) < 17_000 and "characters cut by diag" in raw


def test_file_and_directory_are_private(store: Store) -> None:
    record_walk(store, XID, {})
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.path.parent).st_mode) == 0o700
    assert not [p for p in store.path.parent.iterdir() if p.name.endswith(".tmp")]


def test_load_session_by_prefix_and_refusals(store: Store) -> None:
    session, _ = record_walk(store, DRIFT, DRIFT_ANSWERS)
    loaded = store.load_session(session[:5])
    assert loaded["id"] == session and loaded["hosts"] == HOSTS
    assert loaded["attrs"]["gpu001"] == {"pod": "p1", "rack": "r01", "leaf": "leaf-01",
                                         "rail": "0"}
    with pytest.raises(StoreError, match="already concluded"):
        store.load_session_state(session)
    with pytest.raises(StoreError, match="no session 'nope'"):
        store.load_session_state("nope")
    fresh = store.open_session("mini", HOSTS, ATTRS, target={"scenario": "hang-1",
                                                             "transport": "ssh"})
    assert store.load_session(fresh)["target"] == {"scenario": "hang-1", "transport": "ssh"}
    assert loaded["target"] is None
    with pytest.raises(StoreError, match="no recorded walk state"):
        store.load_session_state(fresh)


def test_a_busy_store_does_not_stop_the_walk(store: Store, monkeypatch: Any) -> None:
    """A refused write sends the rest of the walk to the journal (said once, not once per
    step); the end of the walk imports it, in order."""
    session = store.open_session("mini", HOSTS, ATTRS)
    errors: list[Exception] = []
    recorder = Recorder(store, session, on_error=errors.append)
    real_write = store.write
    failing = {"left": 1}

    def flaky(fn: Any) -> Any:
        if failing["left"]:
            failing["left"] -= 1
            raise StoreError("the store stayed locked")
        return real_write(fn)

    monkeypatch.setattr(store, "write", flaky)
    walk = Walk(mini_runbook(), HOSTS, sweep=False, provider=RawProvider(XID), listeners=[recorder])
    assert walk.run() == "concluded"
    assert len(errors) == 1 and "journal" in str(errors[0]) and recorder.journal.exists()
    assert rows(store, "SELECT node FROM steps ORDER BY seq") == []
    assert recorder.flush() and not recorder.journal.exists()
    assert rows(store, "SELECT node FROM steps ORDER BY seq") == [
        ("check-gpu",), ("drain",), ("hardware",)]
    assert one(store, "SELECT status FROM sessions") == "concluded"


def test_a_real_fleet_walk_is_recorded_with_raw_output(store: Store) -> None:
    """The hang runbook over a replayed incident, through FleetProvider: real probe scripts,
    parsers and checks, raw outputs from the provider, one host unreachable."""
    from assistant.runbook.library import get_runbook
    from assistant.runbook.provider import FleetProvider
    from assistant.target import open_target

    target = open_target(scenario="hang-node-unreachable")
    try:
        provider = FleetProvider(target.transport, attrs=target.attrs, params=target.params)
        session = store.open_session("hang", target.hosts, target.attrs,
                                     symptom=target.scenario.symptom)
        walk = Walk(get_runbook("hang"), target.hosts, provider,
                    answers=dict(target.scenario.answers))
        Recorder(store, session, raw=provider.raw).follow(walk)
        walk.run()
    finally:
        target.close()
    assert walk.conclusion().id == "host-dead"
    states = dict(rows(store, "SELECT host, state FROM probe_runs"))
    assert states.pop("gpu011") == "unreachable" and set(states.values()) == {"ok"}
    assert one(store, "SELECT count(*) FROM probe_runs WHERE state = 'ok' "
                      "AND raw_hash IS NULL") == 0
    # The runbook's step says the host did not let diag in; the sweep, that it did not measure it.
    assert sorted(rows(store, "SELECT code, host FROM findings")) == \
        [("host-unreachable", "gpu011"), ("not-measured", "gpu011")]
    assert one(store, "SELECT leaf FROM hosts WHERE host = 'gpu011'") == "leaf-08"
    assert [r[0] for r in rows(store, "SELECT node FROM steps ORDER BY seq")] == \
        ["sweep", *walk.path()]  # the evidence sweep is a step, not a node of the runbook
