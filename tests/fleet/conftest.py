"""Fixtures for the fleet tests: one real loopback SSH fleet shared by the whole session.

Starting ~30 sshd takes a fraction of a second, but sharing one fleet keeps the suite fast and
exercises what production does: many commands over the same servers. Tests that change a
host's tools restore them; tests that need a pristine transport make their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.fleet.ssh import SSHTransport
from tests.fleet import replayfleet, sshfleet
from tests.fleet.fleet_hosts import FAULTY, GARBAGE, HEALTHY, SLOW, TOOLS


@pytest.fixture(scope="session")
def fleet() -> Iterator[sshfleet.SSHFleet]:
    reason = sshfleet.unavailable_reason()
    if reason:
        sshfleet.skip_or_fail(reason)
    with sshfleet.SSHFleet([*HEALTHY, SLOW, GARBAGE], faulty=FAULTY, tools=TOOLS) as started:
        yield started


@pytest.fixture(scope="session")
def replay_fleet() -> Iterator[tuple[sshfleet.SSHFleet, Path]]:
    """gpu001..gpu016 replaying the scenario staged last (tests/fleet/replayfleet.py)."""
    with replayfleet.replay_fleet() as started:
        yield started


@pytest.fixture()
def ssh(fleet: sshfleet.SSHFleet) -> Iterator[SSHTransport]:
    """A fresh transport over the fleet, closed after the test. Its users reach live hosts and
    names that fail at once; a loaded login may take seconds, so the limit is not what's tested."""
    transport = fleet.transport(connect_timeout=10.0)
    yield transport
    transport.close()
