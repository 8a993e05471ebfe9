"""The evidence sweep run over the fleet: one round trip per host, every component judged.

The components' scripts go out as one (probes/sweep.py); each host's answer is split back into
one output per component and each is parsed, checked and matched against the fault catalogue
exactly as if the component had run alone, so the sweep's findings are the probes' own. A
component that hit the sweep's time limit is that component's ``timeout`` after login (its
partial output names the section that hung), never the host's: the others still count. A host
that did not answer at all fails once, in the ``sweep`` outcome, not once per component.

What each component printed is kept (``provider.swept``): a later runbook step asking for the
same probe with the same script on the same host reuses it instead of running it again.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from assistant.fleet.fanout import fan_out
from assistant.fleet.transport import CommandResult
from probes import hangstate, sweep
from probes.base import Context, Probe, get_probe
from probes.catalog import job_sweep_components, load_catalog
from probes.faults import load_faults
from probes.host import saturation
from probes.model import HostResult, ProbeOutcome

from . import events as ev

NAME = "sweep"
# The sweep's own margin over the components' limit: the host still has to print what they
# wrote and end the ones that hung.
_TRANSPORT_MARGIN_S = 15.0


def plan(components: Sequence[str], hosts: Sequence[str],
         params: Mapping[str, Mapping[str, Any]], operator: Mapping[str, Mapping[str, Any]]
         ) -> list[tuple[Probe, dict[str, Any], str]]:
    """(probe, its params, its script) for every component that can be swept: read-only,
    on the nodes, one script for every host, available in this build."""
    planned = []
    for name in components:
        try:
            probe = get_probe(name)
        except KeyError:
            continue  # not in this build: a step that asks for it says so
        if probe.active or probe.runs_on != "node" or probe.per_host or probe.summarize:
            continue
        merged = {"peers": list(hosts), **params.get(name, {}), **operator.get(name, {})}
        text = probe.command(merged)
        if text:
            planned.append((probe, merged, text))
    return planned


def run_sweep(provider: Any, components: Sequence[str], hosts: Sequence[str],
              params: Mapping[str, Mapping[str, Any]],
              emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
    """The sweep over *hosts*: its own outcome (how each host answered), then one outcome per
    component, judged."""
    planned = plan(components, hosts, params, provider.params)
    limit, timeout, deadline = _bounds(provider)
    header = "# diag probe: sweep (read-only)\n"
    catalog = load_catalog().probes
    first = {p.name for p, _, _ in planned if p.name in catalog and catalog[p.name].sweep_first}
    command = header + sweep.script([(p.name, text) for p, _, text in planned], limit, first)
    whole: dict[str, HostResult] = {}
    per_component: dict[str, dict[str, HostResult]] = {p.name: {} for p, _, _ in planned}
    lock = threading.Lock()
    for host in hosts:
        emit(ev.ProbeStarted(NAME, host))

    def finished(result: CommandResult) -> None:
        with lock:
            if result.host in whole:  # a straggler after the deadline changes nothing
                return
            whole[result.host] = _host(provider, result, planned, per_component, limit)
        state = whole[result.host]
        emit(ev.ProbeFinished(NAME, result.host, state.state, state.reason, result.duration_s))

    # The scheduler's view of a Slurm job's nodes is read once, here, while the nodes answer.
    readings: list[ProbeOutcome] = []
    failed: list[BaseException] = []

    def read() -> None:
        try:
            readings.extend(_job_readings(provider, hosts, params, emit))
        except BaseException as exc:  # raised again in the walk's thread, after the fan-out
            failed.append(exc)

    reader = threading.Thread(target=read, name="diag-sweep-scheduler", daemon=True)
    reader.start()
    dead = [h for h in hosts if h in provider.dead]
    for host in dead:
        finished(provider._skipped(provider.dead[host]))
    live = [h for h in hosts if h not in provider.dead]
    results = fan_out(provider.transport, live, command, label=NAME,
                      concurrency=provider.concurrency, timeout=timeout,
                      deadline=deadline, cancel=provider.cancel,
                      on_result=finished, drop_read_output=True)
    for host in live:
        finished(results[host])
    outcomes = [ProbeOutcome(NAME, {h: whole[h] for h in hosts})]
    for probe, merged, _ in planned:
        ctx = Context(provider.thresholds, provider.attrs, merged)
        outcome = ProbeOutcome(probe.name, {h: per_component[probe.name][h] for h in hosts
                                            if h in per_component[probe.name]})
        outcomes.append(provider.judge(probe, outcome, ctx))
    reader.join(deadline)
    if failed:
        raise failed[0]
    return outcomes + readings


def _job_readings(provider: Any, hosts: Sequence[str],
                  params: Mapping[str, Mapping[str, Any]],
                  emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
    """In a Slurm job's walk (the scheduler's parameters name the job), each ``sweep: job``
    probe read once on this machine, keeping only host-level faults of the walk's own hosts:
    the scheduler's queue (limits, priority, reservations) and other nodes are queue-idle's
    business, not evidence against this job's nodes. The reading is kept for the steps that
    ask for the same probe (queue-idle's), as the nodes' components are."""
    outcomes = []
    scope = {sig.id: sig.scope for sig in load_faults().signatures.values()}
    walk = set(hosts)
    catalog = load_catalog()
    for name in job_sweep_components(catalog):
        merged = {**params.get(name, {}), **provider.params.get(name, {})}
        if not merged.get("job"):
            continue
        try:
            probe = get_probe(name)
        except KeyError:
            continue
        ctx = Context(provider.thresholds, provider.attrs, {"peers": list(hosts), **merged})
        script = probe.command(ctx.params)
        collected = provider.collect(probe, hosts, ctx, emit)
        for host, result in collected.items():
            if script and result.state == "ok":
                provider.swept[(name, host)] = (script, result)
        outcome = provider.judge(probe, ProbeOutcome(name, collected), ctx)
        kept = [f for f in outcome.findings
                if (scope.get(f.code) == "host" and walk & set(f.hosts)
                    and f.code not in catalog.probes[name].sweep_leaves_out)
                or f.code == "not-measured"]
        outcomes.append(ProbeOutcome(name, outcome.hosts, kept))
    return outcomes


def _bounds(provider: Any) -> tuple[int, float, float]:
    """(each component's limit, the sweep's command time-out, its deadline), inside what the
    operator allowed: a component gets no longer than a probe run alone would (``--timeout``),
    and the whole sweep ends by the step deadline (``--deadline``), so a hung host costs the
    walk one deadline here, not the sweep's own default on top of the operator's."""
    limit = float(provider.thresholds.get("sweep_limit_s", 25))
    if provider.timeout:
        limit = min(limit, float(provider.timeout))
    margin = min(_TRANSPORT_MARGIN_S, provider.deadline / 3)
    limit = max(1.0, min(limit, provider.deadline - margin))
    timeout = min(limit + margin, provider.deadline)
    return int(limit), timeout, provider.deadline


def _host(provider: Any, result: CommandResult, planned: Sequence[tuple[Probe, Any, str]],
          per_component: dict[str, dict[str, HostResult]], limit: int) -> HostResult:
    """One host's answer: the sweep's own result, and each component's (kept for reuse)."""
    if result.connect_failed:
        provider.dead.setdefault(result.host, result)
    if result.state == "timeout" and result.phase == "command":
        # diag's own time-out for the whole sweep (its components' limit plus a margin) came
        # first: read by what its processes were doing, as a step's command is
        timed_out: HostResult = provider._timed_out(NAME, result, result.reason)
        return timed_out
    if result.state != "ok":
        return HostResult(result.host, result.state, reason=result.reason,
                          duration_s=result.duration_s, phase=result.phase)
    started = time.monotonic()
    parts = sweep.split(result.stdout)
    for probe, _, _ in planned:
        part = parts.get(probe.name)
        if part is None:
            component = CommandResult(result.host, "ok", stdout="", exit_status=None,
                                      duration_s=result.duration_s)
        elif part.timed_out:
            component = CommandResult(
                result.host, "timeout", stdout=part.text, phase="command",
                duration_s=result.duration_s,
                reason=f"did not finish within the sweep's {limit} s")
        else:
            component = CommandResult(result.host, "ok", stdout=part.text,
                                      exit_status=part.rc, duration_s=result.duration_s)
        per_component[probe.name][result.host] = provider._host_result(
            probe.name, probe.parse, component)
    _read_hangs(provider, result.host, parts, per_component, limit)
    for probe, _, text in planned:
        provider.swept[(probe.name, result.host)] = (text, per_component[probe.name][result.host])
    provider.raw[(NAME, result.host)] = "".join(
        f"{name}: {'timed out' if part.timed_out else f'exit {part.rc}'}\n"
        for name, part in parts.items())
    facts = {"components": [p.name for p, _, _ in planned if p.name in parts],
             "serial": "=== diag:probe-serial" in result.stdout[:200_000],
             "duration_s": round(result.duration_s, 3),
             "parse_s": round(time.monotonic() - started, 4)}
    return HostResult(result.host, "ok", facts, duration_s=result.duration_s)


def _read_hangs(provider: Any, host: str, parts: Mapping[str, sweep.Part],
                per_component: dict[str, dict[str, HostResult]], limit: int) -> None:
    """Each component that ran out of time on *host*, read by what its processes were doing
    (probes/hangstate.py): blocked in the kernel stays the catalog's hang, with the process
    named; only slow on a host whose CPUs were saturated becomes "not measured"."""
    thresholds = provider.thresholds
    blocked_states = hangstate.blocked_states(thresholds)
    load = per_component.get("host", {}).get(host)
    if load is not None and load.state == "ok":
        saturated = saturation(load.facts, thresholds) is not None
    else:  # the load reading itself (a second of /proc, alone) did not finish: slow, unless
        # it was blocked in the kernel
        saturated = "host" in parts and parts["host"].timed_out and hangstate.judge(
            parts["host"].stuck, blocked_states, True)[0] == "starved"
    if saturated:
        provider.saturated.add(host)
    for name, part in parts.items():
        result = per_component.get(name, {}).get(host)
        if not part.timed_out or result is None or result.state != "timeout":
            continue
        rows = part.stuck
        given, needs = float(limit), float(thresholds.get("sweep_limit_s", 25))
        verdict, shown = hangstate.judge(rows, blocked_states, saturated, given, needs)
        per_component[name][host] = dataclasses.replace(
            result, reason=result.reason + hangstate.explain(verdict, shown, host, given),
            facts=hangstate.facts(verdict, shown, rows))
