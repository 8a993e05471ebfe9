"""Every counter of every fabric port, as facts the fault catalogue can name.

The network probe's checks read a handful of counters by name. The catalogue
(probes/faults/ib-ports.yaml, roce.yaml) names any counter of NVIDIA's counter documentation
instead ("Understanding mlx5 ethtool Counters", the kernel's
Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst, and the IBA
PortCounters of "InfiniBand Port Counters"), so ``port_counters`` holds, per port:

- ``ib_delta`` / ``ib_total``: every file of ``/sys/class/infiniband/<dev>/ports/<n>/counters``
  and ``hw_counters`` (the hw sample's retransmit and congestion counters included), the rise
  between the two samples and the value at the second;
- ``eth_delta`` / ``eth_total``: every aggregate ``ethtool -S`` counter of the port's netdev
  (Ethernet/RoCE ports only; per-ring counters are not sampled). The script leaves out counters
  at 0, so one seen only in the second sample rose from 0, and one seen only in the first went
  back to 0 (a reset).

A counter that went down between the samples was reset and counts from 0, as in the checks. A
map is None when its samples were not both taken (tool missing, section cut): unknown, never
zero. Keys are ``ca/port`` like the rest of the probe's facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Samples = tuple[Mapping[str, Mapping[str, int]], Mapping[str, Mapping[str, int]]]


def _rise(before: int | None, after: int) -> int:
    if before is None:
        return after  # left out of the first sample: it was 0 (ethtool) or appeared
    return after - before if after >= before else after


def _maps(pair: Samples | None, key: str, zero_dropped: bool) -> tuple[Any, Any]:
    if pair is None:
        return None, None
    before, after = pair
    then, now = before.get(key), after.get(key)
    if now is None and then is None:
        return ({}, {}) if (before or after) else (None, None)
    total = dict(now or {})
    delta: dict[str, int] = {}
    for name, value in total.items():
        previous = (then or {}).get(name)
        if previous is None and not zero_dropped:
            continue  # a new file between the samples: no rise to speak of
        delta[name] = _rise(previous, value)
    if zero_dropped:
        for name in set(then or {}) - set(total):
            total[name], delta[name] = 0, 0  # back to 0 between the samples: a reset
    return dict(sorted(delta.items())), dict(sorted(total.items()))


def port_counters(ports: list[dict[str, Any]], netdev_of: Mapping[str, str],
                  ib: Samples | None, hw: Samples | None, eth: Samples | None,
                  ) -> list[dict[str, Any]]:
    """One entry per port: identity, then the delta and total maps (None when unsampled)."""
    known = {f"{p['ca']}/{p['port']}": p for p in ports}
    keys = set(known)
    for pair in (ib, hw, eth):
        if pair is not None:
            keys |= set(pair[0]) | set(pair[1])
    entries = []
    for key in sorted(keys, key=_natural):
        port = known.get(key, {})
        ca, _, number = key.partition("/")
        ib_delta, ib_total = _maps(ib, key, zero_dropped=False)
        hw_delta, hw_total = _maps(hw, key, zero_dropped=False)
        if ib_total is not None and hw_total:
            ib_delta = dict(sorted({**ib_delta, **(hw_delta or {})}.items()))
            ib_total = dict(sorted({**ib_total, **hw_total}.items()))
        elif ib_total is None and hw_total is not None:
            ib_delta, ib_total = hw_delta, hw_total
        eth_delta, eth_total = _maps(eth, key, zero_dropped=True)
        if port.get("link_layer") not in (None, "Ethernet"):
            eth_delta = eth_total = None  # no netdev counters sampled for InfiniBand ports
        entries.append({
            "key": key, "device": ca, "port": int(number) if number.isdigit() else None,
            "netdev": port.get("netdev") or netdev_of.get(key),
            "link_layer": port.get("link_layer"), "state": port.get("state"),
            "ib_delta": ib_delta, "ib_total": ib_total,
            "eth_delta": eth_delta, "eth_total": eth_total,
        })
    return entries


def _natural(key: str) -> list[Any]:
    out: list[Any] = []
    for part in key.replace("/", "_").split("_"):
        out.append((0, int(part), "") if part.isdigit() else (1, 0, part))
    return out
