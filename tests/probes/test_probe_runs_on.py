"""Where a probe's script runs is a field of its Probe, checked when the probe is defined."""

from __future__ import annotations

import pytest

from probes.base import Probe, get_probe


def _parse(text: str) -> dict[str, object]:
    return {}


def test_the_scheduler_probe_runs_once_on_the_client() -> None:
    probe = get_probe("scheduler")
    assert probe.runs_on == "client"
    assert probe.shared_output is not None
    assert "gpu001" in probe.shared_output("gpu001")
    assert get_probe("versions").runs_on == "node"


def test_runs_on_takes_node_or_client() -> None:
    with pytest.raises(ValueError, match="runs_on is 'node' or 'client'"):
        Probe("odd", lambda params: "true", _parse, runs_on="login-node")


def test_a_client_side_probe_says_what_the_other_hosts_get() -> None:
    with pytest.raises(ValueError, match="needs shared_output"):
        Probe("odd", lambda params: "true", _parse, runs_on="client")
