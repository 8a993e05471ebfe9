"""Each host's output of a step is parsed once (issue 28: the client's CPU per host-probe run
is what limits a fleet-sized walk). The step's fan-out reports every host as it answers, and
the provider's pass over the hosts after it (for those the deadline ended) parsed every one of
them a second time: 1.32 -> 0.72 ms of CPU per host-probe run on an in-memory hang walk over
1,000 hosts (bench/walkmem.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from assistant.fleet.transport import CommandResult
from assistant.runbook.engine import Walk
from assistant.runbook.library import get_runbook
from assistant.runbook.provider import FleetProvider
from bench.recording import MemoryTransport
from probes.model import HostResult

HOSTS = [f"node{i:02d}" for i in range(1, 7)]


class CountingProvider(FleetProvider):
    """A FleetProvider that counts how often each (probe, host) output is read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: Counter[tuple[str, str]] = Counter()

    def _host_result(self, name: str, parse: Callable[[str], dict[str, Any]],
                     result: CommandResult) -> HostResult:
        self.reads[(name, result.host)] += 1
        return super()._host_result(name, parse, result)


def test_every_output_of_a_step_is_parsed_once() -> None:
    provider = CountingProvider(MemoryTransport(distinct=True), concurrency=4, deadline=120)
    for probe in ("versions", "gpu", "network", "nccl"):
        outcome = provider.run_probe(probe, HOSTS, {}, lambda event: None)
        assert all(r.state == "ok" for r in outcome.hosts.values())
    assert len(provider.reads) == 4 * len(HOSTS) and set(provider.reads.values()) == {1}


def test_a_walk_reads_each_output_once_per_step() -> None:
    # the sweep reads its components once; a step of a probe the sweep read uses the sweep's
    # facts (nothing read again), and a probe the sweep does not run (ranks) is read once
    provider = CountingProvider(MemoryTransport(distinct=True), concurrency=4, deadline=120)
    walk = Walk(get_runbook("hang"), HOSTS, provider)
    walk.run()
    steps = {s.node for s in walk.steps}
    assert {"check-ranks", "check-gpu", "check-network"} <= steps
    assert {provider.reads[("ranks", h)] for h in HOSTS} == {1}
    assert {provider.reads[(probe, h)] for probe in ("gpu", "network") for h in HOSTS} == {1}
    assert set(provider.reads.values()) == {1}


def test_a_host_the_deadline_ended_is_still_read_once() -> None:
    provider = CountingProvider(SlowTransport(), concurrency=len(HOSTS), deadline=1.0)
    outcome = provider.run_probe("versions", HOSTS, {}, lambda event: None)
    assert outcome.hosts["node01"].state == "ok"
    assert outcome.hosts["node02"].state == "timeout"
    assert set(provider.reads.values()) == {1} and len(provider.reads) == len(HOSTS)


class SlowTransport(MemoryTransport):
    """node01 answers at once; the others outlive the step's deadline."""

    def __init__(self) -> None:
        super().__init__(distinct=False)

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: Any = None) -> CommandResult:
        if host != "node01" and cancel is not None:
            cancel.wait(5.0)
        return super().run(host, command, timeout=timeout, label=label, cancel=cancel)
