"""Fixtures for the fleet tests: one real loopback SSH fleet shared by the whole session.

Starting ~30 sshd takes a fraction of a second, but sharing one fleet keeps the suite fast and
exercises what production does: many commands over the same servers. Tests that change a
host's tools restore them; tests that need a pristine transport make their own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sshfleet

from assistant.fleet.ssh import SSHTransport

# 27 healthy hosts, one whose nvidia-smi hangs, one that prints garbage, and three broken
# servers: 32 in all, the size of the fan-out test.
HEALTHY = [f"node{i:03d}" for i in range(1, 28)]
SLOW, GARBAGE = "slow01", "garbage01"
DEAD, MUTE, STALL = "dead01", "mute01", "stall01"
FAULTY = {DEAD: "refused", MUTE: "no-banner", STALL: "stall-after-banner"}
TOOLS = {
    SLOW: {"nvidia-smi": "sleep 20"},
    GARBAGE: {"nvidia-smi": "head -c 2000 /dev/urandom; printf '\\377\\376 not utf-8\\n'"},
}


@pytest.fixture(scope="session")
def fleet() -> Iterator[sshfleet.SSHFleet]:
    reason = sshfleet.unavailable_reason()
    if reason:
        sshfleet.skip_or_fail(reason)
    with sshfleet.SSHFleet([*HEALTHY, SLOW, GARBAGE], faulty=FAULTY, tools=TOOLS) as started:
        yield started


@pytest.fixture()
def ssh(fleet: sshfleet.SSHFleet) -> Iterator[SSHTransport]:
    """A fresh transport over the fleet (fast timeouts), closed after the test."""
    transport = fleet.transport(connect_timeout=1.0)
    yield transport
    transport.close()
