"""peer-reach: can every node of the job reach the others on the interface NCCL will use?

A launch that gets past the rendezvous (every rank reached MASTER_ADDR:MASTER_PORT) can still
die or hang in NCCL's bootstrap, where each rank connects to other ranks on the address of the
interface NCCL chose (NCCL_SOCKET_IFNAME, else NCCL's own pick). One node whose data interface
lost its route, a firewall rule between two racks, an interface with the wrong subnet: the master
port test cannot see any of that. This probe pings, from each node and *from its NCCL
interface*, the other nodes' addresses on *their* NCCL interface, so every tested pair is tested
in both directions and a failing pair is named with its direction.

It needs to know each node's NCCL interface and address, which the nccl probe reports; so it
runs in the same step after ``nccl`` (``uses``) and builds one command per host (``per_host``).
Bounded: with more peers than ``peer_reach_max_peers`` each node tests a deterministic sample
(its neighbours at offsets 1..k and -1..-k around the sorted node list), which still tests each
sampled pair both ways and reaches every node from 2k others.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    default_thresholds,
    finding,
    not_measured,
    script,
    split_sections,
)
from probes.hostfold import fold_hosts
from probes.model import Finding
from probes.nccl import ifname_selection
from probes.parsers import ParseError

NAME = "peer-reach"
PARALLEL = 16  # pings at once
_IFACE_OK = re.compile(r"^[A-Za-z0-9_.:@-]{1,32}$")


# --- which interface NCCL uses, and the peers to test ------------------------------------------

def nccl_interface(facts: Mapping[str, Any]) -> tuple[str, str] | None:
    """(interface, IPv4 address) NCCL uses for sockets on a host, from the nccl probe's facts.

    NCCL_SOCKET_IFNAME when set (NCCL's list syntax, probes.nccl.ifname_selection); else NCCL's
    default, per its docs (Environment Variables, NCCL_SOCKET_IFNAME): interfaces starting with
    ``ib`` first, and ``lo`` and ``docker*`` only if there is nothing else.
    """
    interfaces = [i for i in facts.get("interfaces") or [] if i.get("up") and i.get("addrs")]
    spec = facts.get("socket_ifname")
    if spec:
        chosen = ifname_selection(str(spec), interfaces)
    else:
        names = [i["name"] for i in interfaces]
        chosen = ([n for n in names if n.startswith("ib")]
                  or [n for n in names if n != "lo" and not n.startswith("docker")])
    for name in chosen:
        iface = next(i for i in interfaces if i["name"] == name)
        for addr in iface["addrs"]:
            try:
                ip = ipaddress.ip_interface(addr).ip
            except ValueError:
                continue
            if ip.version == 4 and _IFACE_OK.match(name):
                return name, str(ip)
    return None


def peers_of(host: str, hosts: list[str], max_peers: int) -> list[str]:
    """The peers *host* tests: all of them, or its neighbours at +-1..k around the sorted
    list (k = max_peers // 2), which makes every sampled pair tested from both ends."""
    ordered = sorted(set(hosts))
    if host not in ordered:
        return []
    others = [h for h in ordered if h != host]
    if len(others) <= max_peers:
        return others
    i, n = ordered.index(host), len(ordered)
    chosen = []
    for d in range(1, max(1, max_peers // 2) + 1):
        for j in ((i + d) % n, (i - d) % n):
            if ordered[j] != host and ordered[j] not in chosen:
                chosen.append(ordered[j])
    return chosen


def _max_peers(params: Mapping[str, Any]) -> int:
    try:
        return max(2, int(params.get("max_peers") or default_thresholds()["peer_reach_max_peers"]))
    except (TypeError, ValueError):
        return int(default_thresholds()["peer_reach_max_peers"])


# --- the script --------------------------------------------------------------------------------

def command(params: Mapping[str, Any]) -> str:
    """One host's script: ping each sampled peer's NCCL address from this host's NCCL
    interface (needs ``host`` and the nccl facts of every host in ``facts``)."""
    host = str(params.get("host") or "")
    nccl = (params.get("facts") or {}).get("nccl") or {}
    mine = nccl_interface(nccl.get(host) or {})
    lines = []
    if mine is None:
        lines.append("echo 'self none'")
    else:
        lines.append(f"echo {shlex.quote(f'self {host} {mine[0]} {mine[1]}')}")
    peers = peers_of(host, [str(h) for h in params.get("peers") or nccl], _max_peers(params))
    tests = []
    for peer in peers:
        theirs = nccl_interface(nccl.get(peer) or {})
        if theirs is None or mine is None:
            lines.append(f"echo {shlex.quote(f'skip {peer} no NCCL interface address known')}")
            continue
        tests.append((peer, theirs[1]))
    body = "\n".join(lines)
    if tests and mine is not None:
        iface = shlex.quote(mine[0])
        # Each ping: 2 echo requests, 2 s for an answer; the summary digested into one line
        # ("N packets transmitted, M received" in iputils, "M packets received" in busybox).
        pings = "\n".join(
            f"( out=$(timeout 8 ping -n -q -c 2 -W 2 -I {iface} {shlex.quote(addr)} 2>&1); "
            f"rc=$?; tr=$(printf '%s\\n' \"$out\" | sed -n "
            "'s/^\\([0-9]*\\) packets transmitted, \\([0-9]*\\)\\( packets\\)\\{0,1\\} "
            "received.*/\\1 \\2/p' | head -n 1); "
            "err=$(printf '%s\\n' \"$out\" | grep -i -m 1 -E "
            "'unreachable|not permitted|unknown|cannot|invalid|no such' | cut -c1-160); "
            f"echo \"peer {peer} {addr} rc=$rc tr=$tr err=$err\" ) &"
            + ("\nwait" if (k + 1) % PARALLEL == 0 else "")
            for k, (peer, addr) in enumerate(tests))
        body += "\n" + pings + "\nwait"
    return script([("pairs", body)], {"pairs": "ping"})


# --- parsing -----------------------------------------------------------------------------------

_SELF = re.compile(r"^self (\S+) (\S+) (\S+)\s*$")
_PEER = re.compile(r"^peer (\S+) (\S+) rc=(-?\d*) tr=(\d*) ?(\d*) err=(.*)$")
_SKIP = re.compile(r"^skip (\S+) (.*)$")


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    pairs = sections.get("pairs")
    if pairs is None:
        raise ParseError("peer-reach: no pairs section (not the output of this probe)")
    facts: dict[str, Any] = {"interface": None, "address": None, "peers": {}, "skipped": {},
                             "unreachable_peers": [], "missing": []}
    if pairs.missing:
        facts["missing"].append("ping")
        return facts
    for line in pairs.text.splitlines():
        line = line.strip()
        if m := _SELF.match(line):
            facts["interface"], facts["address"] = m.group(2), m.group(3)
        elif m := _PEER.match(line):
            sent = int(m.group(4)) if m.group(4) else None
            got = int(m.group(5)) if m.group(5) else None
            facts["peers"][m.group(1)] = {
                "address": m.group(2), "sent": sent, "received": got,
                "ok": bool(got), "rc": int(m.group(3)) if m.group(3) else None,
                "error": m.group(6).strip() or None}
        elif m := _SKIP.match(line):
            facts["skipped"][m.group(1)] = m.group(2)
    facts["unreachable_peers"] = sorted(p for p, r in facts["peers"].items() if not r["ok"])
    return facts


# --- checks ------------------------------------------------------------------------------------

def _denied(result: Mapping[str, Any]) -> bool:
    """ping could not even send (no permission to open the socket or bind the interface):
    a measurement that did not happen, not a path that failed."""
    return "not permitted" in (result.get("error") or "").lower()


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    if "ping" in (facts.get("missing") or []):
        return [not_measured(NAME, host, "node-to-node reachability", "ping is not installed")]
    if facts.get("interface") is None:
        return [not_measured(NAME, host, "node-to-node reachability",
                             "the interface NCCL uses here is not known (no nccl facts, or no "
                             "interface matching NCCL_SOCKET_IFNAME is up with an address)")]
    denied = [p for p, r in (facts.get("peers") or {}).items() if _denied(r)]
    if denied:
        return [not_measured(NAME, host, "node-to-node reachability",
                             f"ping may not send from {facts['interface']} here (operation not "
                             "permitted)")]
    return []


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    """Pairs that fail, with their direction; the hosts cut off from most of their peers.

    A host that fails with at least half of the peers it was tested with (and two or more) is
    the one cut off; pairs that fail without such a host are named as pairs. When more than
    half the hosts would be "cut off", nothing can tell a dead network from ICMP filtered
    everywhere: that is not measured, and no host is accused.
    """
    directed: dict[tuple[str, str], bool] = {}
    for src, facts in facts_by_host.items():
        for dst, result in (facts.get("peers") or {}).items():
            if not _denied(result):
                directed[(src, dst)] = bool(result.get("ok"))
    if not directed:
        return []
    partners: dict[str, set[str]] = {}
    failed: dict[str, set[str]] = {}
    for (src, dst), ok in directed.items():
        for a, b in ((src, dst), (dst, src)):
            partners.setdefault(a, set()).add(b)
            if not ok:
                failed.setdefault(a, set()).add(b)
    if not failed:
        return []
    cut_off = sorted(h for h, bad in failed.items()
                     if len(bad) >= 2 and 2 * len(bad) >= len(partners[h]))
    if 2 * len(cut_off) > len(partners):
        hosts = sorted(partners)
        return [finding(
            "not-measured", hosts,
            f"node-to-node reachability not measured: pings fail between most of the "
            f"{len(hosts)} hosts (ICMP filtered on the data network, or that network is down "
            "everywhere); check with the network team", NAME,
            what="node-to-node reachability", why="pings fail between most hosts")]
    pairs = sorted({tuple(sorted(p)) for p, ok in directed.items() if not ok})
    directions = [f"{s} -> {d}" for (s, d), ok in sorted(directed.items()) if not ok]
    accused = cut_off or sorted({h for pair in pairs for h in pair})
    if cut_off:
        what = (f"{fold_hosts(cut_off)} cannot reach, or be reached by, most of its peers on "
                f"NCCL's interface")
    else:
        what = "some node pairs cannot reach each other on NCCL's interface"
    return [finding(
        "peer-unreachable", accused,
        f"{what}: {len(directions)} failing direction(s), e.g. "
        + ", ".join(directions[:6]), NAME,
        cut_off=cut_off, pairs=[list(p) for p in pairs[:32]], directions=directions[:64],
        tested=len(directed))]


PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=60.0, uses=("nccl",),
              per_host=True)
