"""placement: where the job's hosts sit — leaf switch, rack, rail — according to the inventory.

Nothing runs on the hosts: ``command`` returns None, and the provider then takes each host's
facts straight from the inventory attributes (``facts = ctx.attrs[host]``, so a host's facts
may hold more attributes than leaf/rack/rail). The checks read leaf/rack/rail from the facts,
falling back to ctx.attrs, and report them as evidence, so the walk's record shows the
placement even though no host was contacted.

A job spread over several leaf switches sends its traffic across the spine, where
oversubscription and congestion from other jobs show up as slow or uneven collectives.
``concentration`` raises leaf-concentration for any probe: when the hosts with a finding all sit
under one leaf switch (or rack) of several, the switch is a better suspect than the hosts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.base import Context, Probe, finding
from probes.catalog import load_catalog
from probes.model import Finding

NAME = "placement"
KEYS = ("leaf", "rack", "rail")


def command(params: Mapping[str, Any]) -> None:
    return None


def parse(text: str) -> dict[str, Any]:
    """Nothing is ever printed for this probe; its facts are the inventory's."""
    return {}


def placement_of(host: str, facts: dict[str, Any], ctx: Context) -> dict[str, str | None]:
    """leaf/rack/rail of *host* as strings (None when the inventory does not say)."""
    attrs = ctx.attrs.get(host, {}) if ctx.attrs else {}
    out: dict[str, str | None] = {}
    for key in KEYS:
        value = facts.get(key) if facts.get(key) is not None else attrs.get(key)
        out[key] = None if value is None or value == "" else str(value)
    return out


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    return []


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    hosts = sorted(facts_by_host)
    placement = {h: placement_of(h, facts_by_host.get(h, {}), ctx) for h in hosts}
    unknown = [h for h, p in placement.items() if p["leaf"] is None]
    by_leaf: dict[str, list[str]] = {}
    for host, p in placement.items():
        if p["leaf"] is not None:
            by_leaf.setdefault(p["leaf"], []).append(host)
    findings: list[Finding] = []
    if unknown:
        findings.append(finding(
            "not-measured", unknown,
            f"placement not measured on {len(unknown)} host(s): the inventory gives no leaf "
            "attribute", NAME, what="placement", why="no leaf attribute in the inventory"))
    if len(by_leaf) > 1:
        racks = sorted({p["rack"] for p in placement.values() if p["rack"]})
        findings.append(finding(
            "job-spans-leaves", [h for hs in by_leaf.values() for h in hs],
            f"the job's {sum(map(len, by_leaf.values()))} hosts sit under {len(by_leaf)} leaf "
            "switches: " + ", ".join(f"{leaf} ({len(hs)})" for leaf, hs in sorted(by_leaf.items())),
            NAME, hosts_per_leaf={leaf: len(hs) for leaf, hs in sorted(by_leaf.items())},
            leaves={leaf: sorted(hs)[:16] for leaf, hs in sorted(by_leaf.items())},
            racks=racks[:16],
            placement={h: p for h, p in list(placement.items())[:32]}))
    return findings


PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=1.0)


# Catalog categories of codes that say nothing about the hosts' hardware or network: never
# evidence of a bad switch.
NOT_PLACEMENT = ("not-evidence", "placement", "configuration")


def concentration(findings: list[Finding], hosts: list[str],
                  attrs: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """leaf-concentration for each code raised on 2+ hosts that all share one leaf (or rack)
    while the walk's hosts span several: the shared switch or rack is the suspect."""
    ignored = set(load_catalog().category(*NOT_PLACEMENT))
    result = []
    for key in ("leaf", "rack"):
        groups: dict[str, list[str]] = {}
        for host in hosts:
            value = attrs.get(host, {}).get(key)
            if value not in (None, ""):
                groups.setdefault(str(value), []).append(host)
        if len(groups) < 2:
            continue
        by_code: dict[str, set[str]] = {}
        for f in findings:
            if f.code not in ignored:
                by_code.setdefault(f.code, set()).update(f.hosts)
        for code, affected in sorted(by_code.items()):
            places = {str(attrs.get(h, {}).get(key)) for h in affected}
            if len(affected) < 2 or len(places) != 1 or "None" in places:
                continue
            place = places.pop()
            result.append(finding(
                "leaf-concentration", affected,
                f"all {len(affected)} hosts with {code} sit under {key} {place} "
                f"({len(groups[place])} of the job's {len(hosts)} hosts are there)",
                NAME, finding_code=code, key=key, place=place, place_hosts=len(groups[place]),
                job_hosts=len(hosts)))
        if result:
            break  # a leaf explains it; the racks under it would only repeat the point
    return result
