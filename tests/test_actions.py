"""Confirmed actions run per host with $HOST replaced, through the transport; nothing else does."""

from __future__ import annotations

from assistant.fleet.local import LocalTransport
from assistant.runbook.actions import commands_for, simulated_runner, transport_runner
from assistant.runbook.engine import action_outcome


def test_host_is_substituted_and_quoted() -> None:
    # A hostile-looking name stays one shell word.
    cmds = commands_for("scontrol update NodeName=$HOST State=DRAIN", ("gpu001", "a b;rm"))
    assert cmds == {"gpu001": "scontrol update NodeName=gpu001 State=DRAIN",
                    "a b;rm": "scontrol update NodeName='a b;rm' State=DRAIN"}


def test_runner_reports_each_host(tmp_path) -> None:
    # Runs for real on this machine through the local transport; a failure is reported, not
    # raised.
    marker = tmp_path / "ran"
    run = transport_runner(LocalTransport(), timeout=10)
    result = run(f"echo $HOST >> {marker}", ("h1", "h2"))
    assert result == {"h1": {"state": "done", "detail": ""},
                      "h2": {"state": "done", "detail": ""}}
    assert sorted(marker.read_text().split()) == ["h1", "h2"]
    assert action_outcome(result) == ("done", "done on h[1-2] (2) — h1: done; h2: done")
    failed = run("echo 'scontrol: not found' >&2; exit 127", ("h1",))
    assert failed == {"h1": {"state": "failed", "detail": "exit 127: scontrol: not found"}}
    assert action_outcome(failed) == ("failed", "h1: failed: exit 127: scontrol: not found")


def test_partly_done_names_the_hosts_it_failed_on() -> None:
    per_host = {"h1": {"state": "done", "detail": ""},
                "h2": {"state": "failed", "detail": "exit 1: no"}}
    outcome, text = action_outcome(per_host)
    assert outcome == "partly"
    assert text.startswith("done on h1 (1); failed on h2 (1)")


def test_a_replayed_incident_only_simulates_and_says_so() -> None:
    result = simulated_runner("scontrol update NodeName=$HOST State=DRAIN", ("gpu003",))
    assert result == {"gpu003": {"state": "simulated",
                                 "detail": "replayed incident: nothing ran"}}
    assert action_outcome(result)[0] == "simulated"
