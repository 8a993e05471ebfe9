"""A walk's hosts sharded over worker processes (``--workers``, assistant/probeworker/shards.py),
over real loopback sshd: the same verdicts as one process, and a worker that dies costs its own
hosts that step, said so, never the walk.

Every catalogued example is also walked sharded, from checkpoint-stall
(tests/fleet/test_signature_walks_ssh_checkpoint.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assistant.probeworker.shards import ShardedProvider, auto_workers
from assistant.runbook import events as ev
from assistant.walks import FleetOptions
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import DEAD, HEALTHY, SLOW
from tests.fleet.test_signature_walks_ssh import walk_over_ssh
from tests.test_signature_walks import RUNBOOKS

pytestmark = pytest.mark.ssh


def _verdicts(doc: dict[str, Any]) -> tuple[Any, ...]:
    findings = sorted((f["code"], f["severity"], tuple(f["hosts"])) for f in doc["findings"])
    conclusion = doc["conclusion"] and (doc["conclusion"].get("cause"),
                                        tuple(doc["conclusion"].get("hosts") or ()))
    return tuple(findings), conclusion, doc["status"]


def test_a_sharded_walk_finds_what_one_process_finds(
        replay_fleet: tuple[sshfleet.SSHFleet, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = walk_over_ssh(0, RUNBOOKS[0], replay_fleet, tmp_path / "one", capsys, workers=1)
    two = walk_over_ssh(0, RUNBOOKS[0], replay_fleet, tmp_path / "two", capsys, workers=2)
    assert _verdicts(two) == _verdicts(one)
    assert one["findings"]  # the fleet's faults were found at all
    # a fleet check (the catalogue's drift from the majority) needs every shard's hosts
    assert {h: s["state"] for h, s in two["hosts"].items()} == \
        {h: s["state"] for h, s in one["hosts"].items()}


@contextlib.contextmanager
def _sharded(fleet: sshfleet.SSHFleet, hosts: list[str]) -> Iterator[ShardedProvider]:
    """A two-worker sharded provider over *hosts* of the shared fleet, ended with its target."""
    options = FleetOptions(inventory=str(fleet.inventory), hosts=",".join(hosts), workers=2,
                           connect_timeout=20, timeout=60, deadline=90)
    target = options.open()
    try:
        provider = options.provider(target)
        assert isinstance(provider, ShardedProvider)
        yield provider
    finally:
        target.close()


def test_a_dead_worker_costs_its_hosts_that_step_and_not_the_walk(
        fleet: sshfleet.SSHFleet) -> None:
    hosts = [*HEALTHY[:3], SLOW]  # dealt round-robin: SLOW (nvidia-smi sleeps) with HEALTHY[1]
    with _sharded(fleet, hosts) as provider:
        assert provider.shards(hosts) == [[hosts[0], hosts[2]], [hosts[1], SLOW]]
        answered: set[str] = set()
        others_done = threading.Event()

        def emit(event: ev.Event) -> None:
            if isinstance(event, ev.ProbeFinished):
                answered.add(event.host)
                if answered >= set(hosts[:3]):
                    others_done.set()

        result: list[Any] = []
        step = threading.Thread(target=lambda: result.append(
            provider.run_probe("gpu", hosts, {}, emit)))
        step.start()
        assert others_done.wait(60)
        doomed = provider.workers[1]
        assert doomed.pid is not None
        os.kill(doomed.pid, signal.SIGKILL)  # while SLOW's nvidia-smi still sleeps
        step.join(60)
        outcome = result[0]
        # the other shard's answers are kept (these test hosts' nvidia-smi is no real one);
        # the dead worker's hosts are not measured, saying why (its answers died with it)
        assert all(outcome.hosts[h].state in ("ok", "parse-error") for h in hosts[0:3:2])
        for host in (hosts[1], SLOW):
            assert outcome.hosts[host].state == "cancelled"
            assert "killed by signal 9" in outcome.hosts[host].reason
        # the next step's shard is served by a new worker
        again = provider.run_probe("versions", hosts[:2], {}, lambda _e: None)
        assert [again.hosts[h].state for h in hosts[:2]] == ["ok", "ok"]
        assert doomed.pid is not None
    assert all(not w._process or not w._process.is_alive() for w in provider.workers)


def test_auto_keeps_small_fleets_in_one_process() -> None:
    assert auto_workers(63, cores=8) == 1
    assert auto_workers(128, cores=2) == 2
    assert auto_workers(10_000, cores=4) == 4
    assert auto_workers(200, cores=16) == 3



def test_the_tuis_session_pool_shards_every_walk_and_ends_with_the_session(
        fleet: sshfleet.SSHFleet) -> None:
    from assistant.tui.context import DiagContext

    hosts = HEALTHY[:4]
    ctx = DiagContext(FleetOptions(inventory=str(fleet.inventory), hosts=",".join(hosts),
                                   workers=2, connect_timeout=20))
    try:
        first = ctx.provider(threading.Event())
        assert isinstance(first, ShardedProvider)
        outcome = first.run_probe("versions", hosts, {}, lambda _e: None)
        assert [outcome.hosts[h].state for h in hosts] == ["ok"] * 4
        pids = [w.pid for w in first.workers]
        second = ctx.provider(threading.Event())  # the next walk: the same processes
        second.run_probe("versions", hosts, {}, lambda _e: None)
        assert [w.pid for w in second.workers] == pids and None not in pids
    finally:
        ctx.close()
    # the session closes its workers on threads of their own (a UI's exit does not wait):
    # each is gone within their goodbye's few seconds
    processes = [w._process for w in first.workers if w._process is not None]
    deadline = time.monotonic() + 15
    while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(p.is_alive() for p in processes)


def test_a_sharded_walk_remembers_hosts_that_let_nobody_in_and_retries_them(
        fleet: sshfleet.SSHFleet) -> None:
    hosts = [HEALTHY[0], DEAD, HEALTHY[1]]
    with _sharded(fleet, hosts) as provider:
        outcome = provider.run_probe("versions", hosts, {}, lambda _e: None)
        assert outcome.hosts[DEAD].state == "unreachable"
        assert list(provider.dead) == [DEAD]  # the others answered
        assert provider.retry_dead(timeout=10) == []  # still refused: still skipped
        assert list(provider.dead) == [DEAD]
