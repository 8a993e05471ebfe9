"""The probe worker process (assistant.probeworker) over the shared loopback sshd fleet.

The TUI runs its probes there so that the fan-out's threads never hold its event loop's GIL:
the probe must really run in another process, its events and results must arrive, and a
worker that dies mid-step must end the step with an error that names it — never a hang.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from assistant.probeworker import ProbeWorker, WorkerDied
from assistant.runbook import events as ev
from assistant.walks import FleetOptions
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import DEAD, HEALTHY, SLOW


def _worker(fleet: sshfleet.SSHFleet, hosts: list[str]) -> ProbeWorker:
    options = FleetOptions(inventory=str(fleet.inventory), hosts=",".join({*hosts, SLOW}),
                           connect_timeout=2.0, timeout=5.0, deadline=30.0)
    target = options.open()
    worker = options.worker(target)
    assert worker is not None, "an SSH target gets a worker"
    return worker


def test_a_probe_step_runs_in_the_worker_process(fleet: sshfleet.SSHFleet) -> None:
    hosts = [HEALTHY[0], HEALTHY[1], DEAD]
    worker = _worker(fleet, hosts)
    events: list[ev.Event] = []
    try:
        provider = worker.provider()
        outcomes = provider.run_probes(["gpu", "versions"], hosts, {}, events.append)
        first_pid = worker.pid
        assert first_pid is not None and first_pid != os.getpid()
        assert [o.probe for o in outcomes] == ["gpu", "versions"]
        for outcome in outcomes:
            assert outcome.hosts[DEAD].state == "unreachable"
            assert outcome.hosts[DEAD].phase == "connect"
            for host in hosts[:2]:  # logged in and ran: ok, or the fake tools' odd output
                assert outcome.hosts[host].state in ("ok", "parse-error"), \
                    outcome.hosts[host].reason
        # the events streamed back to this process, one ProbeFinished per host and probe
        finished = sorted((e.probe, e.host) for e in events if isinstance(e, ev.ProbeFinished))
        assert finished == sorted((p, h) for p in ("gpu", "versions") for h in hosts)
        assert provider.raw[("gpu", HEALTHY[0])]  # the raw output came back for the record
        # ...with the store's rows for every run, made in the worker: the ones the recorder
        # would have made here from the same result and output
        from assistant.store.prepared import prepare_run

        assert sorted(provider.prepared) == finished
        for outcome in outcomes:
            for host, result in outcome.hosts.items():
                assert provider.prepared[(outcome.probe, host)] == prepare_run(
                    result.to_dict(), provider.raw.get((outcome.probe, host)))
        # the same worker serves the next step (its SSH connections are kept), and a cancel
        # reaches its fan-out: SLOW's 20-second nvidia-smi ends "cancelled" at once
        cancel = threading.Event()
        provider.cancel = cancel

        def cancel_after_first(event: ev.Event) -> None:
            if isinstance(event, ev.ProbeFinished) and event.host == HEALTHY[0]:
                cancel.set()

        started = time.monotonic()
        outcome = provider.run_probe("gpu", [HEALTHY[0], SLOW], {}, cancel_after_first)
        assert time.monotonic() - started < 15
        assert outcome.hosts[SLOW].state == "cancelled"
        assert worker.pid == first_pid
    finally:
        worker.close(wait=True)


def test_a_worker_killed_mid_step_gives_the_hosts_an_error_not_a_hang(
        fleet: sshfleet.SSHFleet) -> None:
    hosts = [HEALTHY[2], SLOW]  # SLOW's nvidia-smi sleeps 20 s: the step is still running
    worker = _worker(fleet, hosts)
    events: list[ev.Event] = []

    def emit(event: ev.Event) -> None:
        events.append(event)
        if isinstance(event, ev.ProbeFinished) and event.host == HEALTHY[2]:
            assert worker.pid is not None
            os.kill(worker.pid, signal.SIGKILL)  # one host answered, the other has not

    try:
        provider = worker.provider(threading.Event())
        started = time.monotonic()
        with pytest.raises(WorkerDied, match=r"probe worker .* stopped .*signal 9"):
            provider.run_probes(["gpu"], hosts, {}, emit)
        assert time.monotonic() - started < 15  # the dead worker was noticed, not waited out
        slow = [e for e in events if isinstance(e, ev.ProbeFinished) and e.host == SLOW]
        assert len(slow) == 1 and slow[0].state == "cancelled"
        assert "probe worker" in slow[0].reason and "r runs it again" in slow[0].reason
        # the next step starts a fresh worker
        outcome = provider.run_probe("versions", hosts[:1], {}, lambda _e: None)
        assert outcome.hosts[HEALTHY[2]].state in ("ok", "parse-error")
    finally:
        worker.close(wait=True)
