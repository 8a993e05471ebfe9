"""A sampling probe run round after round: the soak of an acceptance walk and ``diag watch``.

One round is one ordinary collection (a read-only script per host, fanned out). Rounds repeat
every ``interval_s`` until ``duration_s`` has passed since the first sample; each round is
announced as a ``SampleTaken`` event (the store records it at once, the CLI and TUI show it),
and the hosts' samples are summarised by the probe at the end and judged like any probe's
facts. Samples recorded by an earlier, interrupted run (``provider.prior_samples``) count: the
run resumes where they stop and ends when the original duration is over.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from probes.base import Context, Probe
from probes.criteria import merged
from probes.model import HostResult, ProbeOutcome

from . import events as ev


class Sampler(Protocol):
    """What a sampled run needs of its provider (``provider.FleetProvider`` is one): a round
    collected on every host, the rounds judged at the end, and the cancel that stops it."""

    cancel: threading.Event

    def collect(self, probe: Probe, hosts: Sequence[str], ctx: Context,
                emit: Callable[[ev.Event], None]) -> dict[str, HostResult]: ...

    def judge(self, probe: Probe, outcome: ProbeOutcome, ctx: Context) -> ProbeOutcome: ...


def plan(probe: str, params: dict[str, Any]) -> tuple[float, float]:
    """(duration_s, interval_s) from the params, else the criteria's defaults."""
    crit = merged(params.get("criteria"))
    duration = float(params.get("duration_s") or crit.get(probe, "duration_s").value)
    interval = float(params.get("interval_s") or crit.get(probe, "interval_s").value)
    return max(0.0, duration), max(0.05, interval)


def run_sampled(provider: Sampler, probe: Probe, hosts: Sequence[str], ctx: Context,
                emit: Callable[[ev.Event], None], clock: Callable[[], float] = time.time,
                ) -> ProbeOutcome:
    duration, interval = plan(probe.name, dict(ctx.params))
    prior: dict[str, list[dict[str, Any]]] = (getattr(provider, "prior_samples", {}) or {}
                                               ).get(probe.name, {})
    samples = {h: list(prior.get(h, [])) for h in hosts}
    stamps = [s["ts"] for ss in samples.values() for s in ss]
    start = min(stamps) if stamps else clock()
    seq = 1 + max((s["seq"] for ss in samples.values() for s in ss), default=-1)
    once = dataclasses.replace(probe, figures=None, summarize=None)
    while not provider.cancel.is_set():
        began = clock()
        if stamps and began > start + duration:
            break  # resumed after the soak's end: judge what was recorded
        collected = provider.collect(once, hosts, ctx, emit)
        record = {h: {"seq": seq, "ts": began, "state": r.state, "reason": r.reason,
                      "counters": r.facts.get("counters") if r.state == "ok" else None,
                      "missing": r.facts.get("missing") or [],
                      "xid_lines": r.facts.get("xid_lines") or []}
                  for h, r in collected.items()}
        for host, sample in record.items():
            samples[host].append(sample)
        emit(ev.SampleTaken(probe.name, seq, began, record))
        seq += 1
        if began + interval > start + duration:
            break
        if provider.cancel.wait(max(0.0, began + interval - clock())):
            break
    assert probe.summarize is not None
    outcome = ProbeOutcome(probe.name)
    for host in hosts:
        mine = samples[host]
        if any(s["state"] == "ok" for s in mine):
            facts = probe.summarize(mine)
            if probe.figures is not None:
                facts["figures"] = probe.figures(host, facts, ctx)
                emit(ev.FiguresReady(probe.name, host, tuple(facts["figures"])))
            outcome.hosts[host] = HostResult(host, "ok", facts)
        else:
            last = mine[-1] if mine else {"state": "cancelled", "reason": "no sample taken"}
            outcome.hosts[host] = HostResult(host, last["state"], reason=last["reason"])
    return provider.judge(probe, outcome, ctx)
