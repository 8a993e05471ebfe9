"""Over real sshd: a command diag's time-out ends is first asked what its processes were doing
(ps over the same connection, assistant/fleet/ssh.py), so the verdict can tell a command
blocked in the kernel from one that was only slow (probes/hangstate.py)."""

from __future__ import annotations

import pytest

from assistant.fleet.ssh import SSHTransport
from probes import hangstate
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import HEALTHY, SLOW

pytestmark = pytest.mark.ssh


def test_a_timed_out_command_comes_back_with_its_processes(fleet: sshfleet.SSHFleet,
                                                           ssh: SSHTransport) -> None:
    assert ssh.run(SLOW, "true", timeout=10).state == "ok"  # logged in: the limit is the command's
    result = ssh.run(SLOW, "echo started; nvidia-smi", timeout=2)  # nvidia-smi: sleep 20 here
    assert (result.state, result.phase) == ("timeout", "command")
    seen = {p.command: p for p in hangstate.processes(result.processes)}
    assert "sleep" in seen, result.processes
    # asleep, not blocked in the kernel, and it had run about as long as diag allowed
    assert seen["sleep"].state.startswith("S") and seen["sleep"].elapsed_s >= 1
    verdict, _ = hangstate.judge(result.processes, ("D",), False, given_s=2)
    assert verdict == "unknown"  # on a quiet host: a hang, as before
    # asking costs no connection: the same one still serves (the group's end is checked in
    # test_fleet_remote_leftovers.py)
    assert ssh.run(SLOW, "uname -r", timeout=10).state == "ok"
    assert ssh.connections_opened == 1


def test_a_finished_or_cancelled_command_carries_no_processes(fleet: sshfleet.SSHFleet,
                                                               ssh: SSHTransport) -> None:
    assert ssh.run(HEALTHY[0], "uname -r", timeout=10).processes == ()
