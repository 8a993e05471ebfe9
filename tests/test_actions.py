"""Confirmed actions run per host with $HOST replaced, through the transport; nothing else does."""

from __future__ import annotations

from assistant.fleet.local import LocalTransport
from assistant.runbook.actions import commands_for, transport_runner


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
    assert result == "h1: done; h2: done"
    assert sorted(marker.read_text().split()) == ["h1", "h2"]
    assert run("exit 3", ("h1",)).startswith("h1: exit 3")
