"""Dead hosts are tried once per walk, not once per probe (over real sshd on loopback).

The shared fleet has three hosts that cannot be reached: nothing listening (refused at once),
a TCP accept that never sends a banner, and a banner then silence; the last two each cost two
connect timeouts (a time-out before login is confirmed by a second try before the host is
called unreachable: test_fleet_confirm_timeout.py). A five-probe walk used to pay that in every
probe."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from assistant.fleet.ssh import SSHTransport
from assistant.runbook.provider import FleetProvider
from probes.model import ProbeOutcome
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import DEAD, HEALTHY, MUTE, STALL

pytestmark = pytest.mark.ssh

PROBES = ["versions", "gpu", "network", "host", "storage"]
CONNECT_TIMEOUT = 1.5


def _walk(transport: SSHTransport,
          hosts: Sequence[str]) -> tuple[float, FleetProvider, list[ProbeOutcome]]:
    provider = FleetProvider(transport, concurrency=64, deadline=120)
    began = time.monotonic()
    outcomes = [provider.run_probe(name, hosts, {}, lambda event: None) for name in PROBES]
    return time.monotonic() - began, provider, outcomes


def test_dead_hosts_cost_their_time_outs_once_per_walk(fleet: sshfleet.SSHFleet) -> None:
    dead = [DEAD, MUTE, STALL]
    with fleet.transport(connect_timeout=CONNECT_TIMEOUT) as transport:
        _walk(transport, HEALTHY[:4])  # connections to the healthy hosts opened and reused
        healthy_s, _, _ = _walk(transport, HEALTHY)
        held = {host: len(_server(fleet, host).held) for host in (MUTE, STALL)}
        mixed_s, provider, outcomes = _walk(transport, [*HEALTHY, *dead])
        time.sleep(0.3)  # the hold servers' accept loops poll every 0.1 s
    assert set(provider.dead) == set(dead)
    first, *later = outcomes
    for host in dead:
        assert first.hosts[host].state in ("unreachable", "timeout")
        assert "not tried again" not in first.hosts[host].reason
        for outcome in later:  # same state as the first failure, said to be remembered
            assert outcome.hosts[host].state == first.hosts[host].state
            assert "not tried again" in outcome.hosts[host].reason
    for outcome in outcomes:
        assert all(outcome.hosts[h].state != "unreachable" for h in HEALTHY)
    # The silent servers were tried in the walk's first probe only, once and once more to
    # confirm (before: once per probe); they are tried side by side, so the walk pays two
    # time-outs in all, not two per host.
    for host in (MUTE, STALL):
        assert len(_server(fleet, host).held) - held[host] == 2
    assert mixed_s - healthy_s < 2 * CONNECT_TIMEOUT + 2.0, (mixed_s, healthy_s)


def _server(fleet: sshfleet.SSHFleet, host: str) -> sshfleet._HoldServer:
    server = fleet.members[host].server
    assert isinstance(server, sshfleet._HoldServer)
    return server


def test_retry_dead_tries_once_more(fleet: sshfleet.SSHFleet) -> None:
    with fleet.transport(connect_timeout=CONNECT_TIMEOUT) as transport:
        _, provider, _ = _walk(transport, [HEALTHY[0], DEAD])
        assert list(provider.dead) == [DEAD]
        # Pretend the first host had been down: a retry finds it and keeps DEAD marked.
        provider.dead[HEALTHY[0]] = provider.dead[DEAD]
        assert provider.retry_dead(timeout=10) == [HEALTHY[0]]
        assert list(provider.dead) == [DEAD]
        outcome = provider.run_probe("versions", [HEALTHY[0], DEAD], {}, lambda event: None)
        assert outcome.hosts[HEALTHY[0]].state != "unreachable"
        assert "not tried again" in outcome.hosts[DEAD].reason
