"""A probe that times out or is cancelled ends on the host too, over real sshd.

Before, diag closed the channel and moved on while the command (and its children) kept running
on the node — a hung ``nvidia-smi`` per retry. Each test runs a command whose processes are
recognisable by a unique ``sleep`` duration, and looks for them in /proc afterwards (the fleet's
"hosts" are sshd processes on this machine).
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from assistant.fleet import remoteproc
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import HEALTHY

pytestmark = pytest.mark.ssh

HOST = HEALTHY[9]


def _sleepers(seconds: str) -> list[int]:
    """Processes whose command line is ``sleep SECONDS`` (our unique duration)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", seconds.encode()]:
            found.append(int(entry))
    return found


def _gone(seconds: str, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _sleepers(seconds):
            return True
        time.sleep(0.1)
    return False


def _unique() -> str:
    return f"{random.randint(100000, 999999)}.5"


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_the_command_and_its_children_end_on_the_host(fleet: sshfleet.SSHFleet,
                                                      how: str) -> None:
    seconds = _unique()
    # a child in the background and one in the foreground, as a probe's pipeline makes them
    command = f"# diag probe: test (read-only)\nsleep {seconds} & sleep {seconds}; echo never"
    cancel = threading.Event()
    timeout = 3.0 if how == "timeout" else 30.0
    with fleet.transport() as transport:
        if how == "cancel":
            threading.Timer(1.0, cancel.set).start()
        started = time.monotonic()
        result = transport.run(HOST, command, timeout=timeout, cancel=cancel)
        assert result.state == ("timeout" if how == "timeout" else "cancelled"), result
        # gone before the remote time limit (timeout + GRACE_S) would have ended it: diag did
        limit = started + timeout + remoteproc.GRACE_S - 0.5
        assert _gone(seconds, within=limit - time.monotonic()), \
            f"left running on the host: {_sleepers(seconds)}"
        assert remoteproc.MARK not in result.stderr
        assert transport.run(HOST, "echo still-usable", timeout=5).stdout == "still-usable\n"


def test_the_remote_time_limit_ends_it_when_diag_cannot(fleet: sshfleet.SSHFleet) -> None:
    """diag gone (connection dropped without a kill): the host's own limit ends the command
    a few seconds after diag's timeout."""
    seconds = _unique()
    transport = fleet.transport()
    try:
        transport._end_remote = lambda *a: None  # type: ignore[method-assign]  # diag "dies"
        # 3 s, as the test above: under load, logging in can take most of a second, and a
        # command that never started tests nothing
        result = transport.run(HOST, f"sleep {seconds}", timeout=3.0)
        assert result.state == "timeout"
        assert _sleepers(seconds), "the command should still run right after diag left"
    finally:
        transport.close()
    assert _gone(seconds, within=3.0 + remoteproc.GRACE_S + 2 + 10)


def test_output_exit_status_and_stderr_are_unchanged(fleet: sshfleet.SSHFleet) -> None:
    with fleet.transport() as transport:
        result = transport.run(HOST, "# diag probe: x (read-only)\necho out; echo 'it''s' >&2;"
                               " exit 3", timeout=5)
    assert (result.state, result.stdout, result.stderr, result.exit_status) == (
        "ok", "out\n", "its\n", 3)


def test_the_host_sees_the_probe_name_first() -> None:
    wrapped = remoteproc.wrap("# diag probe: gpu (read-only)\nnvidia-smi -q", 30)
    assert wrapped.startswith("# diag probe: gpu (read-only)\n")
    grace = remoteproc.GRACE_S
    assert f"timeout -k {grace} {30 + grace} " in wrapped
