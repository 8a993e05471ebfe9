"""A test that hangs, and diag stopped mid-test, over real sshd (issue 29 items 13, 14).

The stand-in ``all_reduce_perf`` prints nccl-tests' header, then ignores SIGTERM and sleeps
(``sleep N``, N unique to the test: the marker looked for in /proc). Before, the node-side limit
(``timeout -k 2 N sh -c ...``) TERMed the group, the shell died, ``timeout`` exited, and the
test ran on for good; a Ctrl-C or a closed terminal left it running too.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assistant.fleet import remoteproc
from tests.acceptance import standins
from tests.fleet import sshfleet
from tests.fleet.healthyfleet import no_test_processes

pytestmark = pytest.mark.ssh

NODES = ["gpu001", "gpu002"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fleet() -> Iterator[sshfleet.SSHFleet]:
    reason = sshfleet.unavailable_reason()
    if reason:
        sshfleet.skip_or_fail(reason)
    with sshfleet.SSHFleet(NODES, tools={n: standins.node() for n in NODES}) as started:
        yield started


def _stubborn(seconds: int) -> str:
    """all_reduce_perf that prints its header and never a row, deaf to SIGTERM."""
    return standins.hang(standins.NCCL_PASS, seconds).replace("exec sleep",
                                                              "trap '' TERM\nexec sleep")


def _sleepers(seconds: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", str(seconds).encode()]:
                found.append(int(entry))
    return found


def _wait(until: Callable[[], object], seconds: float) -> float | None:
    """Seconds until *until* held, or None if it never did."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if until():
            return time.monotonic() - start
        time.sleep(0.05)
    return None


def test_the_node_side_limit_ends_the_whole_group_by_itself(fleet: sshfleet.SSHFleet) -> None:
    """No diag-side kill: the wrapped command (with a 1 s limit) runs inside a command diag
    gives 60 s, so only the node's own limit can end it."""
    seconds = random.randint(100000, 999999)
    stubborn = f"echo started; sh -c \"trap '' TERM; exec sleep {seconds}\" & wait"
    transport = fleet.transport(["gpu001"])
    try:
        start = time.monotonic()
        result = transport.run("gpu001", f"sh -c {shlex.quote(remoteproc.wrap(stubborn, 1))}",
                               timeout=60)
        took = time.monotonic() - start
    finally:
        transport.close()
    assert result.state == "ok" and "started" in result.stdout, result
    # limit 1 s + 2 s past diag's, TERM ignored, KILL the grace (2 s) later: ~5 s, not never
    assert took < 15, took
    assert _wait(lambda: not _sleepers(seconds), 5) is not None, \
        "the TERM-ignoring test outlived the node-side limit"


def _accept(fleet: sshfleet.SSHFleet, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, DIAG_CACHE_DIR="off")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(fleet.inventory.read_text().replace("kind:", "gpu_model: A100, kind:"))
    return subprocess.Popen(
        [sys.executable, "-m", "assistant.cli", "accept", "--inventory", str(inventory),
         "--hosts", "gpu001", "--levels", "2", "--db", str(tmp_path / "d.duckdb"),
         "--param", "ib-loopback.rdma=false", *extra],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_running_test_on_the_node_and_says_so(
        fleet: sshfleet.SSHFleet, tmp_path: Path, sig: signal.Signals) -> None:
    seconds = random.randint(100000, 999999)
    fleet.set_tool("gpu001", "all_reduce_perf", _stubborn(seconds))
    try:
        proc = _accept(fleet, tmp_path, "--auto", "--allow-active", "--json")
        assert _wait(lambda: _sleepers(seconds), 60) is not None, "the test never started"
        sent = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        exited = time.monotonic() - sent
        clean = _wait(lambda: not _sleepers(seconds), 10)
    finally:
        fleet.set_tool("gpu001", "all_reduce_perf", standins.node()["all_reduce_perf"])
    assert clean is not None, f"the test still runs on the node after {sig.name}"
    print(f"{sig.name}: diag exited {exited:.1f}s after, the node clean by {exited + clean:.1f}s")
    assert proc.returncode == (130 if sig == signal.SIGINT else 128 + sig), (proc.returncode, err)
    assert "ended the running test(s)" in err and "nccl-node on gpu001" in err, err
    assert "diag run --resume" in err, err
    assert "Traceback" not in err


def test_a_hung_test_fails_its_level_and_the_node_stays_drained(
        fleet: sshfleet.SSHFleet, tmp_path: Path) -> None:
    seconds = random.randint(100000, 999999)
    fleet.set_tool("gpu001", "all_reduce_perf", _stubborn(seconds))
    try:
        start = time.monotonic()
        proc = _accept(fleet, tmp_path, "--auto", "--allow-active", "--json",
                       "--param", "nccl-node.limit_s=3")
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - start
        clean = _wait(lambda: not _sleepers(seconds), 10)
    finally:
        fleet.set_tool("gpu001", "all_reduce_perf", standins.node()["all_reduce_perf"])
    assert clean is not None, "the hung test still runs on the node"
    row = json.loads(out)["hosts"][0]
    print(row["decision"], proc.returncode, f"{took:.1f}s")
    assert proc.returncode == 3, (proc.returncode, err)  # a host timed out: the documented 3
    assert row["decision"].startswith("stays drained: active-test-ended"), row
    assert "hung: no result in 3 s, killed" in row["decision"], row
    assert took < 40, took


def test_the_limit_scales_with_the_sizes_and_the_model_within_floor_and_cap() -> None:
    from probes import accept_nccl

    a100, h100 = (accept_nccl.limit_s({"gpu_model": m}) for m in ("A100", "H100"))
    assert 120 <= h100 < a100 < 300  # minutes, not the 20 of before; a slower floor waits longer
    assert accept_nccl.limit_s({}) == a100  # the model unknown: the slowest floor
    slow = {"levels": {"nccl-node": {"limit_startup_s": {"value": 5000, "source": "t"}}}}
    assert accept_nccl.limit_s({"criteria": slow}) == 1200  # the cap
    fast = {"levels": {"nccl-node": {"limit_margin": {"value": 0.1, "source": "t"}}}}
    assert accept_nccl.limit_s({"criteria": fast}) == 120  # the floor


def test_the_decision_is_what_the_resume_really_did_on_each_node(
        fleet: sshfleet.SSHFleet) -> None:
    """RESUME run over SSH: on gpu001 scontrol's update fails (exit 127, as where scontrol is
    not installed), on gpu002 it works. The report says so per node (issue 29 item 15: it said
    "resume confirmed" for every node)."""
    from assistant.runbook.acceptreport import decisions
    from assistant.runbook.actions import transport_runner
    from assistant.runbook.engine import Walk
    from assistant.runbook.library import get_runbook
    from assistant.runbook.provider import FleetProvider

    broken = standins.scontrol().replace(
        '  *) echo "scontrol stand-in', '  update*) echo "sh: 1: scontrol: not found" >&2; '
        'exit 127 ;;\n  *) echo "scontrol stand-in')
    works = standins.scontrol().replace('  *) echo "scontrol stand-in',
                                        '  update*) exit 0 ;;\n  *) echo "scontrol stand-in')
    fleet.set_tool("gpu001", "scontrol", broken)
    fleet.set_tool("gpu002", "scontrol", works)
    transport = fleet.transport()
    try:
        provider = FleetProvider(transport, attrs={n: {"gpu_model": "A100"} for n in NODES},
                                 params=no_test_processes({"ib-loopback": {"rdma": False}}),
                                 deadline=120.0)
        walk = Walk(get_runbook("acceptance"), tuple(NODES), provider,
                    answers={"want-l0": "no", "want-l1": "no", "want-l2": "yes",
                             "want-l3": "no", "want-l4": "no"},
                    confirm=lambda node, hosts: True, run_action=transport_runner(transport))
        assert walk.run() == "concluded"
    finally:
        transport.close()
        for name in NODES:
            fleet.set_tool(name, "scontrol", standins.scontrol())
    said = decisions(walk)
    assert said["gpu001"].startswith("passed; resume FAILED, stays drained: exit 127"), said
    assert "scontrol: not found" in said["gpu001"], said
    assert said["gpu002"] == "resume confirmed", said


def test_a_slurm_state_that_cannot_be_read_is_not_called_busy(fleet: sshfleet.SSHFleet) -> None:
    from assistant.runbook.acceptreport import decisions
    from assistant.runbook.engine import Walk
    from assistant.runbook.library import get_runbook
    from assistant.runbook.provider import FleetProvider

    fleet.set_tool("gpu001", "scontrol", "echo 'slurm_load_node error: Unable to contact slurm "
                                         "controller (connect failure)' >&2; exit 1")
    transport = fleet.transport()
    try:
        provider = FleetProvider(transport, attrs={n: {"gpu_model": "A100"} for n in NODES},
                                 params=no_test_processes({"ib-loopback": {"rdma": False}}),
                                 deadline=120.0)
        walk = Walk(get_runbook("acceptance"), ("gpu001",), provider,
                    answers={"want-l0": "no", "want-l1": "no", "want-l2": "yes",
                             "want-l3": "no", "want-l4": "no"},
                    confirm=lambda node, hosts: True, run_action=lambda c, h: {})
        assert walk.run() == "concluded"
    finally:
        transport.close()
        fleet.set_tool("gpu001", "scontrol", standins.scontrol())
    said = decisions(walk)["gpu001"]
    assert said.startswith("stays drained: active-test-refused"), said
    assert "state-unknown: cannot read the node's Slurm state: slurm_load_node error" in said
    assert "busy" not in said, said
