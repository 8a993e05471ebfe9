"""Over real sshd: a command diag's time-out ends is first asked what its processes were doing
(ps over the same connection, assistant/fleet/ssh.py), so the verdict can tell a command
blocked in the kernel from one that was only slow (probes/hangstate.py)."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from assistant.fleet.ssh import SSHTransport
from probes import hangstate
from tests.fleet import sshfleet, wedged
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


def test_a_command_wedged_in_the_kernel_is_blocked_and_a_sleeping_one_under_a_cut_limit_is_not(
        fleet: sshfleet.SSHFleet, ssh: SSHTransport) -> None:
    # the stand-in the replay fleets plant for a hang (tests/fleet/wedged.py), run for real
    where = Path(tempfile.mkdtemp(prefix="diag-wedged-"))
    where.chmod(0o755)  # read by the fleet's test user
    shutil.copy(wedged.__file__, where / "wedged.py")
    (where / "wedged.py").chmod(0o644)
    try:
        assert ssh.run(SLOW, "true", timeout=10).state == "ok"
        result = ssh.run(SLOW, f"echo started; python3 {where / 'wedged.py'} nvidia-smi",
                         timeout=2)
        assert result.state == "timeout"
        seen = hangstate.processes(result.processes)
        assert any(p.command == "nvidia-smi" and p.state.startswith("D") for p in seen), seen
        # blocked in the kernel: the host's hang, even when the operator cut the limit below
        # the gpu probe's own 75 s
        verdict, shown = hangstate.judge(result.processes, ("D",), False, 2.0, 75.0)
        assert verdict == "blocked" and [p.command for p in shown] == ["nvidia-smi"]
        # a stand-in nvidia-smi that sleeps under the same cut limit: diag's side
        slow = ssh.run(SLOW, "echo started; nvidia-smi", timeout=2)
        assert hangstate.judge(slow.processes, ("D",), False, 2.0, 75.0)[0] == "short"
        # the groups were ended (TERM, then KILL a grace later: assistant/fleet/remoteproc.py):
        # nothing of the wedged stand-in is left on the host
        for _ in range(40):
            left = ssh.run(SLOW, "ps -e -o pid= -o stat= -o comm= | grep nvidia-smi || true",
                           timeout=10).stdout.strip()
            if not left:
                break
            time.sleep(0.25)
        assert left == "", left
    finally:
        shutil.rmtree(where, ignore_errors=True)
