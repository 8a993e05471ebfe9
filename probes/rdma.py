"""rdma: the NICs' link-layer settings — what each RDMA port runs and how it is configured.

An evidence-sweep component: one read-only pass over sysfs and the QoS tools, no sampling.
Per RDMA device and port (``/sys/class/infiniband/*/ports/*``): the link layer (InfiniBand or
Ethernet/RoCE), state, physical state and rate; the active and maximum MTU the verbs library
reports (``ibv_devinfo``); the netdev behind the port and its MTU. For RoCE ports also: the
configured GIDs with their type (is there a RoCE v2 GID carrying an IPv4 address, the one NCCL
picks by default since 2.21), the default traffic class (MLNX_OFED ``tc/1/traffic_class``),
PFC per priority and the trust state (``mlnx_qos -i``, else ``dcb pfc/app show``, else
``lldptool``), ECN per priority (MLNX_OFED ``/sys/class/net/*/ecn/roce_np|roce_rp/enable/*``)
and global pause (``ethtool -a``). What NCCL wants of each RoCE port's GID table is read too
(probes/rdma_gid.py): the netdevs' addresses (``ip -o link/addr``), each port's RDMA packet
counters and card GUID, and the NCCL_IB_HCA / GID_INDEX / ADDR_FAMILY / ROCE_VERSION_NUM the
training processes run with.

Facts: ``ports`` (one dict per port, plain values, None where unknown) and host summaries over
the Active ports for fleet drift (``roce_active_mtus``, ``pfc_prios``, ``trust`` ...). What is
wrong with them is the fault catalogue's business (probes/faults/roce.yaml, ib-ports.yaml);
the check here only says what could not be read.
"""

from __future__ import annotations

from typing import Any

from probes.base import Context, Probe, not_measured
from probes.model import Finding
from probes.rdma_facts import NAME, command, parse


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    missing, errors = facts.get("missing") or [], facts.get("errors") or {}
    ports = facts.get("ports") or []
    if "ports" in errors:
        findings.append(not_measured(NAME, host, "RDMA ports (sysfs)", errors["ports"]))
    if not ports:
        return findings
    if "devinfo" in missing:
        findings.append(not_measured(NAME, host, "RDMA port MTU (active_mtu/max_mtu)",
                                     "ibv_devinfo is not installed"))
    elif "devinfo" in errors:
        findings.append(not_measured(NAME, host, "RDMA port MTU (active_mtu/max_mtu)",
                                     errors["devinfo"]))
    roce = [p for p in ports if p.get("link_layer") == "Ethernet" and p.get("state") == "Active"]
    if not roce:
        return findings
    if "qos" in missing:
        findings.append(not_measured(NAME, host, "RoCE PFC and trust settings",
                                     "none of mlnx_qos, dcb, lldptool is installed"))
    for key in sorted(k for k in errors if k.startswith("qos:")):
        findings.append(not_measured(NAME, host, f"RoCE PFC and trust settings of "
                                     f"{key.split(':', 1)[1]}", errors[key]))
    if "pause" in missing:
        findings.append(not_measured(NAME, host, "RoCE global pause (ethtool -a)",
                                     "ethtool is not installed"))
    for key in sorted(k for k in errors if k.startswith("pause:")):
        findings.append(not_measured(NAME, host, f"global pause of {key.split(':', 1)[1]}",
                                     errors[key]))
    absent = facts.get("ecn_absent") or []
    if absent:
        findings.append(not_measured(
            NAME, host, "RoCE ECN per priority", f"no /sys/class/net/<netdev>/ecn on "
            f"{', '.join(absent)} (the inbox mlx5 driver has none; MLNX_OFED/DOCA-OFED does)"))
    if not any(p.get("roce_v2_gid") is not None for p in roce) and "gids" not in missing:
        findings.append(not_measured(NAME, host, "RoCE GID table",
                                     "no GID could be read for the Active RoCE ports"))
    return findings


PROBE = Probe(NAME, command, parse, check, timeout_s=30.0)
