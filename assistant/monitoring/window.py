"""Metric signatures judged over an incident window: one range query per signature, aggregated
by host on the server, and per host the first moment the signal went abnormal. A host of the
walk with no series in the window is *not measured* — never healthy. Counters are read through
``rate``/``increase``, which tell a counter reset (a reboot: the value falls to 0) from a
rise; ``resets`` over the window says which hosts' counters were reset."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from string import Template

from .check import strip_port
from .client import PromClient, PromError
from .signatures import OPS, MetricSignature


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    step: float  # seconds between points (the scrape interval, coarser for long windows)

    @property
    def rate_range(self) -> str:
        return f"{int(max(self.step * 4, 60))}s"


@dataclass
class SignalResult:
    signature: MetricSignature
    first_abnormal: dict[str, float] = field(default_factory=dict)  # host -> unix time
    worst: dict[str, float] = field(default_factory=dict)  # host -> most abnormal value
    not_measured: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def first_host(self) -> str | None:
        if not self.first_abnormal:
            return None
        return min(self.first_abnormal, key=lambda h: (self.first_abnormal[h], h))


def selector(label: str, hosts: Sequence[str]) -> str:
    """``Hostname=~"(n1|n2)(:[0-9]+)?"``: the hosts, a scrape target's port allowed."""
    if not hosts:
        return f'{label}!=""'
    names = "|".join(re.escape(h).replace("\\", "\\\\") for h in sorted(set(hosts)))
    return f'{label}=~"({names})(:[0-9]+)?"'


def evaluate(client: PromClient, signature: MetricSignature, window: Window,
             host_label: str, hosts: Sequence[str]) -> SignalResult:
    """Two instant queries at the window's end, over a subquery of the window: per host the
    first moment the condition held, and the worst value. The server scans the points; the
    answer is one number per host, whatever the fleet's size or the window's length."""
    result = SignalResult(signature)
    over = f"[{int(window.end - window.start)}s:{int(window.step)}s]"
    measured: set[str] | None = None
    if signature.prefilter:  # the cheap necessary condition first, over every host
        query, pop, threshold = signature.prefilter
        text = Template(query).substitute(host=host_label, sel=selector(host_label, hosts),
                                          window=f"{int(window.end - window.start)}s")
        try:
            rows = client.query(text, at=window.end)
        except PromError as exc:
            result.error = str(exc)
            return result
        measured, candidates = set(), []
        for one in rows:
            host = strip_port(one.labels.get(host_label, ""))
            if host and one.points:
                measured.add(host)
                if OPS[pop](one.points[0][1], threshold):
                    candidates.append(host)
        result.not_measured = sorted(set(hosts) - measured)
        if not candidates:
            return result
        hosts = candidates
    expr = signature.promql(host_label, selector(host_label, hosts), window.rate_range)
    worst_fn = "min_over_time" if signature.op in ("lt", "le") else "max_over_time"
    op = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}[signature.op]
    try:
        worst = client.query(f"{worst_fn}(({expr}){over})", at=window.end)
        first = client.query(
            f"min_over_time(timestamp(({expr}) {op} {signature.threshold!r}){over})",
            at=window.end)
    except PromError as exc:
        result.error = str(exc)
        return result
    seen: set[str] = set()
    for one in worst:
        host = strip_port(one.labels.get(host_label, ""))
        if host and one.points:
            seen.add(host)
            value = one.points[0][1]
            if value == value and signature.abnormal(value):
                result.worst[host] = value
    for one in first:
        host = strip_port(one.labels.get(host_label, ""))
        if host and one.points and host in result.worst:
            result.first_abnormal[host] = one.points[0][1]
    if measured is None:
        result.not_measured = sorted(set(hosts) - seen)
    return result


def counter_resets(client: PromClient, metric: str, window: Window, host_label: str,
                   hosts: Sequence[str]) -> dict[str, int]:
    """Hosts whose *metric* counter was reset in the window (a reboot, a driver reload), with
    how many times: a fall to 0 that rate() already does not read as a rise."""
    span = f"{int(window.end - window.start)}s"
    query = (f"sum by ({host_label}) (resets({metric}{{{selector(host_label, hosts)}}}"
             f"[{span}]))")
    out: dict[str, int] = {}
    for one in client.query(query, at=window.end):
        count = int(one.points[0][1]) if one.points else 0
        if count:
            out[strip_port(one.labels.get(host_label, ""))] = count
    return out


SUMMARY_POINTS = 60


Samples = dict[str, list[float | None]]


def summary_series(client: PromClient, signature: MetricSignature, window: Window,
                   host_label: str, hosts: Sequence[str]) -> tuple[float, Samples]:
    """The signal of the accused *hosts* over the window in SUMMARY_POINTS points (for the
    JSON, the report and a sparkline beside the finding): (step in seconds, host -> values,
    None where the host had no sample)."""
    step = max(window.step, (window.end - window.start) / SUMMARY_POINTS)
    expr = signature.promql(host_label, selector(host_label, hosts), window.rate_range)
    out: Samples = {}
    for one in client.query_range(expr, window.start, window.end, step):
        host = strip_port(one.labels.get(host_label, ""))
        by_time = dict(one.points)
        out[host] = [None if (v := by_time.get(window.start + i * step)) is None or v != v
                     else round(v, 4)
                     for i in range(int((window.end - window.start) // step) + 1)]
    return step, out
