"""The nccl probe's checks across hosts that compare what NCCL *loaded and chose* on each host:
its version and its network transport.

Both go wrong on one host at a time in real fleets (a node reimaged from an older image loads
another libnccl; a per-node profile leaves NCCL_IB_DISABLE=1 behind), and both are easy to
misread as an interface problem because the NCCL_* environment differs on that host too. Naming
them for what they are — which host, which value, and the majority's — is the point here.
"""

from __future__ import annotations

from typing import Any

from probes.base import Context, finding, fleet_minority
from probes.hostfold import fold_hosts
from probes.model import Finding

NAME = "nccl"


def version_drift(facts_by_host: dict[str, dict[str, Any]]) -> list[Finding]:
    """The NCCL version the training processes logged ("NCCL version 2.18.3+cuda12.2"), off
    the fleet's majority: every rank of a communicator must run a compatible NCCL, so one host
    on another version is version drift, whatever its environment looks like."""
    versions = {h: str(f["nccl_version"]) for h, f in facts_by_host.items()
                if f.get("nccl_version")}
    odd = fleet_minority(versions)
    if odd is None:
        return []
    return [finding(
        "nccl-version-drift", odd.hosts,
        odd.differs("the NCCL version the job loaded"), NAME, majority=odd.majority,
        odd=dict(sorted(odd.hosts.items())[:20]),
        counts={v: len(hs) for v, hs in odd.groups.items()})]


def transport(facts: dict[str, Any]) -> str | None:
    """How NCCL reaches other nodes from this host: "Socket" or "IB" (IB and RoCE), or None
    when neither its log nor its environment says.

    NCCL's docs (Environment Variables): NCCL_IB_DISABLE=1 "disables the IB/RoCE transport ...
    NCCL will fallback to using IP sockets", and NCCL_NET=Socket forces the socket network;
    the log says which network it chose ("Using network IB" / "Using network Socket").
    """
    env = facts.get("env") or {}
    networks = facts.get("networks") or []
    if env.get("NCCL_IB_DISABLE", "").strip() == "1" or \
            env.get("NCCL_NET", "").strip().lower() == "socket":
        return "Socket"
    if "Socket" in networks and "IB" not in networks:
        return "Socket"
    if "IB" in networks:
        return "IB"
    return None


def transport_mixed(facts_by_host: dict[str, dict[str, Any]]) -> list[Finding]:
    """Hosts whose NCCL goes over TCP sockets while the majority of the job uses IB/RoCE: every
    ring through them runs at socket speed, or connections between IB and socket ranks never
    form. The fleet-wide fallback (every host on sockets) is the per-host checks' case."""
    chosen = {h: t for h, f in facts_by_host.items() if (t := transport(f)) is not None}
    odd = fleet_minority(chosen)
    if odd is None or odd.majority != "IB":
        return []
    socket_hosts = sorted(h for h, t in odd.hosts.items() if t == "Socket")
    if not socket_hosts:
        return []
    why = {h: ("NCCL_IB_DISABLE=1" if (facts_by_host[h].get("env") or {}).get(
        "NCCL_IB_DISABLE", "").strip() == "1" else
        "NCCL_NET=Socket" if (facts_by_host[h].get("env") or {}).get(
            "NCCL_NET", "").strip().lower() == "socket" else
        "no IB device found by NCCL") for h in socket_hosts}
    return [finding(
        "nccl-transport-mixed", socket_hosts,
        f"NCCL uses TCP sockets on {fold_hosts(socket_hosts)} while "
        f"{len(odd.groups['IB'])} host(s) use IB/RoCE: "
        + "; ".join(f"{h}: {w}" for h, w in list(why.items())[:8]),
        NAME, hosts_on_sockets=socket_hosts, why=why, hosts_on_ib=len(odd.groups["IB"]))]


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    return [*version_drift(facts_by_host), *transport_mixed(facts_by_host)]
