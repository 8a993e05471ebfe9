"""The monitoring step of a walk: the metric signatures judged over the incident window, as a
probe outcome (probe ``monitoring``) added to the evidence sweep's, so its findings are evidence
like any probe's and are recorded with the sweep step. Nothing here raises for the server's
trouble: it is said in one line (``say``) and the walk goes on with its probes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Protocol

from probes.model import Finding, HostResult, ProbeOutcome

from . import signatures as sigs
from .check import EXPORTERS, host_label
from .client import PromClient, PromError
from .config import PromConfig
from .oscillation import oscillating
from .presence import Presence, presence
from .window import SignalResult, Window, evaluate, summary_series

PROBE = "monitoring"
TRAINING = "training"  # the job's own metrics (prometheus.training in monitoring.yaml)
SERIES_FINDINGS, SERIES_HOSTS = 12, 4  # findings that carry their signal, hosts each
SEVERITY = {"info": "info", "warning": "warning", "error": "error", "critical": "critical"}
NOT_CONFIGURED = ("monitoring: no Prometheus configured (--prometheus URL, $DIAG_PROMETHEUS_URL "
                  "or ~/.config/diag/monitoring.yaml): the walk reads the hosts only")


def clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%H:%M:%S")


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class MonitoringStep:
    """What to read and when: the server, and the incident window (seconds since the epoch;
    *start* None = *since* seconds before *end*, *end* None = now)."""

    config: PromConfig
    since: float = 2 * 3600
    start: float | None = None
    end: float | None = None
    step: float = 15.0
    workers: int = 4
    since_given: bool = False  # --since was given: a job's start does not replace it

    def window(self) -> Window:
        end = self.end if self.end is not None else time.time()
        start = self.start if self.start is not None else end - self.since
        step = max(self.step, (end - start) / 10_000)  # Prometheus' 11,000 points a series
        return Window(start, end, step)

    def run(self, hosts: Sequence[str], say: Callable[[str], None]) -> ProbeOutcome:
        window = self.window()
        outcome = ProbeOutcome(PROBE)
        try:
            with PromClient(self.config) as client:
                labels = self._labels(client, window)
                seen, results, waves = self._read(client, window, labels, hosts)
        except PromError as exc:
            say(f"monitoring: {exc}; the walk goes on with its probes")
            return outcome
        errors = sorted({r.error for r in results if r.error})
        for error in errors[:3]:
            say(f"monitoring: {error}")
        for one in seen:
            line = one.mismatch(hosts)
            if line:
                say(f"monitoring: {line}")
        outcome.findings = findings(results, waves, labels, hosts, window) + stale(seen, window)
        self._attach_series(outcome.findings, results, labels, window, say)
        facts: dict[str, dict[str, Any]] = {h: {"first_abnormal": {}} for h in hosts}
        for r in results:
            for host, ts in r.first_abnormal.items():
                facts.setdefault(host, {"first_abnormal": {}})["first_abnormal"][
                    r.signature.id] = iso(ts)
        for host, values in facts.items():
            values["window"] = {"from": iso(window.start), "to": iso(window.end)}
            outcome.hosts[host] = HostResult(host, "ok", values)
        return outcome

    def _attach_series(self, found: Sequence[Finding], results: Sequence[SignalResult],
                       labels: Mapping[str, str], window: Window,
                       say: Callable[[str], None]) -> None:
        """Each fired signature's signal on its first accused hosts over the window."""
        by_id = {r.signature.id: r for r in results if r.first_abnormal}
        try:
            with PromClient(self.config) as client:
                for finding in [f for f in found if f.code in by_id][:SERIES_FINDINGS]:
                    sig = by_id[finding.code].signature
                    step, series = summary_series(client, sig, window, labels[sig.exporter],
                                                  finding.hosts[:SERIES_HOSTS])
                    finding.evidence["series"] = series
                    finding.evidence["series_step_s"] = round(step, 3)
                    finding.evidence["series_from"] = iso(window.start)
        except PromError as exc:
            say(f"monitoring: the findings' series were not read: {exc}")

    def _labels(self, client: PromClient, window: Window) -> dict[str, str]:
        labels: dict[str, str] = {}
        for name, (marker, _) in EXPORTERS.items():
            label, _count = host_label(client, marker, self.config.host_label.get(name),
                                       at=window.end)
            if label:
                labels[name] = label
        if self._training_names():  # the job's own metrics, named by the site
            labels[TRAINING] = self.config.training.get("host_label", "instance")
        return labels

    def _training_names(self) -> dict[str, str]:
        return {k: v for k, v in self.config.training.items() if k in sigs.TRAINING_NAMES}

    def _signatures(self, labels: Mapping[str, str]) -> list[sigs.MetricSignature]:
        """The signatures this server can answer: its exporters', and the training ones
        whose metrics the site named (bound to those names)."""
        names = self._training_names()
        return [s.bound(names) if s.exporter == TRAINING else s for s in sigs.load()
                if s.exporter in labels and s.names() <= set(names)]

    def _read(self, client: PromClient, window: Window, labels: Mapping[str, str],
              hosts: Sequence[str]) -> tuple[list[Presence], list[SignalResult], list[Any]]:
        """Every query of the window at once, *workers* in flight: which hosts each exporter
        measured, every signature, the oscillation search. The chains of dependent queries
        (presence, oscillation) go first, so the server's cores are busy while they wait on
        each other (512 hosts x 8 GPUs x 6 h: 2.8 s one after the other, bench/monitoring.py)."""
        todo = self._signatures(labels)
        markers = {name: marker for name, (marker, _) in EXPORTERS.items()}
        if TRAINING in labels:  # the first metric the job exports marks its hosts
            markers[TRAINING] = next(iter(self._training_names().values()))
        with ThreadPoolExecutor(self.workers) as pool:
            waves = pool.submit(oscillating, client, window, dict(labels), hosts)
            seen = [pool.submit(presence, client, name, markers[name], label, window,
                                hosts) for name, label in labels.items()]
            results = [pool.submit(evaluate, client, s, window, labels[s.exporter], hosts)
                       for s in todo]
            return ([f.result() for f in seen], [f.result() for f in results],
                    waves.result())


def findings(results: Sequence[SignalResult], waves: Sequence[Any], labels: Mapping[str, str],
             hosts: Sequence[str], window: Window) -> list[Finding]:
    out: list[Finding] = []
    for exporter in EXPORTERS:
        if exporter not in labels:
            out.append(Finding("not-measured", "warning", tuple(sorted(hosts)),
                               f"{exporter} metrics not measured: Prometheus has no series of "
                               "it with a host label", PROBE,
                               {"what": f"{exporter} metrics", "why": "no series"}))
    # Per exporter, the metrics each host had no series of. A host with none of them is the
    # exporter's silence there; one missing some is those signals not measured (dcgm-exporter
    # publishes DCGM_FI_PROF_* only where DCGM's profiling module runs), said apart.
    read: dict[str, set[str]] = {}
    unmeasured: dict[str, dict[str, set[str]]] = {}
    for r in results:
        if r.error is None:
            read.setdefault(r.signature.exporter, set()).add(r.signature.metric)
            for host in r.not_measured:
                unmeasured.setdefault(r.signature.exporter, {}).setdefault(host, set()).add(
                    r.signature.metric)
    when = f"in the window ({iso(window.start)} to {iso(window.end)})"
    for exporter, by_host in sorted(unmeasured.items()):
        silent = sorted(h for h, m in by_host.items() if m >= read[exporter])
        if silent:
            out.append(Finding("not-measured", "warning", tuple(silent),
                               f"{exporter}: {len(silent)} host(s) have no series {when}: not "
                               "measured, not healthy", PROBE,
                               {"what": f"{exporter} metrics", "why": "no series in the window"}))
        partly = {h: m for h, m in by_host.items() if not m >= read[exporter]}
        if partly:
            metrics = sorted(set().union(*partly.values()))
            named = ", ".join(metrics[:4]) + (f" and {len(metrics) - 4} more"
                                              if len(metrics) > 4 else "")
            out.append(Finding(
                "not-measured", "warning", tuple(sorted(partly)),
                f"{exporter}: {len(partly)} host(s) have no series of {named} {when}: those "
                "signals not measured, not healthy", PROBE,
                {"what": f"{exporter} {', '.join(metrics)}", "why": "no series in the window",
                 "metrics": metrics}))
    fired = sorted((r for r in results if r.first_abnormal),
                   key=lambda r: (min(r.first_abnormal.values()), r.signature.id))
    for r in fired:
        order = sorted(r.first_abnormal.items(), key=lambda kv: (kv[1], kv[0]))
        first_host, first_ts = order[0]
        others = "".join(f"; {h} {int(ts - first_ts)} s later" for h, ts in order[1:4])
        more = f" (+{len(order) - 4} more)" if len(order) > 4 else ""
        sig = r.signature
        out.append(Finding(
            sig.id, SEVERITY.get(sig.severity, "warning"), tuple(h for h, _ in order),
            f"{sig.meaning} {first_host} first, at {clock(first_ts)}Z{others}{more}", PROBE,
            {"metric": sig.metric, "first_host": first_host, "threshold": sig.threshold,
             "op": sig.op, "source": sig.source,
             "first_abnormal": {h: iso(ts) for h, ts in order[:8]},
             "worst": {h: round(r.worst[h], 4) for h, _ in order[:8] if h in r.worst}}))
    if len(fired) > 1:
        # fired is ordered by (first time, id): ties between signatures never compare results
        a, b = fired[0], fired[1]
        t0, t1 = min(a.first_abnormal.values()), min(b.first_abnormal.values())
        out.append(Finding(
            "monitoring-first-change", "info", (a.first_host or "",),
            f"{a.first_host}'s {a.signature.metric} changed first, at {clock(t0)}Z, "
            f"{int(t1 - t0)} s before {b.first_host}'s {b.signature.metric}", PROBE,
            {"first": a.signature.id, "then": b.signature.id, "gap_s": int(t1 - t0)}))
    for wave in waves:
        moves = ", ".join(f"{k} (r={v})" for k, v in wave.moves_with.items()) or "nothing measured"
        out.append(Finding(
            "gpu-utilization-oscillates", "warning", (wave.host,),
            f"GPU utilization on {wave.host} swings between {wave.low:.0f} % and "
            f"{wave.high:.0f} % every {wave.period_s:.0f} s; moving with it: {moves}", PROBE,
            {"period_s": round(wave.period_s), "low": wave.low, "high": wave.high,
             "moves_with": wave.moves_with}))
    return out


def stale(seen: Sequence[Presence], window: Window) -> list[Finding]:
    out = []
    for one in seen:
        if one.stale:
            last = max(one.stale.values())
            out.append(Finding(
                "monitoring-series-stale", "warning", tuple(sorted(one.stale)),
                f"{one.exporter}'s series of {len(one.stale)} host(s) stopped before the "
                f"window's end (the last at {clock(last)}Z, {int(window.end - last)} s before "
                "it): the exporter or the host went away; later samples not measured", PROBE,
                {"exporter": one.exporter,
                 "last_seen": {h: iso(t) for h, t in sorted(one.stale.items())[:8]}}))
    return out


class WindowReader(Protocol):
    """What reads a walk's incident window: the monitoring step over a Prometheus, or a
    scenario's recorded window (assistant/monitoring/recorded.py)."""

    def run(self, hosts: Sequence[str], say: Callable[[str], None]) -> ProbeOutcome: ...


class MonitoredProvider:
    """A probe provider whose evidence sweep also reads the monitoring window: every other
    call goes to the provider it wraps."""

    def __init__(self, inner: Any, step: WindowReader | None,
                 say: Callable[[str], None]) -> None:
        self._inner = inner
        self._step = step
        self._say = say

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # what a walk sets on its provider (a resumed soak's prior samples) is the wrapped
        # provider's: set here, the provider that samples would never see it
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._inner, name, value)

    def run_sweep(self, components: Sequence[str], hosts: Sequence[str],
                  params: Mapping[str, Mapping[str, Any]], emit: Callable[[Any], None]
                  ) -> list[ProbeOutcome]:
        run_sweep = getattr(self._inner, "run_sweep", None)
        outcomes: list[ProbeOutcome] = list(
            run_sweep(components, hosts, params, emit) if run_sweep is not None
            else self._inner.run_probes(components, hosts, params, emit))
        if self._step is None:
            self._say(NOT_CONFIGURED)
        else:
            outcomes.append(self._step.run(hosts, self._say))
        return outcomes


@dataclass
class MonitoringPlan:
    """A walk's monitoring: the step to run (None: no Prometheus is configured, said once in
    the sweep) and where its one-line messages go."""

    step: MonitoringStep | None
    say: Callable[[str], None]

    def wrap(self, provider: Any, target: Any = None) -> MonitoredProvider:
        """*target*'s Slurm job (--job), when it started, opens the window unless --since or
        --from said otherwise (Slurm's times are the controller's local time, no zone)."""
        step = self.step
        started = getattr(getattr(target, "job", None), "start_time", None)
        if step is not None and step.start is None and not step.since_given and started:
            with contextlib.suppress(ValueError, TypeError):
                step = replace(step, start=datetime.fromisoformat(str(started)).timestamp())
        return MonitoredProvider(provider, step, self.say)
