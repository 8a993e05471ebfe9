"""RoCE hosts for the rdma and network probe tests, built from the baseline and real samples.

The project's baseline node is InfiniBand only; RoCE faults need a RoCE node. ``rdma_roce``
gives the rdma probe's output for ConnectX-7 ports running Ethernet, with the real mlnx_qos
output of fixtures/real (trust dscp, PFC on priority 3) for every netdev, the GID layout of
the real show_gids samples (link-local v1/v2, then the IPv4 address v1/v2 at index 3),
traffic class 106, ECN on every priority and global pause off. ``network_roce`` gives the
network probe's output for the same ports, with ethtool -S counters of the real ethq mlx5
sample as the script keeps them (aggregate counters, zeros left out but pause/discard/storm).
Keyword arguments change one setting, so a test (or an example of probes/faults/roce.yaml)
says only what differs.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from typing import Any

from tests.probes.probe_outputs import baseline, output, real, section_text

IB = "/sys/class/infiniband"
BUSES = (26, 60, 77, 94, 156, 188, 204, 220)
QOS_SAMPLE = "mlnx-qos__proxmox-mce0-firmware-dcbx-dscp-buffers-pfc-prio3-ets-50-50"
ETHTOOL_SAMPLE = ("ethtool-S__ethq-tests-mlx5-core-cx4-lx-ubuntu18.04-all-751-counters-no-banner"
                  "-no-indent")


def netdev(i: int) -> str:
    return f"enp{BUSES[i]}s0np0"


def _gid(i: int, index: int, ipv4_from: int = 2) -> tuple[str, str]:
    """GIDs in show_gids' order: v1/v2 pairs of link-local addresses below *ipv4_from*, then
    the pair of the port's IPv4 address 10.1.<i>.11 (the real samples: index 2-3, or 4-5
    after a second link-local pair)."""
    kind = ("IB/RoCE v1", "RoCE v2")[index % 2]
    if index < ipv4_from:
        return f"fe80:0000:0000:0000:5c25:73ff:fe{index // 2:02x}:{i:04x}", kind
    return f"0000:0000:0000:0000:0000:ffff:0a01:{i:02x}0b", kind


def qos_text(pfc: str = "0   0   0   1   0   0   0   0", trust: str = "dscp") -> str:
    """The real Proxmox mlnx_qos output with the PFC row or the trust state changed."""
    text = real(QOS_SAMPLE)
    text = text.replace("enabled     0   0   0   1   0   0   0   0", f"enabled     {pfc}")
    if trust != "dscp":
        block = r"(?m)^Priority trust state: dscp\ndscp2prio mapping:\n(?:[ \t]+prio:[^\n]*\n)+"
        text = re.sub(block, f"Priority trust state: {trust}\n", text)
    return text


def rdma_roce(ports: int = 2, *, active_mtu: int = 4096, netdev_mtu: int = 9000,
              state: str = "4: ACTIVE", gids: tuple[int, ...] = (0, 1, 2, 3),
              tc: str | None = "Global tclass=106", qos: str | None = None,
              qos_tool: str = "mlnx_qos", ecn_np: str = "11111111", ecn_rp: str = "11111111",
              ecn: bool = True, pause: tuple[str, str] = ("off", "off"), vlan: int | None = None,
              ipv4_from: int = 2,
              only: Mapping[int, Mapping[str, Any]] | None = None,
              extra: Mapping[str, str] | None = None) -> str:
    """The rdma probe's output for *ports* RoCE ports; ``only={i: {...}}`` overrides port i;
    ``extra`` adds sections (addrs, rdmacnt, ncclenv: probes/rdma_gid.py), unread otherwise."""
    cfg_all = dict(active_mtu=active_mtu, netdev_mtu=netdev_mtu, state=state, gids=gids, tc=tc,
                   qos=qos, ecn_np=ecn_np, ecn_rp=ecn_rp, pause=pause, vlan=vlan,
                   ipv4_from=ipv4_from)
    cfgs = [{**cfg_all, **(only or {}).get(i, {})} for i in range(ports)]
    cas = [f"mlx5_{i}" for i in range(ports)]
    ports_text = f"devices {ports}\n"
    for attr in ("link_layer", "state", "phys_state", "rate"):
        for i, ca in enumerate(cas):
            value = {"link_layer": "Ethernet", "state": cfgs[i]["state"],
                     "phys_state": "5: LinkUp" if "ACTIVE" in cfgs[i]["state"] else "3: Disabled",
                     "rate": "400 Gb/sec (4X NDR)"}[attr]
            ports_text += f"{IB}/{ca}/ports/1/{attr}:{value}\n"
    devinfo = "".join(
        f"hca_id:\t{ca}\n\t\tport:\t1\n\t\t\tstate:\t\t\t"
        + ("PORT_ACTIVE (4)" if "ACTIVE" in cfgs[i]["state"] else "PORT_DOWN (1)")
        + f"\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t{cfgs[i]['active_mtu']} "
        f"({ {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}[cfgs[i]['active_mtu']] })\n"
        "\t\t\tlink_layer:\t\tEthernet\n" for i, ca in enumerate(cas))
    netdevs = ""
    for attr in ("mtu", "dev_port", "operstate"):
        for i, ca in enumerate(cas):
            value = {"mtu": str(cfgs[i]["netdev_mtu"]), "dev_port": "0", "operstate": "up"}[attr]
            netdevs += f"{IB}/{ca}/device/net/{netdev(i)}/{attr}:{value}\n"
    gids_text = ""
    for i, ca in enumerate(cas):
        base = f"{IB}/{ca}/ports/1"
        present = cfgs[i]["gids"]
        first = cfgs[i]["ipv4_from"]
        gids_text += "".join(f"{base}/gids/{g}:{_gid(i, g, first)[0]}\n" for g in present)
        gids_text += "".join(f"{base}/gid_attrs/types/{g}:{_gid(i, g, first)[1]}\n"
                             for g in present)
        vdev = f"{netdev(i)}.{cfgs[i]['vlan']}" if cfgs[i]["vlan"] else netdev(i)
        gids_text += "".join(f"{base}/gid_attrs/ndevs/{g}:{netdev(i) if g < first else vdev}\n"
                             for g in present)
        gids_text += f"roce_netdev {ca} 1 {netdev(i)}\n"
        for dev in sorted({netdev(i), vdev}):
            gids_text += (f"/sys/class/net/{dev}/mtu:{cfgs[i]['netdev_mtu']}\n"
                          f"/sys/class/net/{dev}/operstate:up\n")
            if dev != netdev(i):
                gids_text += f"/sys/class/net/{dev}/uevent:DEVTYPE=vlan\n"
            gids_text += f"/sys/class/net/{dev}/uevent:INTERFACE={dev}\n"
    tc_text = "".join(f"{IB}/{ca}/tc/1/traffic_class:{cfgs[i]['tc']} \n"
                      for i, ca in enumerate(cas) if cfgs[i]["tc"] is not None)
    qos_text_all = ""
    for i in range(ports):
        qos_text_all += f"--- {netdev(i)}\ntool {qos_tool}\n"
        if qos_tool == "mlnx_qos":
            qos_text_all += "rc 0\n" + (cfgs[i]["qos"] or qos_text())
        elif qos_tool == "dcb":
            qos_text_all += ("rc 0\npfc-cap 8 macsec-bypass off delay 0 \n"
                             "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n"
                             "app rc 0\n")
    ecn_text = ""
    for i in range(ports):
        if not ecn:
            ecn_text += f"no_ecn {netdev(i)}\n"
            continue
        for algo, bits in (("roce_np", cfgs[i]["ecn_np"]), ("roce_rp", cfgs[i]["ecn_rp"])):
            ecn_text += "".join(f"/sys/class/net/{netdev(i)}/ecn/{algo}/enable/{p}:{bit}\n"
                                for p, bit in enumerate(bits))
    pause_text = "".join(
        f"--- {netdev(i)}\nPause parameters for {netdev(i)}:\nAutonegotiate:\toff\n"
        f"RX:\t\t{cfgs[i]['pause'][0]}\nTX:\t\t{cfgs[i]['pause'][1]}\n\n" for i in range(ports))
    return output({"ports": ports_text, "devinfo": devinfo, "netdevs": netdevs,
                   "gids": gids_text, "tc": tc_text, "qos": qos_text_all, "ecn": ecn_text,
                   "pause": pause_text, **(extra or {})})


# --- the network probe on the same RoCE ports ----------------------------------------------------

def kept_ethtool(text: str) -> str:
    """*text* (ethtool -S) through the network script's own filter (grep -vE | awk)."""
    from probes.network_facts import _ETH_SAMPLE

    m = re.search(r"2>&1 \| (grep -vE .*? \| head -n \d+);", _ETH_SAMPLE)
    assert m, "the eth sample's filter changed"
    run = subprocess.run(["sh", "-c", m.group(1)], input=text, capture_output=True, text=True,
                         timeout=30)
    return run.stdout


def ethtool_counters() -> dict[str, int]:
    """The real ethq mlx5 counters, as the NIC statistics of a RoCE port."""
    counters = {}
    for line in real(ETHTOOL_SAMPLE).splitlines():
        name, _, value = line.partition(":")
        if value.strip().isdigit():
            counters[name.strip()] = int(value)
    return counters


def ethtool_text(counters: Mapping[str, int]) -> str:
    return "NIC statistics:\n" + "".join(f"     {n}: {v}\n" for n, v in counters.items())


def network_roce(ports: int = 2, *, before: Mapping[int, Mapping[str, int]] | None = None,
                 after: Mapping[int, Mapping[str, int]] | None = None,
                 ib_after: Mapping[int, Mapping[str, int]] | None = None) -> str:
    """The network probe's output for *ports* RoCE ports; counters changed per port index."""
    base = baseline("network")
    ibstat = section_text(base, "ibstat")
    blocks = re.findall(r"(?ms)^CA '.*?(?=^CA '|\Z)", ibstat)[:ports]
    ibstat = "".join(re.sub(r"(?m)^(\s*Link layer: ).*$", r"\1Ethernet", b) for b in blocks)
    counters = ethtool_counters()
    eth: dict[int, str] = {}
    for n, changes in ((1, before or {}), (2, after or {})):
        body = ""
        for i in range(ports):
            now = {**counters, **changes.get(i, {})}
            if n == 2:  # traffic between the samples
                for name, rise in (("rx_packets_phy", 1_000_000), ("tx_packets_phy", 1_000_000),
                                   ("rx_bytes_phy", 4_096_000_000),
                                   ("tx_bytes_phy", 4_096_000_000)):
                    now[name] += rise
                now.update(changes.get(i, {}))
            body += f"--- {netdev(i)} mlx5_{i}\n" + kept_ethtool(ethtool_text(now))
        eth[n] = body

    def keep(section: str, changes: Mapping[int, Mapping[str, int]] | None = None) -> str:
        lines = []
        for line in section_text(base, section).splitlines():
            m = re.match(r"^\S*/infiniband/mlx5_(\d+)/ports/1/(?:hw_)?counters/(\w+):", line)
            if not m or int(m.group(1)) >= ports:
                continue
            value = (changes or {}).get(int(m.group(1)), {}).get(m.group(2))
            lines.append(line if value is None else f"{line.rsplit(':', 1)[0]}:{value}")
        return "\n".join(lines) + "\n"

    return output({
        "ibstat": ibstat, "devinfo": "skipped: ibstat answered\n",
        "netdev": "".join(f"mlx5_{i} port 1 ==> {netdev(i)} (Up)\n" for i in range(ports)),
        "ifflags": "".join(f"mlx5_{i} {netdev(i)} 0x1003 0\n" for i in range(ports)),
        "interval": "3\n",
        "ib_1": keep("ib_1"), "hw_1": keep("hw_1"), "eth_1": eth[1],
        "tcp_1": section_text(base, "tcp_1"), "sleep": "",
        "ib_2": keep("ib_2", ib_after), "hw_2": keep("hw_2"), "eth_2": eth[2],
        "tcp_2": section_text(base, "tcp_2"),
    })
