"""Which of the walk's hosts each exporter measured in the window, and until when: one query per
exporter (the last sample's time per host, from a subquery on the server). A host whose series
stop well before the window's end is *stale* (the exporter died or the host went away); when
no host of the walk has a series at all while the exporter has some, the names do not match
(a label mismatch), and the line says how Prometheus names its hosts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .check import strip_port
from .client import PromClient
from .window import Window, selector

STALE_STEPS = 5  # Prometheus marks a series stale after 5 minutes; 5 scrapes at least


@dataclass
class Presence:
    exporter: str
    label: str
    last_seen: dict[str, float] = field(default_factory=dict)  # host -> unix time
    stale: dict[str, float] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)  # host names Prometheus has, on mismatch

    def mismatch(self, hosts: Sequence[str]) -> str | None:
        if self.last_seen or not self.examples or not hosts:
            return None
        return (f"{self.exporter}: none of the {len(hosts)} host(s) of the walk has a series "
                f"under the label '{self.label}'; Prometheus names hosts like "
                f"{', '.join(self.examples)} (set host_label in monitoring.yaml, or name the "
                "hosts as Prometheus does)")


def _hosts(client: PromClient, query: str, label: str, at: float) -> dict[str, float]:
    return {strip_port(r.labels.get(label, "")): r.points[0][1]
            for r in client.query(query, at=at) if r.points and r.labels.get(label)}


def presence(client: PromClient, exporter: str, marker: str, label: str, window: Window,
             hosts: Sequence[str]) -> Presence:
    """Two cheap counts over every host (in the window; in its last minutes), then the last
    sample's time only for the hosts that went quiet."""
    found = Presence(exporter, label)
    span = int(window.end - window.start)
    recent = int(max(STALE_STEPS * window.step, 300))
    sel = selector(label, hosts)
    seen = _hosts(client, f"max by ({label}) (count_over_time({marker}{{{sel}}}[{span}s]))",
                  label, window.end)
    fresh = _hosts(client, f"max by ({label}) (count_over_time({marker}{{{sel}}}[{recent}s]))",
                   label, window.end)
    quiet = sorted(set(seen) - set(fresh))
    last: dict[str, float] = {}
    if quiet:
        last = _hosts(client, f"max by ({label}) (max_over_time(timestamp("
                      f"{marker}{{{selector(label, quiet)}}})[{span}s:{int(window.step)}s]))",
                      label, window.end)
    found.last_seen = {h: last.get(h, window.end) for h in seen}
    found.stale = {h: last.get(h, window.start) for h in quiet}
    if not found.last_seen and hosts:
        others = client.query(f"topk(3, count by ({label}) ({marker}{{{label}!=\"\"}}))",
                              at=window.end)
        found.examples = sorted(strip_port(r.labels.get(label, "")) for r in others)
    return found
