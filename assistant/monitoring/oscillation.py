"""Utilization that goes up and down: per host, the period of its GPU utilization's swings over
the window, and which host signals move with it (storage latency, I/O and CPU pressure). One
coarse range query for utilization (at most ``POINTS`` points per host, aggregated by host on
the server), then one per companion signal for the oscillating hosts only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from statistics import fmean, pstdev

from .check import strip_port
from .client import PromClient
from .window import Window, selector

POINTS = 480
UTIL = "avg by ($host) (DCGM_FI_DEV_GPU_UTIL{$sel})"
MIN_SWING = 30.0   # percentage points between the highs and the lows
MIN_CROSSINGS = 4  # two full periods at least
MAX_JITTER = 0.5   # the half-periods' coefficient of variation
# What may move with it (node_exporter; the host label of node_exporter's series)
COMPANIONS = {
    "I/O pressure": "max by ($host) (rate(node_pressure_io_waiting_seconds_total{$sel}[$range]))",
    "CPU pressure": "max by ($host) (rate(node_pressure_cpu_waiting_seconds_total{$sel}[$range]))",
    "disk latency": ("max by ($host) (rate(node_disk_read_time_seconds_total{$sel}[$range]) / "
                     "clamp_min(rate(node_disk_reads_completed_total{$sel}[$range]), 0.001))"),
}
MIN_CORRELATION = 0.6


@dataclass
class Oscillation:
    host: str
    period_s: float
    low: float
    high: float
    moves_with: dict[str, float] = field(default_factory=dict)  # signal -> correlation


def _sub(template: str, label: str, hosts: Sequence[str], rate: str) -> str:
    return (template.replace("$host", label).replace("$sel", selector(label, hosts))
            .replace("$range", rate))


def detect(points: Sequence[tuple[float, float]]) -> tuple[float, float, float] | None:
    """(period in seconds, low, high) when the values swing regularly, else None."""
    values = [v for _, v in points if v == v]
    if len(values) < 8:
        return None
    low, high = min(values), max(values)
    if high - low < MIN_SWING:
        return None
    mid = (low + high) / 2
    crossings = [t for (t, a), (_, b) in pairwise(points) if (a < mid) != (b < mid)]
    if len(crossings) < MIN_CROSSINGS:
        return None
    halves = [b - a for a, b in pairwise(crossings)]
    if fmean(halves) <= 0 or pstdev(halves) / fmean(halves) > MAX_JITTER:
        return None
    return 2 * fmean(halves), low, high


def correlation(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) < 3 or len(a) != len(b):
        return 0.0
    ma, mb = fmean(a), fmean(b)
    sa, sb = pstdev(a), pstdev(b)
    if sa == 0 or sb == 0:
        return 0.0
    return sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True)) / (len(a) * sa * sb)


def oscillating(client: PromClient, window: Window, labels: dict[str, str],
                hosts: Sequence[str]) -> list[Oscillation]:
    gpu_label = labels.get("dcgm-exporter")
    if not gpu_label:
        return []
    step = max(window.step, (window.end - window.start) / POINTS)
    # the cheap necessary condition first (raw series, no per-step evaluation): a swing as
    # wide as MIN_SWING somewhere in the window
    span = f"{int(window.end - window.start)}s"
    sel = selector(gpu_label, hosts)
    swing = client.query(f"max by ({gpu_label}) (max_over_time(DCGM_FI_DEV_GPU_UTIL{{{sel}}}"
                         f"[{span}]) - min_over_time(DCGM_FI_DEV_GPU_UTIL{{{sel}}}[{span}]))",
                         at=window.end)
    wide = [strip_port(r.labels.get(gpu_label, "")) for r in swing
            if r.points and r.points[0][1] >= MIN_SWING]
    if not wide:
        return []
    util = client.query_range(_sub(UTIL, gpu_label, wide, window.rate_range),
                              window.start, window.end, step)
    found: dict[str, tuple[Oscillation, dict[float, float]]] = {}
    for series in util:
        host = strip_port(series.labels.get(gpu_label, ""))
        shape = detect(series.points)
        if host and shape:
            found[host] = (Oscillation(host, *shape), dict(series.points))
    node_label = labels.get("node_exporter")
    if found and node_label:
        for name, template in COMPANIONS.items():
            rows = client.query_range(_sub(template, node_label, sorted(found), window.rate_range),
                                      window.start, window.end, step)
            for series in rows:
                host = strip_port(series.labels.get(node_label, ""))
                if host not in found:
                    continue
                osc, util_points = found[host]
                pairs = [(util_points[t], v) for t, v in series.points
                         if t in util_points and v == v]
                r = correlation([p[0] for p in pairs], [p[1] for p in pairs])
                if abs(r) >= MIN_CORRELATION:
                    osc.moves_with[name] = round(r, 2)
    return [found[h][0] for h in sorted(found)]
