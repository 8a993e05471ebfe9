"""The job's NCCL settings against each host's devices, judged across the walk (the nccl
probe's check_fleet): NCCL_SOCKET_IFNAME selecting no interface that is up, NCCL_IB_HCA naming
no usable HCA port, NCCL_IB_DISABLE=1, NCCL on TCP sockets where RDMA ports are up.

Each is the host's when it is the odd one out (its interfaces are named differently, its HCA
port is down). Raised on most hosts of the walk (at least 3 and more than half: the fault
catalogue's ``on_most_hosts`` rule, docs/fault-format.md), it is the job's setting (one
environment, one image: a variable copied from another cluster, an image without rdma-core):
one finding naming no host, so no healthy host is accused of the job's configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.base import finding
from probes.hostfold import fold_counted
from probes.model import Finding
from probes.nccl_env import hca_problems, ifname_selection

NAME = "nccl"
JOB_WIDE_MIN_HOSTS = 3
# what each finding says about the job when most hosts raise it: the setting it reads
_SETTING = {"nccl-ifname-mismatch": "socket_ifname", "nccl-hca-mismatch": "ib_hca",
            "nccl-ib-disabled": "ib_disable", "nccl-socket-transport": "networks"}


def _active_hcas(facts: Mapping[str, Any]) -> list[str]:
    return [f"{h['name']}:{h['port']}" for h in facts.get("hcas") or []
            if h["state"] == "ACTIVE"]


def setting_findings(host: str, facts: Mapping[str, Any]) -> list[Finding]:
    """This host's findings about the job's NCCL settings and the transport NCCL chose."""
    findings: list[Finding] = []
    hcas = facts.get("hcas") or []
    active = _active_hcas(facts)
    if "Socket" in (facts.get("networks") or []) and hcas:
        findings.append(finding(
            "nccl-socket-transport", [host],
            f"NCCL logged the Socket network (TCP) although {host} has RDMA HCAs "
            f"({', '.join(sorted({h['name'] for h in hcas})[:8])})",
            NAME, networks=facts["networks"], hcas_active=active[:16]))
    ifname, interfaces = facts.get("socket_ifname"), facts.get("interfaces")
    if ifname and interfaces is not None and not ifname_selection(ifname, interfaces):
        up = [i["name"] for i in interfaces if i["up"] and i["addrs"]]
        findings.append(finding(
            "nccl-ifname-mismatch", [host],
            f"NCCL_SOCKET_IFNAME={ifname} selects no interface that is up with an address "
            f"on {host} (up: {', '.join(up[:10]) or 'none'})",
            NAME, socket_ifname=ifname, interfaces_up=up[:20]))
    hca = facts.get("ib_hca")
    if hca and facts.get("hcas") is not None:
        problems = hca_problems(hca, hcas)
        if problems:
            findings.append(finding(
                "nccl-hca-mismatch", [host],
                f"NCCL_IB_HCA={hca} does not match a usable HCA port on {host}: "
                + "; ".join(problems[:4]),
                NAME, ib_hca=hca, problems=problems[:8],
                hcas={f"{h['name']}:{h['port']}": h["state"] for h in hcas[:16]}))
    env = facts.get("env") or {}
    if str(env.get("NCCL_IB_DISABLE", "")).strip() == "1" and active:
        findings.append(finding(
            "nccl-ib-disabled", [host],
            f"NCCL_IB_DISABLE=1 on {host}, which has {len(active)} active RDMA port(s): "
            "NCCL uses TCP sockets instead", NAME, ib_disable="1", hcas_active=active[:16]))
    return findings


def job_settings(facts_by_host: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """``setting_findings`` of every host, a code raised on most of them as one finding of
    the job naming no host."""
    by_code: dict[str, list[Finding]] = {}
    for host, facts in facts_by_host.items():
        for f in setting_findings(host, facts):
            by_code.setdefault(f.code, []).append(f)
    out: list[Finding] = []
    for code, found in by_code.items():
        hosts = [h for f in found for h in f.hosts]
        if len(hosts) < JOB_WIDE_MIN_HOSTS or 2 * len(hosts) <= len(facts_by_host):
            out += found
            continue
        key = _SETTING[code]
        example = found[0]
        text = example.message.replace(example.hosts[0], "each host") if example.hosts \
            else example.message
        out.append(finding(
            code, [], f"the job, on {len(hosts)} of {len(facts_by_host)} hosts "
            f"({fold_counted(hosts)}): {text}. The same on most hosts is the job's setting "
            "(its environment or image), not a fault of each host", NAME,
            **{key: example.evidence.get(key)}, job_wide=True, scope="job",
            hosts_raised=len(hosts), hosts_read=len(facts_by_host),
            raised_on=fold_counted(hosts), example=example.evidence))
    return out
