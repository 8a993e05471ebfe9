"""A walk's hosts sharded over worker processes: the fan-out on every core (``--workers``).

One Python process runs paramiko's protocol code, the parsers and the checks of every host
under one GIL: at a few hundred hosts diag's own CPU is the limit, and the login node's other
cores sit idle (docs/scaling.md). Here each of N ``ProbeWorker`` processes owns a fixed shard of
the hosts (their SSH connections, reused across the walk's steps), and runs for them what is
per host: the fan-out, the parse, the per-host checks and the store rows of each answer. What
compares hosts stays in the walk's process, over every shard's answers at once: the probes'
fleet checks, the fault catalogue with its majorities, where findings gather, and the recording.

A worker that dies costs its own hosts that step, each one "cancelled" with the reason said
(not measured, never the host's fault), and never the walk: its shard is served by a new
worker from the next step on. A probe that runs on diag's machine (``runs_on: client``) and
reads for every host at once goes to one worker, whole.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from assistant.fleet.transport import let_nobody_in
from assistant.runbook import events as ev
from assistant.runbook.outputs import Outputs
from probes.model import HostResult, ProbeOutcome

from . import ProbeWorker, WorkerDied

# Below this many hosts per worker a shard's process is not worth its start (~0.5 s of CPU to
# import diag and open the target): ``--workers auto`` keeps such walks in one process.
MIN_HOSTS_PER_WORKER = 64


def auto_workers(hosts: int, cores: int | None = None) -> int:
    """``--workers auto``: one worker per core, as many as the fleet fills with at least
    ``MIN_HOSTS_PER_WORKER`` hosts each; 1 (no worker, in-process) below that."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
            os.cpu_count() or 1
    return max(1, min(cores, hosts // MIN_HOSTS_PER_WORKER))


def pool_size(options: Any, hosts: int) -> int:
    """How many workers *options* (``FleetOptions.workers``: N, or None for auto) give a walk
    of *hosts* hosts."""
    return max(1, min(options.workers if options.workers is not None else auto_workers(hosts),
                      hosts))


def open_sharded(options: Any, target: Any, cancel: threading.Event | None = None
                 ) -> ShardedProvider | None:
    """The walk's sharded provider for *options* (``FleetOptions``) over *target*, its workers
    started (they import diag and open the target side by side) and ended with the target;
    None when the walk stays in one process (one worker, or a fleet too small for auto)."""
    from probes.base import load_thresholds

    count = pool_size(options, len(target.hosts))
    if count <= 1:
        return None
    thresholds = options.thresholds or load_thresholds()
    args = {"thresholds": thresholds, "params": options.probe_params(target),
            "concurrency": max(1, options.concurrency // count), "timeout": options.timeout,
            "deadline": options.deadline}
    workers = [ProbeWorker(options.target_args(), args, target.host_keys) for _ in range(count)]
    for worker in workers:
        worker.start()
    provider = ShardedProvider(workers, cancel or threading.Event(), thresholds,
                               args["params"], target.attrs)
    target.on_close.append(provider.close)
    return provider


class ShardedProvider:
    """The engine's probe provider over N shard workers. Offers what callers read of a
    ``FleetProvider``: ``raw``, ``prepared``, ``thresholds``, ``cancel``, ``prior_samples``,
    ``run_sweep``, ``run_probe(s)``; ``close`` ends the workers."""

    def __init__(self, workers: Sequence[ProbeWorker], cancel: threading.Event,
                 thresholds: Mapping[str, Any] | None,
                 params: Mapping[str, Mapping[str, Any]],
                 attrs: Mapping[str, Mapping[str, Any]]) -> None:
        from probes.base import load_thresholds

        self.workers = list(workers)
        self.cancel = cancel
        self.thresholds = dict(thresholds or load_thresholds())
        self.params = {k: dict(v) for k, v in params.items()}  # target's, --logs, --param
        self.attrs = {h: dict(a) for h, a in attrs.items()}
        self.raw = Outputs()
        self.prepared: dict[tuple[str, str], Any] = {}  # store rows; the recorder takes them
        self.prior_samples: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self._shard_of: dict[str, int] = {}  # a host stays with the worker that holds its line
        self._emit_lock = threading.Lock()
        # Hosts that did not let diag in (their workers skip them until retried), as
        # FleetProvider.dead: `diag run` retries them once at the walk's end.
        self.dead: dict[str, str] = {}

    # --- the provider's interface ---------------------------------------------------------

    def run_probes(self, probes: Sequence[str], hosts: Sequence[str],
                   params: Mapping[str, Mapping[str, Any]],
                   emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        from assistant.runbook.provider import run_in_order

        return run_in_order(self.run_probe, probes, hosts, params, emit)

    def run_sweep(self, components: Sequence[str], hosts: Sequence[str],
                  params: Mapping[str, Mapping[str, Any]],
                  emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        # every shard's components are planned with the walk's peers, not the shard's
        wide = {name: {"peers": list(hosts), **params.get(name, {})} for name in components}

        def one(worker: ProbeWorker, shard: list[str], say: Callable[[ev.Event], None]
                ) -> list[ProbeOutcome]:
            outcomes, raw, prepared = worker.run_sweep(components, shard, wide, say,
                                                       self.cancel, hosts_only=True)
            self._keep(raw, prepared)
            return outcomes

        parts = self._on_shards(hosts, one, emit, "sweep")
        merged = self._note_dead(_merge(parts, hosts))
        for outcome in merged:
            if outcome.probe != "sweep":
                self._judge_fleet(outcome, hosts, wide.get(outcome.probe, {}))
        return merged

    def run_probe(self, name: str, hosts: Sequence[str], params: Mapping[str, Any],
                  emit: Callable[[ev.Event], None]) -> ProbeOutcome:
        prior = {name: self.prior_samples[name]} if name in self.prior_samples else {}
        wide = {"peers": list(hosts), **params}
        if _reads_for_all(name):  # read once on diag's side for every host: one worker, whole
            outcome, raw, prepared = self.workers[0].run_probe(
                name, hosts, wide, self._locked(emit), self.cancel, prior)
            self._keep(raw, prepared)
            return outcome

        def one(worker: ProbeWorker, shard: list[str], say: Callable[[ev.Event], None]
                ) -> list[ProbeOutcome]:
            mine = {h: s for h, s in prior.get(name, {}).items() if h in shard}
            outcome, raw, prepared = worker.run_probe(
                name, shard, wide, say, self.cancel, {name: mine} if mine else {},
                hosts_only=True)
            self._keep(raw, prepared)
            return [outcome]

        merged = self._note_dead(_merge(self._on_shards(hosts, one, emit, name), hosts))[0]
        return self._judge_fleet(merged, hosts, wide)

    def retry_dead(self, timeout: float | None = None) -> list[str]:
        """Every worker tries its unreachable hosts once more; the ones that answer are no
        longer skipped. Returns them."""
        back: list[str] = []
        for index, shard in enumerate(self.shards(list(self.dead))):
            if shard:
                back += self.workers[index].retry_dead(timeout)
        for host in back:
            self.dead.pop(host, None)
        return back

    def close(self) -> None:
        for worker in self.workers:
            worker.close(wait=True)

    # --- internals ------------------------------------------------------------------------

    def shards(self, hosts: Sequence[str]) -> list[list[str]]:
        """*hosts* split over the workers: each host with the worker that first had it (its
        connection lives there), new hosts dealt round-robin."""
        split: list[list[str]] = [[] for _ in self.workers]
        for host in hosts:
            index = self._shard_of.setdefault(host, len(self._shard_of) % len(self.workers))
            split[index].append(host)
        return split

    def _on_shards(self, hosts: Sequence[str],
                   one: Callable[[ProbeWorker, list[str], Callable[[ev.Event], None]],
                                 list[ProbeOutcome]],
                   emit: Callable[[ev.Event], None], label: str) -> list[list[ProbeOutcome]]:
        """*one* on every non-empty shard at once, each on a thread of its own (the workers
        answer over their pipes); a shard whose worker died is its hosts' "cancelled"."""
        say = self._locked(emit)
        results: dict[int, list[ProbeOutcome]] = {}
        failures: dict[int, BaseException] = {}
        split = self.shards(hosts)

        def run(index: int) -> None:
            try:
                results[index] = one(self.workers[index], split[index], say)
            except BaseException as exc:  # raised again below, in the walk's thread
                failures[index] = exc

        threads = [threading.Thread(target=run, args=(i,), name=f"diag-shard-{i}", daemon=True)
                   for i, shard in enumerate(split) if shard]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for index, exc in sorted(failures.items()):
            if not isinstance(exc, WorkerDied):
                raise exc
            why = (f"not measured: diag's worker process for this host's shard stopped "
                   f"({exc.how}) before its answers came back; a new worker serves the next "
                   "step")
            results[index] = [ProbeOutcome(label, {h: HostResult(h, "cancelled", reason=why)
                                                   for h in split[index]})]
        return [results[i] for i in sorted(results)]

    def _note_dead(self, outcomes: list[ProbeOutcome]) -> list[ProbeOutcome]:
        """Remember the hosts that did not let diag in (the transport's rule)."""
        for outcome in outcomes:
            for host, result in outcome.hosts.items():
                if let_nobody_in(result.state, result.phase, result.reason):
                    self.dead.setdefault(host, result.reason)
        return outcomes

    def _locked(self, emit: Callable[[ev.Event], None]) -> Callable[[ev.Event], None]:
        """*emit* called by one shard's thread at a time (the engine's listeners, the
        recorder and a terminal's progress lines, are not written for threads)."""
        def say(event: ev.Event) -> None:
            with self._emit_lock:
                emit(event)
        return say

    def _keep(self, raw: Mapping[tuple[str, str], bytes], prepared: Mapping[Any, Any]) -> None:
        with self._emit_lock:
            self.raw.add_packed(raw)
            self.prepared.update(prepared)

    def _judge_fleet(self, outcome: ProbeOutcome, hosts: Sequence[str],
                     params: Mapping[str, Any]) -> ProbeOutcome:
        from assistant.runbook.judging import judge_fleet
        from probes.base import Context, get_probe

        try:
            probe = get_probe(outcome.probe)
        except KeyError:  # not in this build: its shards said so already
            return outcome
        merged = {"peers": list(hosts), **params, **self.params.get(outcome.probe, {})}
        return judge_fleet(probe, outcome, Context(self.thresholds, self.attrs, merged),
                           self.attrs)


def _reads_for_all(name: str) -> bool:
    """A probe that runs on diag's machine and reads every host from there at once (the
    scheduler's view, placement): sharding it would read the same thing N times."""
    from probes.base import get_probe

    try:
        probe = get_probe(name)
    except KeyError:
        return True  # the worker says it is not available, once
    return probe.runs_on != "node"


def _merge(parts: Sequence[Sequence[ProbeOutcome]], hosts: Sequence[str]
           ) -> list[ProbeOutcome]:
    """The shards' outcomes as one list, probe by probe in the order the shards gave them,
    each probe's hosts in the walk's order. A shard that died gave only its hosts' failure,
    under the step's first probe."""
    order: list[str] = []
    joined: dict[str, ProbeOutcome] = {}
    for outcomes in parts:
        for outcome in outcomes:
            if outcome.probe not in joined:
                order.append(outcome.probe)
                joined[outcome.probe] = ProbeOutcome(outcome.probe, {}, [])
            joined[outcome.probe].hosts.update(outcome.hosts)
            joined[outcome.probe].findings.extend(outcome.findings)
            if outcome.unfolded is not None:
                joined[outcome.probe].unfolded = [*(joined[outcome.probe].unfolded or []),
                                                  *outcome.unfolded]
    place = {h: i for i, h in enumerate(hosts)}
    for outcome in joined.values():
        outcome.hosts = {h: outcome.hosts[h] for h in hosts if h in outcome.hosts}
        # the shards' per-host findings in the walk's host order, as one process gives them
        for findings in (outcome.findings, outcome.unfolded or []):
            findings.sort(key=lambda f: min((place.get(h, len(place)) for h in f.hosts),
                                            default=len(place)))
    return [joined[name] for name in order]
