"""``--timeout`` bounds the tests that load a node too, on the host itself (issue 27 item 6): a
hung test (a wedged GPU under dcgmi or gpu_burn) kept running for the probe's own limit (13
minutes for a 10-minute burn) whatever the operator's ``--timeout`` said, and with ``--transport
local`` it kept running after diag was killed, since nothing on the host bounded it.

A stand-in gpu_burn that prints its first lines and sleeps (``sleep N``, N unique to the test,
the marker looked for in /proc) is started through the local transport, the one a killed diag
left processes behind with; the SSH transport bounds every command on the node the same way
(``fleet.remoteproc``; tests/acceptance/test_acceptance_walk.py cancels a hung test there).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assistant.fleet.local import LocalTransport
from assistant.runbook import events as ev
from assistant.runbook.provider import FleetProvider
from tests.acceptance import standins

ROOT = Path(__file__).resolve().parents[2]


def _sleepers(seconds: str) -> list[int]:
    """Processes whose command line is ``sleep SECONDS`` (the hanging stand-in's)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", seconds.encode()]:
                found.append(int(entry))
    return found


def _wait(until: Callable[[], object], seconds: float) -> bool:
    """Poll *until* for up to *seconds*; whether it held."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if until():
            return True
        time.sleep(0.1)
    return bool(until())


@pytest.fixture
def hanging_burn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A node whose gpu_burn hangs, on this machine's PATH; yields the sleep's marker. Whatever
    the test leaves running is ended here (only the marked sleeps this test started)."""
    seconds = str(random.randint(100000, 999999))
    tools = standins.node(burn_body=standins.hang(standins.BURN_PASS, int(seconds)))
    bin_dir = standins.write_bin(tmp_path / "bin", tools)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    yield seconds
    for pid in _sleepers(seconds):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_the_operators_timeout_ends_a_hung_test(hanging_burn: str) -> None:
    provider = FleetProvider(LocalTransport(), timeout=1.0)
    events: list[ev.Event] = []
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(provider.run_probe(
        "gpu-burn", ["localhost"], {"confirmed_active": True}, events.append)), daemon=True)
    thread.start()
    try:
        thread.join(30)
        assert not thread.is_alive(), "the hung test outlived --timeout 1 by 30 s"
    finally:
        provider.cancel.set()
        thread.join(30)
    finished = [e for e in events if isinstance(e, ev.ProbeFinished)]
    assert [(e.host, e.state) for e in finished] == [("localhost", "timeout")], finished
    assert _wait(lambda: not _sleepers(hanging_burn), 5), "the hung test is still running"


_DIAG = """
import sys
from assistant.fleet.local import LocalTransport
from assistant.runbook.provider import FleetProvider

provider = FleetProvider(LocalTransport(), timeout=float(sys.argv[1]))
provider.run_probe("gpu-burn", ["localhost"], {"confirmed_active": True}, lambda e: None)
"""


def test_a_killed_diag_leaves_no_test_running_past_its_timeout(hanging_burn: str) -> None:
    timeout = 2.0
    diag = subprocess.Popen([sys.executable, "-c", _DIAG, str(timeout)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait(lambda: _sleepers(hanging_burn), 30), "the hanging stand-in never started"
    finally:
        diag.kill()  # kill -9: diag can clean nothing up
        diag.wait()
    started = time.monotonic()
    # the host's own limit: diag's timeout, a grace of 2 s, then TERM and (2 s later) KILL
    assert _wait(lambda: not _sleepers(hanging_burn), timeout + 10), \
        "the hung test outlived the diag that started it"
    assert time.monotonic() - started < timeout + 10


def test_a_node_whose_test_did_not_finish_is_not_resumed() -> None:
    """A test ended by its time limit, or never started because the step's deadline came
    first, proves nothing: its node stays drained. (Either raised only a warning the acceptance
    runbook did not stop on, probe-hung or not-measured: the node was offered RESUME with its
    burn never finished.)"""
    from assistant.runbook.acceptreport import decisions
    from assistant.runbook.engine import Walk
    from assistant.runbook.library import get_runbook
    from assistant.runbook.rehearsal import RecordedProvider

    ended = {"state": "timeout", "phase": "command", "section": "burn",
             "reason": "command did not finish in 900s"}
    late = {"state": "timeout", "reason": "not started before the step's deadline (840s)"}
    walk = Walk(get_runbook("acceptance"), ("gpu001", "gpu002", "gpu003"),
                RecordedProvider({"gpu-burn": {"states": {"gpu002": ended, "gpu003": late}}}),
                answers={"want-l0": "no", "want-l1": "yes", "want-l2": "no", "want-l3": "no",
                         "want-l4": "no"},
                confirm=lambda node, hosts: True,
                run_action=lambda command, hosts: {h: {"state": "done", "detail": ""}
                                                   for h in hosts})
    assert walk.run() == "concluded"
    resumed = [s.action for s in walk.steps if s.node == "offer-resume"]
    assert resumed and resumed[0] is not None and resumed[0]["hosts"] == ["gpu001"], resumed
    said = decisions(walk)
    assert said["gpu002"].startswith("stays drained: active-test-ended: ") \
        and "section 'burn'" in said["gpu002"], said
    assert said["gpu003"].startswith("stays drained: active-test-ended: ") \
        and "deadline" in said["gpu003"], said
