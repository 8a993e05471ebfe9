"""The rdma probe's evidence for what NCCL needs of a RoCE port's GID table, on one host.

roce-no-v2-ipv4-gid accuses an Active RoCE port without a RoCE v2 GID carrying an IPv4 address,
the GID NCCL's automatic selection wants by default. On one host (no fleet to compare with) the
same table is also what a healthy port shows when NCCL does not want that GID from it:

- the job pins ``NCCL_IB_GID_INDEX`` (NCCL never runs its selection: ``ncclIbGetGidIndex``
  returns the pinned index, net_ib.cc), and the port has a configured GID at that index (a
  link-local one, which NCCL's selection never picks, is roce-nccl-gid-link-local's warning
  on the job: ``nccl_gid_link_local``);
- the job asks for IPv6 (``NCCL_IB_ADDR_FAMILY=AF_INET6``) and the port has a RoCE v2 GID of a
  global IPv6 address, or the port's netdev has no IPv4 address at all but such a GID (an
  IPv6-only fabric) and the job is not known to want AF_INET;
- the port runs RoCE v1 only (no RoCE v2 GID of any kind) with an IPv4 v1 GID: NCCL's
  ``ncclUpdateGidIndex`` prefers the address family over the RoCE version, so it picks it;
- the port is unused: no IPv4 address on its netdev, no RDMA packet ever counted on it, not
  named in the job's ``NCCL_IB_HCA``, and either the second port of a dual-port card whose
  sibling (same ``sys_image_guid``) has the v2 IPv4 GID, or left out by that ``NCCL_IB_HCA``.

This module adds the script sections that read that evidence (the netdevs' addresses, each
port's RDMA packet counters and card GUID, and the four NCCL variables of the training
processes) and the per-port facts the catalogue's rule reads. Anything not read stays None, and
a None never excuses a port (probes/faults/roce.yaml).
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Mapping
from typing import Any

from probes.base import Section
from probes.nccl import training_pids_sh
from probes.topology import hca_selector

_IB = "/sys/class/infiniband"
NCCL_VARS = ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_IB_ADDR_FAMILY",
             "NCCL_IB_ROCE_VERSION_NUM")
_VARS_ERE = "^(" + "|".join(NCCL_VARS) + ")="

# `ip -o link show` lists every netdev ("7: ens1f1np1: <BROADCAST,...> mtu 9000 ..."), `ip -o
# addr show` only those with an address ("7: ens1f1np1    inet 10.1.0.11/24 ...";
# "vlan100@ens1f0np0" for an upper device)
ADDRS = "ip -o link show 2>&1 | head -n 300; ip -o addr show 2>&1 | head -n 600"
# the RDMA packet counters of every port (a RoCE port's are the vport's RDMA counters:
# drivers/infiniband/hw/mlx5/mad.c pma_cnt_ext_assign sums transmitted/received ib_unicast and
# ib_multicast packets) and each card's system image GUID
COUNTERS = ("timeout 5 grep -H . " + f"{_IB}/*/sys_image_guid "
            + " ".join(f"{_IB}/*/ports/*/counters/{c}"
                       for c in ("port_xmit_packets", "port_rcv_packets"))
            + " 2>/dev/null | head -n 400; true")


def nccl_env_sh(params: Mapping[str, Any]) -> str:
    """Shell printing the four NCCL variables of each readable training process."""
    pids = training_pids_sh(params.get("process_pattern"))
    return (f"for p in $({pids}); do echo \"--- pid $p\"; if [ -r /proc/$p/environ ]; then "
            f"tr '\\0' '\\n' < /proc/$p/environ | grep -aE {shlex.quote(_VARS_ERE)} "
            "| cut -c1-300; else echo '--- unreadable'; fi; done; true")


_LINK = re.compile(r"^\d+:\s+(?P<net>[^\s@:]+)(?:@[^\s:]*)?:\s+<")
_ADDR = re.compile(r"^\d+:\s+(?P<net>[^\s@]+)(?:@(?P<lower>\S+))?\s+(?P<fam>inet6?)\s")
_COUNTER = re.compile(r"^\S*/infiniband/(?P<dev>[^/\s]+)/ports/(?P<port>\d+)/counters/"
                      r"(?P<name>port_xmit_packets|port_rcv_packets):\s*(?P<value>\d+)\s*$")
_GUID = re.compile(r"^\S*/infiniband/(?P<dev>[^/\s]+)/sys_image_guid:\s*(?P<value>\S+)\s*$")


_MASTER = re.compile(r">.*\smaster\s+(?P<master>\S+)")


def _masters(text: str) -> dict[str, str | None]:
    """Each netdev of ``ip -o link`` and the netdev it is enslaved to ("... master eth0 ...":
    a bond's, bridge's or VRF's port, or the SR-IOV VF that hv_netvsc joins to the synthetic
    NIC on Azure accelerated networking), None when it has no master."""
    out: dict[str, str | None] = {}
    for line in text.splitlines():
        if m := _LINK.match(line.strip()):
            master = _MASTER.search(line.split("\\", 1)[0])
            out[m.group("net")] = master.group("master") if master else None
    return out


def _ipv4_by_netdev(text: str) -> dict[str, int] | None:
    """IPv4 addresses per netdev, an upper's (VLAN, macvlan: ``name@lower``) counted for its
    lower device too; None when the text is not ``ip -o addr`` output."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        if m := _LINK.match(line.strip()):
            counts[m.group("net")] += 0
    if not counts:
        return None
    for line in text.splitlines():
        m = _ADDR.match(line.strip())
        if not m:
            continue
        if m.group("fam") == "inet":
            counts[m.group("net")] += 1
            if m.group("lower"):
                counts[m.group("lower")] += 1
    return dict(counts)


def _env(text: str) -> dict[str, str] | None:
    """Each variable's most common value over the readable training processes; None when no
    training process could be read (not measured), {} when they set none of them."""
    readable = 0
    values: dict[str, Counter[str]] = {}
    blocks = re.split(r"^--- pid \d+\s*$", text, flags=re.M)[1:]
    for block in blocks:
        if "--- unreadable" in block:
            continue
        readable += 1
        for line in block.splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and key in NCCL_VARS:
                values.setdefault(key, Counter())[value.strip()] += 1
    if not readable:
        return None
    return {k: c.most_common(1)[0][0] for k, c in sorted(values.items())}


def nccl_env(text: str) -> dict[str, str] | None:
    """The NCCL variables the training processes run with (the ``nccl_env_sh`` section)."""
    return _env(text)


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and re.fullmatch(r"-?\d+", value.strip()) else None


def _global_v6(gid: str) -> bool:
    """A GID of a global IPv6 address: not IPv4-mapped, not link-local (fe80::/10)."""
    head = gid.lower().split(":")
    return head[:6] != ["0000"] * 5 + ["ffff"] and not head[0].startswith(
        ("fe8", "fe9", "fea", "feb"))


def _link_local(gid: str) -> bool:
    """NCCL's linkLocalGid (net_ib.cc): the first 64 bits are fe80:0000:0000:0000."""
    return gid.lower().split(":")[:4] == ["fe80", "0000", "0000", "0000"]


def _nccl_version(mine: list[dict[str, Any]], env: Mapping[str, str], pinned: int | None,
                  family: str | None) -> str | None:
    """The RoCE version of the GID NCCL uses on a port (net_ib.cc ncclIbGetGidIndex): the
    pinned NCCL_IB_GID_INDEX's type; else, of the GIDs of the job's address family (IPv4-mapped,
    or global IPv6), the NCCL_IB_ROCE_VERSION_NUM one (default 2) if there is one, else the
    first (ncclUpdateGidIndex prefers the family over the version). None when unknown."""
    if pinned is not None and pinned >= 0:
        return next((g["version"] for g in mine if g["index"] == pinned), None)
    wanted = f"v{_int(env.get('NCCL_IB_ROCE_VERSION_NUM')) or 2}"
    fam = [g for g in mine if (g["ipv4"] is not None if family != "AF_INET6"
                               else _global_v6(g["gid"]))]
    if any(g["version"] == wanted for g in fam):
        return wanted
    return fam[0]["version"] if fam else None


def apply(sections: Mapping[str, Section], ports: dict[str, dict[str, Any]],
          facts: dict[str, Any]) -> None:
    """Add the GID-need facts to the Ethernet ports (and the job's NCCL variables to *facts*)."""
    addrs = sections.get("addrs")
    ipv4 = _ipv4_by_netdev(addrs.text) if addrs is not None and not addrs.missing else None
    masters = _masters(addrs.text) if ipv4 is not None and addrs is not None else {}
    counters: dict[str, int] = {}
    guids: dict[str, str] = {}
    if (sec := sections.get("rdmacnt")) is not None:
        for line in sec.text.splitlines():
            if m := _COUNTER.match(line.strip()):
                key = f"{m.group('dev')}/{int(m.group('port'))}"
                counters[key] = counters.get(key, 0) + int(m.group("value"))
            elif m := _GUID.match(line.strip()):
                guids[m.group("dev")] = m.group("value").lower()
    env = _env(sections["ncclenv"].text) if "ncclenv" in sections else None
    facts["nccl_ib_env"] = env
    pinned = _int(env.get("NCCL_IB_GID_INDEX")) if env is not None else None
    facts["nccl_gid_index"] = pinned
    family = None
    if env is not None:
        family = "AF_INET6" if env.get("NCCL_IB_ADDR_FAMILY", "").strip().upper() == "AF_INET6" \
            else "AF_INET"
    facts["nccl_addr_family"] = family
    selector = hca_selector(env.get("NCCL_IB_HCA")) if env is not None else None
    gids = facts.get("gids") or []
    roce = [p for p in ports.values() if p["link_layer"] == "Ethernet"]
    for port in roce:
        mine = [g for g in gids if g["device"] == port["device"] and g["port"] == port["port"]]
        # the GID table read, and its types (a table whose types were all refused is unread)
        read = port["gids"] is not None and port["roce_v2_gid"] is not None
        port["roce_v2_gids"] = sum(1 for g in mine if g["version"] == "v2") if read else None
        port["roce_v1_ipv4_gid"] = any(g["version"] == "v1" and g["ipv4"] for g in mine) \
            if read else None
        port["roce_v2_ipv6_gid"] = any(g["version"] == "v2" and _global_v6(g["gid"])
                                       for g in mine) if read else None
        port["nccl_gid_index_configured"] = (any(g["index"] == pinned for g in mine)
                                             if read and pinned is not None and pinned >= 0
                                             else None)
        # the pinned GID is link-local: NCCL's own selection never picks one (validGid is
        # configuredGid && !linkLocalGid, net_ib.cc): it is not routed across subnets
        port["nccl_gid_link_local"] = next(
            (_link_local(g["gid"]) for g in mine if g["index"] == pinned), None
        ) if read and pinned is not None and pinned >= 0 else None
        versions = sorted({g["version"] for g in mine if g["version"]}) if read else []
        port["gid_types"] = "|".join(versions) or None
        port["nccl_gid_version"] = (_nccl_version(mine, env, pinned, family)
                                    if read and env is not None else None)
        nets = {port["netdev"], *(g["netdev"] for g in mine)} - {None}
        seen = [n for n in nets if ipv4 is not None and n in ipv4]
        port["netdev_ipv4_addrs"] = sum(ipv4[n] for n in seen) if ipv4 and seen else None
        # the RoCE netdev is another netdev's port (Azure accelerated networking: the mlx5 VF
        # "enP*s1" is "SLAVE ... master eth0" of the hv_netvsc NIC, which holds the address);
        # the kernel fills a port's GIDs from its own netdev's (and a bond master's) addresses
        # only (drivers/infiniband/core/roce_gid_mgmt.c), so that address gives it no GID
        port["netdev_enslaved"] = (masters[port["netdev"]] is not None
                                   if port["netdev"] in masters else None)
        port["rdma_packets"] = counters.get(port["key"])
        port["job_port"] = selector(port["device"], port["port"]) if selector else None
    for port in roce:
        guid = guids.get(port["device"])
        siblings = [p for p in roce if p is not port and guid is not None
                    and guids.get(p["device"]) == guid]
        port["sibling_v2_gid"] = (any(p["state"] == "Active" and p["roce_v2_gid"]
                                      for p in siblings) if guid is not None else None)
