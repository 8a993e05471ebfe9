"""Link flap history: a fabric port that went down and came back, hours ago.

The network probe's two counter samples a few seconds apart only see a link that flaps *now*.
A link that went down during the night and came back is Active again and its counters are
flat in the sample, but two records keep it: the port's ``link_downed`` and
``link_error_recovery`` totals (since the counters were last reset, usually at boot), and the
kernel log's link down/up lines. This module reads both:

- the kernel log (``dmesg``, else ``journalctl -k -o short-monotonic``) through the
  ``dmesg-link`` parser; each event gets its age from its uptime stamp and ``/proc/uptime``.
  Only fabric ports count (a netdev or PCI function of an RDMA device), only events inside the
  window, and none from the first minutes after boot, when every port trains down and up once
  (the real ConnectX-6 boot log in fixtures/real logs "Link down" at 5 s and "Link up" at 21 s);
- the totals of the second counter sample, compared across the fleet by the checks. A total
  cannot be dated (the counters may not have been reset since last month), so a host far
  above its peers without a kernel-log event in the window is a watch item, never a drain.

A port that went down more than ``link_flap_events`` times in the window is flapping (an
error); fewer is still a finding: a link that dropped while a job hung is that job's cause.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import Context, default_thresholds, finding, mad_outliers
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "network"
_MAX_EVENTS = 40
_RDMA_PCI = re.compile(r"^(?P<ca>\S+)\s+(?P<pci>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:"
                       r"[0-9a-fA-F]{2}\.[0-7])\s*$")


def pci_of_cas(text: str | None) -> dict[str, str]:
    """PCI address (lower case, with domain) -> RDMA device, from the rdma_pci section."""
    out = {}
    for line in (text or "").splitlines():
        m = _RDMA_PCI.match(line.strip())
        if m:
            pci = m.group("pci").lower()
            out[pci if pci.count(":") == 2 else f"0000:{pci}"] = m.group("ca")
    return out


def _port_of_event(event: Mapping[str, Any], by_netdev: Mapping[str, str],
                   by_pci: Mapping[str, str], cas: set[str]) -> str | None:
    """The "ca/port" key of a fabric port an event is about, or None for another NIC."""
    name = event.get("ifname")
    if isinstance(name, str) and name in by_netdev:
        return by_netdev[name]
    pci = (event.get("pci") or "").lower()
    pci = pci if pci.count(":") == 2 else (f"0000:{pci}" if pci else "")
    ca = name if name in cas else by_pci.get(pci)
    if ca is None:
        return None
    return f"{ca}/{event.get('port') or 1}"


def parse_link_log(text: str | None, uptime: float | None, window_h: float | None,
                   settle_s: float, by_netdev: Mapping[str, str], by_pci: Mapping[str, str],
                   cas: set[str], facts: dict[str, Any]) -> None:
    """Fabric-port link events of the kernel log into facts (link_events, link_flaps, ...)."""
    if text is None:
        return
    lines = text.splitlines()
    source = lines[0].split(None, 1)[1].strip() if lines and lines[0].startswith("source ") \
        and len(lines[0].split()) > 1 else None
    body = "\n".join(lines[1:] if source else lines)
    if source == "none" or re.search(r"not seeing messages|insufficient permissions", body):
        facts["errors"]["link_log"] = (body.strip().splitlines() or ["kernel log not readable"]
                                       )[0][:200]
        return
    facts["link_log_readable"] = True
    try:
        events = parse_kind("dmesg-link", body)["events"] if body.strip() else []
    except ParseError:
        events = []  # no link line at all: nothing to report, not an error
    recent: list[dict[str, Any]] = []
    for event in events:
        key = _port_of_event(event, by_netdev, by_pci, cas)
        if key is None:
            continue
        up_s = event.get("uptime_s")
        age_h = round((uptime - up_s) / 3600.0, 2) if uptime is not None and up_s is not None \
            else None
        if up_s is not None and up_s < settle_s:
            continue  # ports train down and up once while the node boots
        if window_h is not None and age_h is not None and age_h > window_h:
            continue
        recent.append({"port": key, "state": event["state"], "age_h": age_h,
                       "ifname": event.get("ifname")})
    facts["link_events"] = recent[-_MAX_EVENTS:]
    flaps: dict[str, int] = {}
    for event in recent:
        if event["state"] == "down":
            flaps[event["port"]] = flaps.get(event["port"], 0) + 1
    facts["link_flaps"] = flaps
    facts["link_flap_events"] = sum(flaps.values())


def link_totals(after: Mapping[str, Mapping[str, int]], fabric: set[str],
                facts: dict[str, Any]) -> None:
    """link_downed / link_error_recovery since the counters' reset, over the fabric ports
    (every sampled port when the port list could not tell which are fabric)."""
    keys = fabric or set(after)
    by_port = {k: {n: after[k][n] for n in ("link_downed", "link_error_recovery")
                   if n in after[k]} for k in sorted(keys) if k in after}
    facts["link_totals_by_port"] = {k: v for k, v in by_port.items() if any(v.values())}
    facts["link_downed_total"] = sum(v.get("link_downed", 0) for v in by_port.values())
    facts["link_error_recovery_total"] = sum(v.get("link_error_recovery", 0)
                                             for v in by_port.values())


def link_history(clock: str | None, log: str | None, rdma_pci: str | None,
                 ports: list[dict[str, Any]], ports_of: Mapping[str, str],
                 facts: dict[str, Any]) -> None:
    """The clock and link_log sections of the network script into facts."""
    if clock is not None:
        first = clock.split()
        if first and re.fullmatch(r"\d+(?:\.\d+)?", first[0]):
            facts["uptime_s"] = float(first[0])
        window = re.search(r"^link_window_hours (\d+(?:\.\d+)?)\s*$", clock, re.M)
        if window:
            facts["link_window_hours"] = float(window.group(1))
    settle = float(default_thresholds()["link_flap_boot_settle_s"])
    parse_link_log(log, facts["uptime_s"], facts["link_window_hours"], settle, ports_of,
                   pci_of_cas(rdma_pci), {p["ca"] for p in ports}, facts)


def flap_findings(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    flaps = facts.get("link_flaps") or {}
    if not flaps:
        return []
    window = facts.get("link_window_hours") or ctx.threshold("link_flap_window_hours")
    states = {f"{p['ca']}/{p['port']}": p.get("state") for p in facts.get("ports") or []}
    last = {}
    for event in facts.get("link_events") or []:
        if event["state"] == "down":
            last[event["port"]] = event.get("age_h")
    limit = ctx.threshold("link_flap_events")
    worst = max(flaps.values())
    return [finding(
        "ib-link-flapped", [host],
        f"{host}: fabric port(s) went down in the last {window:g} h (kernel log): "
        + ", ".join(f"{p} {n}x (last {last.get(p)} h ago, {states.get(p) or 'state unknown'} "
                    "now)" for p, n in sorted(flaps.items())),
        NAME, severity="error" if worst >= limit else "warning", ports=flaps,
        last_down_h=last, window_hours=window, source="kernel log")]


def totals_findings(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    """Hosts whose link_downed / link_error_recovery totals stand far above their peers'.

    A total says *that* a link went down since the counters were reset, not *when*: a host
    that flapped last month and was never cleared stands out just the same. So the totals
    alone never drain: they are ``ib-link-downed-history`` (info, with what to check). Only
    the kernel log dates a flap (``ib-link-flapped``); a host it names, or whose link goes
    down during the sample (``ib-link-flapping``), is left out.
    """
    findings = []
    # hosts the kernel log dates, or whose link is going down now (ib-link-flapping says so)
    dated = {h for h, f in facts_by_host.items() if f.get("link_flaps")
             or (f.get("link_downed_delta") or 0) > 0
             or (f.get("link_error_recovery_delta") or 0) > 0}
    for key, what in (("link_downed_total", "link_downed"),
                      ("link_error_recovery_total", "link_error_recovery")):
        values = {h: f[key] for h, f in facts_by_host.items()
                  if isinstance(f.get(key), int) and not isinstance(f.get(key), bool)}
        high = {h: v for h, v in mad_outliers(
            values, k=ctx.threshold("outlier_mad_k"), high=True,
            min_spread=ctx.threshold("link_downed_total_excess")).items() if h not in dated}
        if not high:
            continue
        median = sorted(values.values())[len(values) // 2]
        blind = sorted(h for h in high if not facts_by_host[h].get("link_log_readable"))
        findings.append(finding(
            "ib-link-downed-history", high,
            f"{what} totals (since the counters were reset) far above the peers' ({median}) on "
            + ", ".join(f"{h} ({v})" for h, v in sorted(high.items()))
            + "; the kernel log shows no link down in the window"
            + (f" (not readable on {', '.join(blind)})" if blind else "")
            + ", so when is unknown: compare `dmesg -T | grep -i 'link down'` with the job's "
            "timeline, and clear the counters (perfquery -R) to watch them",
            NAME, counter=what, values=high, peers=len(values), source="counters",
            per_port={h: facts_by_host[h].get("link_totals_by_port", {}) for h in high}))
    return findings
