"""diag's own stall is never a host's silence (issue 25): a healthy host whose SSH banner and
key exchange wait in diag's socket while diag's process is busy (here: a thread holding
Python's interpreter for seconds at a time, as parsing a big step's outputs does) is read, or
at worst not measured; never "did not let diag in", never skipped for the rest of the walk.
Over real sshd on loopback."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import pytest

from assistant.fleet.lagclock import CLIENT_BEHIND, LagClock
from assistant.runbook.provider import FleetProvider
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import HEALTHY

pytestmark = pytest.mark.ssh

CONNECT_TIMEOUT = 1.0


class _Hog:
    """A thread that holds the interpreter in bursts (the switch interval raised so nothing
    takes it back), with a short breath between them."""

    def __init__(self, burst_s: float, total_s: float) -> None:
        self.burst_s, self.total_s = burst_s, total_s
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        time.sleep(0.2)  # let the walk start its login first
        end = time.monotonic() + self.total_s
        while time.monotonic() < end:
            burst = time.monotonic() + self.burst_s
            while time.monotonic() < burst:
                pass
            time.sleep(0.02)


@pytest.fixture
def starved_client() -> Iterator[_Hog]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    hog = _Hog(burst_s=2.0, total_s=6.0)
    hog.thread.start()
    try:
        yield hog
    finally:
        hog.thread.join()
        sys.setswitchinterval(interval)


def test_a_login_timed_out_while_diag_was_behind_is_not_the_hosts(
        fleet: sshfleet.SSHFleet, starved_client: _Hog) -> None:
    host = HEALTHY[0]
    with fleet.transport([host], connect_timeout=CONNECT_TIMEOUT) as transport:
        provider = FleetProvider(transport, concurrency=4, deadline=60)
        outcome = provider.run_probe("versions", [host], {}, lambda event: None)
    result = outcome.hosts[host]
    # read once the client caught up, or not measured with diag's own reason: never the node
    assert result.state == "ok" or CLIENT_BEHIND in result.reason, result
    codes = {f.code for f in outcome.findings if host in f.hosts}
    assert "host-unreachable" not in codes and "fleet-unreachable" not in codes, codes
    assert host not in provider.dead


def test_the_clock_stretches_a_limit_by_the_time_the_client_was_behind() -> None:
    now = [0.0]
    clock = LagClock(0.05, clock=lambda: now[0])
    for _ in range(10):  # 0.5 s of polls on time
        now[0] += 0.05
        clock.tick()
    assert not clock.past(1.0) and clock.late == 0 and clock.note(1.0) == ""
    now[0] += 1.2  # the poll came back 1.2 s late: the client was not running
    clock.tick()
    assert clock.late == pytest.approx(1.15) and not clock.past(1.0)
    for _ in range(10):  # 0.5 s more on time: 1.05 s of on-time waiting in all
        now[0] += 0.05
        clock.tick()
    # the host had its whole second watched on time: silent, however late diag was besides
    assert clock.past(1.0) and clock.note(1.0) == ""


def test_a_limit_is_never_stretched_past_twice_itself() -> None:
    now = [0.0]
    clock = LagClock(0.05, clock=lambda: now[0])
    for _ in range(4):  # a client that never catches up
        now[0] += 0.8
        clock.tick()
    assert clock.past(1.0) and clock.behind(1.0)  # 3.2 s in all against a 1 s limit, 2 s at most
    assert CLIENT_BEHIND in clock.note(1.0)


def test_a_host_silent_on_time_is_not_excused() -> None:
    now = [0.0]
    clock = LagClock(0.05, clock=lambda: now[0])
    for _ in range(6):  # 1.2 s of polls, each late by a busy machine's scheduling
        now[0] += 0.2
        clock.tick()
    assert clock.past(1.0) and not clock.behind(1.0) and clock.note(1.0) == ""
