"""The fleet statistics every probe's fleet check is made of: the majority value and the hosts
off it (drift, shortfalls) and robust outliers (median and MAD), each worded the same way by
every probe so an operator reads one kind of sentence for one kind of finding.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from probes.hostfold import fold_hosts


def majority_groups(values: Mapping[str, Any]) -> tuple[Any, dict[Any, list[str]]]:
    """Hosts grouped by value, and the majority value (ties: the value seen first)."""
    groups: dict[Any, list[str]] = {}
    for host, value in values.items():
        groups.setdefault(value, []).append(host)
    majority = max(groups, key=lambda v: len(groups[v])) if groups else None
    return majority, groups


@dataclass(frozen=True)
class Minority:
    """The hosts off the fleet's majority value, and the words every probe uses to say so."""

    majority: Any
    hosts: dict[str, Any]  # each host off the majority -> its value
    groups: dict[Any, list[str]]  # every value -> its hosts, the majority's included

    def differs(self, label: str) -> str:
        """Drift: '<label> differs on 2 host(s): b on gpu[003-004] (majority a on 6)' —
        which hosts, which value, and the majority's, so the operator can act on it."""
        odd = [(v, [h for h in hs if h in self.hosts]) for v, hs in self.groups.items()
               if v != self.majority]
        return (f"{label} differs on {len(self.hosts)} host(s): "
                + ", ".join(f"{v} on {fold_hosts(hs)}" for v, hs in odd if hs)
                + f" (majority {self.majority} on {len(self.groups[self.majority])})")

    def below(self, what: str, spec: str = "", unit: str = "") -> str:
        """Shortfall: '2 host(s) <what> the fleet's 8: a (7), b (6)', numbers in *spec*."""
        return (f"{len(self.hosts)} host(s) {what} the fleet's {self.majority:{spec}}{unit}: "
                + ", ".join(f"{h} ({v:{spec}})" for h, v in sorted(self.hosts.items())))


def fleet_minority(values: Mapping[str, Any], below: bool = False,
                   spare: Collection[str] = ()) -> Minority | None:
    """The hosts whose value is off the fleet's majority, or None when there are none.

    By default any host whose value differs from the most common one (drift: versions, env).
    With *below*, only hosts under a value more than half the hosts share (a GPU count, a link
    count, a rate): without a clear majority there is no norm to fall short of, and a host above
    it is not faulty. Hosts in *spare* are never named (another check already raised them).
    """
    majority, groups = majority_groups(values)
    if below and (majority is None or len(groups[majority]) * 2 <= len(values)):
        return None
    odd = {h: v for h, v in values.items()
           if h not in spare and (v < majority if below else v != majority)}
    return Minority(majority, odd, groups) if odd else None


def mad_outliers(values: Mapping[str, float], k: float = 5.0, high: bool = True,
                 min_hosts: int = 4, min_spread: float = 0.0) -> dict[str, float]:
    """Hosts whose value lies more than *k* scaled MADs from the median (above it if *high*).

    *min_spread* keeps a tiny absolute difference from counting when all peers are nearly equal.
    """
    if len(values) < min_hosts:
        return {}
    numbers = list(values.values())
    median = statistics.median(numbers)
    mad = statistics.median(abs(v - median) for v in numbers) * 1.4826
    spread = max(mad * k, min_spread)
    if spread == 0:
        return {}
    return {host: v for host, v in values.items()
            if (v - median > spread if high else median - v > spread)}
