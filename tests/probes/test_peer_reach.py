"""peer-reach: node-to-node pings on the interface NCCL uses, both directions, pairs named."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from probes.base import get_probe
from probes.peer_reach import nccl_interface, peers_of
from tests.probes.probe_outputs import baseline, codes, context, sh_accepts

PROBE = get_probe("peer-reach")
NCCL = get_probe("nccl").parse(baseline("nccl"))
HOSTS = [f"gpu{i:03d}" for i in range(1, 5)]

# A fake iputils ping (same summary lines): answers every address but 10.12.4.99.
FAKE_PING = """#!/bin/sh
for a; do addr=$a; done
echo "PING $addr ($addr) 56(84) bytes of data."
echo "--- $addr ping statistics ---"
if [ "$addr" = "10.12.4.99" ]; then
  echo "2 packets transmitted, 0 received, 100% packet loss, time 1013ms"; exit 1
fi
echo "2 packets transmitted, 2 received, 0% packet loss, time 1001ms"
echo "rtt min/avg/max/mdev = 0.061/0.070/0.079/0.009 ms"
"""


def with_addr(address: str) -> dict:
    """The baseline nccl facts with eno1 on another address."""
    interfaces = [dict(i, addrs=[f"{address}/22"]) if i["name"] == "eno1" else i
                  for i in NCCL["interfaces"]]
    return dict(NCCL, interfaces=interfaces)


def test_the_interface_nccl_uses() -> None:
    assert nccl_interface(NCCL) == ("eno1", "10.12.4.21")  # NCCL_SOCKET_IFNAME=eno1
    unset = dict(NCCL, socket_ifname=None)
    ib = {"name": "ib0", "up": True, "addrs": ["192.168.50.3/24"]}
    lo = {"name": "lo", "up": True, "addrs": ["127.0.0.1/8"]}
    docker = {"name": "docker0", "up": True, "addrs": ["172.17.0.1/16"]}
    eth = {"name": "eth0", "up": True, "addrs": ["10.0.0.3/24"]}
    # NCCL's default: ib* first, never lo or docker* while something else is there
    assert nccl_interface(dict(unset, interfaces=[lo, docker, eth, ib])) == ("ib0",
                                                                            "192.168.50.3")
    assert nccl_interface(dict(unset, interfaces=[lo, docker, eth])) == ("eth0", "10.0.0.3")
    assert nccl_interface(dict(NCCL, socket_ifname="^docker,lo",
                               interfaces=[lo, docker, eth])) == ("eth0", "10.0.0.3")
    assert nccl_interface(dict(NCCL, socket_ifname="bond0")) is None
    assert nccl_interface({}) is None


def test_pairs_are_all_for_small_jobs_and_a_symmetric_sample_for_big_ones() -> None:
    assert peers_of("gpu002", HOSTS, 16) == ["gpu001", "gpu003", "gpu004"]
    big = [f"n{i:03d}" for i in range(100)]
    sample = {h: set(peers_of(h, big, 16)) for h in big}
    assert all(len(p) == 16 for p in sample.values())
    assert all(a in sample[b] for a in big for b in sample[a])  # tested from both ends
    assert set().union(*sample.values()) == set(big)


def test_the_script_pings_each_peers_nccl_address_from_this_nccl_interface(
        tmp_path: Path) -> None:
    facts = {"gpu001": NCCL, "gpu002": with_addr("10.12.4.22"),
             "gpu003": with_addr("10.12.4.99"), "gpu004": {}}
    script = PROBE.command({"host": "gpu001", "peers": HOSTS, "facts": {"nccl": facts}})
    assert sh_accepts(script).returncode == 0
    assert "-I eno1 10.12.4.22" in script and "-I eno1 10.12.4.99" in script
    (tmp_path / "ping").write_text(FAKE_PING)
    (tmp_path / "ping").chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env,
                         timeout=60).stdout
    result = PROBE.parse(out)
    assert (result["interface"], result["address"]) == ("eno1", "10.12.4.21")
    assert result["peers"]["gpu002"]["ok"] and not result["peers"]["gpu003"]["ok"]
    assert result["peers"]["gpu003"]["sent"] == 2 and result["peers"]["gpu003"]["received"] == 0
    assert result["unreachable_peers"] == ["gpu003"]
    assert result["skipped"] == {"gpu004": "no NCCL interface address known"}


def test_ping_missing_is_not_measured() -> None:
    facts = PROBE.parse("=== diag:missing pairs\n")
    assert codes(PROBE.check("gpu001", facts, context())) == ["not-measured"]


def run_fleet(fails: set[tuple[str, str]], hosts: list[str] = HOSTS,
              error: str = "") -> list:
    text = {}
    for src in hosts:
        lines = ["=== diag:section pairs", f"self {src} eno1 10.0.0.1"]
        for dst in hosts:
            if dst != src:
                got = 0 if (src, dst) in fails else 2
                lines.append(f"peer {dst} 10.0.0.2 rc={0 if got else 1} tr=2 {got} err={error}")
        text[src] = "\n".join([*lines, "=== diag:rc pairs 0"]) + "\n"
    facts = {h: PROBE.parse(t) for h, t in text.items()}
    assert all(PROBE.check(h, f, context()) == [] or error for h, f in facts.items())
    return PROBE.check_fleet(facts, context())


def test_a_node_its_peers_cannot_reach_is_named_with_the_direction() -> None:
    hosts = [f"gpu{i:03d}" for i in range(1, 9)]
    findings = run_fleet({(h, "gpu005") for h in hosts if h != "gpu005"}, hosts)
    assert codes(findings) == ["peer-unreachable"] and findings[0].hosts == ("gpu005",)
    assert findings[0].evidence["cut_off"] == ["gpu005"]
    assert "gpu001 -> gpu005" in findings[0].evidence["directions"]
    assert "gpu005 -> gpu001" not in findings[0].evidence["directions"]


def test_one_blocked_pair_names_the_pair() -> None:
    findings = run_fleet({("gpu001", "gpu003"), ("gpu003", "gpu001")})
    assert codes(findings) == ["peer-unreachable"]
    assert findings[0].hosts == ("gpu001", "gpu003")
    assert findings[0].evidence["pairs"] == [["gpu001", "gpu003"]]


def test_every_pair_failing_accuses_nobody() -> None:
    # ICMP filtered on the whole data network looks like this too: not measured, no culprit.
    findings = run_fleet({(a, b) for a in HOSTS for b in HOSTS if a != b})
    assert codes(findings) == ["not-measured"]


def test_ping_not_permitted_is_not_a_failed_path() -> None:
    facts = PROBE.parse("=== diag:section pairs\nself gpu001 eno1 10.0.0.1\n"
                        "peer gpu002 10.0.0.2 rc=2 tr= err=ping: SO_BINDTODEVICE: Operation "
                        "not permitted\n=== diag:rc pairs 0\n")
    assert codes(PROBE.check("gpu001", facts, context())) == ["not-measured"]
    assert PROBE.check_fleet({"gpu001": facts}, context()) == []


def test_all_pairs_answering_is_quiet_even_with_a_lost_packet() -> None:
    lossy = ("=== diag:section pairs\nself gpu002 eno1 10.0.0.2\n"
             "peer gpu007 10.0.0.7 rc=0 tr=2 1 err=\n=== diag:rc pairs 0\n")
    facts = PROBE.parse(lossy)
    assert facts["peers"]["gpu007"]["ok"] and PROBE.check_fleet({"gpu002": facts},
                                                                context()) == []
