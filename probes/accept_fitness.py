"""fitness (acceptance L0, read-only): is the node fit to be tested at all?

Before anything loads a GPU: the GPUs are all there with their PCIe links at full width,
persistence mode is on (Azure's checks fail it off), Fabric Manager runs where NVSwitches need
it, every InfiniBand port is Active at the fleet's rate with one port per GPU, nvidia_peermem is
loaded for GPUDirect RDMA, a RoCE fabric has PFC and ECN on, the shared checkpoint mount is a
network filesystem, and the node reaches its peers (and they it). Versions against a pinned
baseline and the GPU<->NIC placement are the versions and topology probes' part of L0.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    finding,
    fleet_minority,
    guard_parse,
    not_measured,
    script,
    section_reader,
    split_sections,
)
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "fitness"
NETWORK_FS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "wekafs", "cifs", "smb3", "ceph",
              "glusterfs", "9p", "virtiofs")
_WIDTH = re.compile(r"^\s*Link Width\s*$")
_MAX = re.compile(r"^\s*Max\s*:\s*(\d+)x\s*$")
_CUR = re.compile(r"^\s*Current\s*:\s*(\d+)x\s*$")
_UTILIZATION = re.compile(r"^\s*Utilization\s*$")
_GPU_UTIL = re.compile(r"^\s*(?:Gpu|GPU)\s*:\s*(\d+)\s*%")
_REACH = re.compile(r"^(\S+) (\d+)$")
_MAX_PEERS = 512
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def command(params: Mapping[str, Any]) -> str:
    sections = [("smi", "timeout 30 nvidia-smi -q"),
                ("nvswitch", "timeout 10 lspci -n -d 10de: | awk '$2 ~ /^0680/' | wc -l"),
                ("fabricmanager", "if pgrep -x nv-fabricmanager >/dev/null 2>&1; "
                                  "then echo running; else echo 'not running'; fi")]
    if params.get("rdma") is not False:
        sections += [("ibstat", "timeout 20 ibstat"),
                     # an unreadable /proc/modules is not measured, not "not loaded"
                     ("peermem", "if [ -r /proc/modules ]; then grep -E "
                                 "'^(nvidia_peermem|nv_peer_mem) ' /proc/modules "
                                 "|| echo 'not loaded'; else echo 'unreadable /proc/modules'; "
                                 "fi"),
                     ("roce", _ROCE)]
    mount = params.get("mount")
    if mount:
        sections.append(("mount", f"timeout 10 stat -f -c %T {shlex.quote(str(mount))}"))
    peers = [str(p) for p in (params.get("peers") or []) if _NAME.match(str(p))][:_MAX_PEERS]
    if peers:
        sections.append(("reach", "printf '%s\\n' " + " ".join(shlex.quote(p) for p in peers)
                         + " | xargs -P 16 -I{} sh -c 'ping -c1 -W2 \"$1\" >/dev/null 2>&1; "
                           "echo \"$1 $?\"' _ {}"))
    return script(sections, {"smi": "nvidia-smi", "nvswitch": "lspci", "ibstat": "ibstat",
                             "reach": "ping"})


# Per RDMA Ethernet netdev: its ECN switches and, where mlnx_qos exists, the PFC row.
_ROCE = ("for d in /sys/class/infiniband/*; do [ -d \"$d\" ] || continue; "
         "[ \"$(cat \"$d\"/ports/1/link_layer 2>/dev/null)\" = Ethernet ] || continue; "
         "for n in \"$d\"/device/net/*; do [ -e \"$n\" ] || continue; i=${n##*/}; "
         "echo \"--- $i\"; grep -H . /sys/class/net/$i/ecn/roce_np/enable/* "
         "/sys/class/net/$i/ecn/roce_rp/enable/* 2>/dev/null; "
         "command -v mlnx_qos >/dev/null 2>&1 && timeout 10 mlnx_qos -i $i 2>&1 "
         "| grep -iE '^[[:space:]]*enabled'; done; done; true")


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    missing: list[str] = []
    read = section_reader(sections, missing)
    facts: dict[str, Any] = {"gpu_count": None, "gpu_name": None, "persistence_off": [],
                             "pcie_narrow": [], "nvswitches": None, "fabric_manager": None,
                             "ports": [], "peermem": None, "roce": {}, "mount_fs": None,
                             "unreachable": [], "unresolved": [], "missing": missing}
    if (smi := read("smi")) is not None:
        try:
            q = parse_kind("nvidia-smi-q", smi)
            facts["gpu_count"] = q.get("attached_gpus") or len(q.get("gpus") or [])
            facts["gpu_name"] = next((g.get("name") for g in q.get("gpus") or []), None)
            facts["persistence_off"] = [i for i, g in enumerate(q.get("gpus") or [])
                                        if g.get("persistence_mode") == "Disabled"]
        except ParseError:
            missing.append("smi")
        facts["pcie_narrow"] = _narrow_links(smi)
    if (nvs := read("nvswitch")) is not None and nvs.strip().isdigit():
        facts["nvswitches"] = int(nvs.strip())
    if (fm := read("fabricmanager")) is not None:
        facts["fabric_manager"] = fm.strip() == "running"
    if (ib := read("ibstat")) is not None:
        try:
            facts["ports"] = [{"ca": ca["name"], "port": p["port"], "state": p["state"],
                               "rate_gbit_s": p["rate_gbit_s"], "link_layer": p["link_layer"]}
                              for ca in parse_kind("ibstat", ib)["cas"] for p in ca["ports"]]
        except ParseError:
            missing.append("ibstat")
    if (pm := read("peermem")) is not None:
        if pm.startswith("unreadable"):
            missing.append("peermem")
        else:
            facts["peermem"] = "not loaded" not in pm
    if (roce := read("roce")) is not None:
        facts["roce"] = _roce(roce)
    if (mount := read("mount")) is not None:
        facts["mount_fs"] = mount.strip() or None
    for line in (read("reach") or "").splitlines():
        if m := _REACH.match(line.strip()):
            rc = int(m.group(2))
            if rc == 2:
                facts["unresolved"].append(m.group(1))
            elif rc != 0:
                facts["unreachable"].append(m.group(1))
    return facts


def _narrow_links(text: str) -> list[dict[str, int | None]]:
    """GPUs whose PCIe link runs narrower than its maximum (nvidia-smi -q, per GPU in order),
    each with its utilization (None where not printed): an idle GPU may lower its link's
    width as well as its generation ("These may be reduced when the GPU is not in use",
    nvidia-smi --help-query-gpu), so the check tells idle from busy."""
    narrow: list[dict[str, int | None]] = []
    gpu, lines = -1, text.splitlines()
    util: dict[int, int] = {}
    for i, line in enumerate(lines):
        if line.startswith("GPU "):
            gpu += 1
        if _WIDTH.match(line) and i + 2 < len(lines):
            mx, cur = _MAX.match(lines[i + 1]), _CUR.match(lines[i + 2])
            if mx and cur and int(cur.group(1)) < int(mx.group(1)):
                narrow.append({"gpu": max(gpu, 0), "max": int(mx.group(1)),
                               "current": int(cur.group(1))})
        # "Gpu" before R575, "GPU" since: the first row of the Utilization section
        if _UTILIZATION.match(line) and i + 1 < len(lines) and \
                (busy := _GPU_UTIL.match(lines[i + 1])):
            util[max(gpu, 0)] = int(busy.group(1))
    for link in narrow:
        link["utilization_pct"] = util.get(int(link["gpu"] or 0))
    return narrow


def _pcie_findings(host: str, narrow: list[dict[str, Any]], ctx: Context) -> list[Finding]:
    """A busy GPU's narrow link is a bad slot, riser or retimer (fitness-pcie-degraded); an
    idle one's (a node under acceptance is idle) is what the GPU does to save power: said, and
    left to L1's host-to-device bandwidth test to measure under load (pcie-narrow-at-idle,
    never a reason to keep the node drained on its own)."""
    if not narrow:
        return []
    busy_pct = ctx.threshold("pcie_gen_busy_pct")

    def words(links: list[dict[str, Any]]) -> str:
        return ", ".join(f"GPU {n['gpu']} x{n['current']} of x{n['max']}" + (
            f" at {n['utilization_pct']} % busy" if n.get("utilization_pct") is not None
            else "") for n in links)

    busy = [n for n in narrow if (n.get("utilization_pct") or 0) >= busy_pct]
    idle = [n for n in narrow if n not in busy]
    found = []
    if busy:
        found.append(finding("fitness-pcie-degraded", [host], "PCIe link narrower than its "
                             f"maximum on {host} while the GPU is busy: {words(busy)}", NAME,
                             links=busy))
    if idle:
        found.append(finding("pcie-narrow-at-idle", [host], f"{host}: idle GPU PCIe link(s) "
                             f"narrower than their maximum: {words(idle)}; an idle GPU may "
                             "reduce its link (nvidia-smi): L1's host-to-device bandwidth "
                             "test measures it under load", NAME, links=idle))
    return found


def _roce(text: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("--- "):
            current = out.setdefault(line[4:].strip(), {"ecn": [], "pfc": None})
        elif current is not None and "/ecn/" in line and ":" in line:
            current["ecn"].append(line.rsplit(":", 1)[1].strip() == "1")
        elif current is not None and line.strip().lower().startswith("enabled"):
            current["pfc"] = any(tok == "1" for tok in line.split()[1:])
    return out


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    found: list[Finding] = []
    for what in facts.get("missing") or []:
        found.append(not_measured(NAME, host, f"fitness: {what}", "tool missing or unreadable"))
    found += _pcie_findings(host, facts.get("pcie_narrow") or [], ctx)
    if facts.get("persistence_off"):
        found.append(finding("fitness-persistence-off", [host],
                             f"persistence mode is off on {host} (GPU "
                             + ", ".join(map(str, facts["persistence_off"])) + ")", NAME,
                             gpus=facts["persistence_off"]))
    if facts.get("nvswitches") and facts.get("fabric_manager") is False:
        found.append(finding("fitness-fabric-manager", [host],
                             f"{host} has {facts['nvswitches']} NVSwitch(es) and Fabric Manager "
                             "(nv-fabricmanager) is not running", NAME))
    found += _rdma_findings(host, facts, ctx)
    for name, what in _UNMEASURED.items():  # said, never taken for a pass or a fault
        if name in (facts.get("missing") or []):
            found.append(finding("not-measured", [host], f"{what} on {host}", NAME,
                                 section=name))
    fs = facts.get("mount_fs")
    if ctx.params.get("mount") and (fs is None or not fs.startswith((*NETWORK_FS, "fuse"))):
        found.append(finding("fitness-mount", [host],
                             f"the shared mount {ctx.params['mount']} on {host} is "
                             + (f"a local {fs} filesystem" if fs else "missing"), NAME,
                             path=ctx.params["mount"], fs_type=fs))
    return found


_UNMEASURED = {
    "peermem": "nvidia_peermem not measured: /proc/modules is unreadable",
    "reach": "reachability to the peers not measured: L0 needs ping on the node, and it is "
             "not installed",
}


def _rdma_findings(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    if ctx.params.get("rdma") is False:
        return []
    found: list[Finding] = []
    ib = [p for p in facts.get("ports") or [] if p["link_layer"] == "InfiniBand"]
    down = [p for p in ib if p["state"] != "Active"]
    if down:
        found.append(finding("fitness-port-down", [host], f"InfiniBand port(s) not Active on "
                             f"{host}: " + ", ".join(f"{p['ca']}/{p['port']} {p['state']}"
                                                     for p in down), NAME, ports=down))
    gpus = facts.get("gpu_count") or 0
    if facts.get("ports") is not None and gpus and len(ib) - len(down) < gpus:
        found.append(finding("fitness-nic-per-gpu", [host],
                             f"{host} has {len(ib) - len(down)} Active InfiniBand port(s) for "
                             f"{gpus} GPUs (one per GPU expected)", NAME,
                             ports=len(ib) - len(down), gpus=gpus))
    # A site whose nodes do not use GPUDirect RDMA says so (--param fitness.gpudirect=false).
    if facts.get("peermem") is False and ib and ctx.params.get("gpudirect") is not False:
        found.append(finding("fitness-peermem-missing", [host],
                             f"nvidia_peermem is not loaded on {host}: no GPUDirect RDMA", NAME))
    if ctx.params.get("fabric") == "roce":
        bad = [i for i, r in (facts.get("roce") or {}).items()
               if not r["ecn"] or not all(r["ecn"]) or r["pfc"] is False]
        if bad:
            found.append(finding("fitness-roce-qos", [host], f"RoCE lossless settings off on "
                                 f"{host}: {', '.join(bad)} (ECN and PFC must be on)", NAME,
                                 netdevs=bad))
    return found


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    found: list[Finding] = []
    counts = {h: f["gpu_count"] for h, f in facts_by_host.items() if f.get("gpu_count")}
    expected = ctx.params.get("gpus_per_node")
    short = ({h: c for h, c in counts.items() if c < int(expected)} if expected
             else (m.hosts if (m := fleet_minority(counts, below=True)) else {}))
    if short:
        found.append(finding("fitness-gpu-count", sorted(short), "GPU count below "
                             + (f"{expected}" if expected else "the fleet's") + ": "
                             + ", ".join(f"{h} ({c})" for h, c in sorted(short.items())),
                             NAME, counts=short))
    rates = {f"{h} {p['ca']}": p["rate_gbit_s"] for h, f in facts_by_host.items()
             for p in f.get("ports") or []
             if p["link_layer"] == "InfiniBand" and p["state"] == "Active"}
    want = ctx.params.get("rate_gbit_s")
    slow = ({k: r for k, r in rates.items() if r < float(want)} if want
            else (m.hosts if (m := fleet_minority(rates, below=True)) else {}))
    if slow and ctx.params.get("rdma") is not False:
        found.append(finding("fitness-port-rate", sorted({k.split()[0] for k in slow}),
                             "InfiniBand ports below the expected rate: " + ", ".join(
                                 f"{k} {r:g} Gb/s" for k, r in sorted(slow.items())), NAME,
                             ports=slow))
    found += _reach_findings(facts_by_host)
    return found


def _reach_findings(facts_by_host: dict[str, dict[str, Any]]) -> list[Finding]:
    """Two-way reachability: a host that cannot reach half its peers, or that half its peers
    cannot reach, is the odd one out; a pair that fails alone names both."""
    cannot = {h: set(f.get("unreachable") or []) for h, f in facts_by_host.items()}
    hosts = list(facts_by_host)
    if len(hosts) < 2:
        return []
    bad = set()
    for host in hosts:
        out = len(cannot[host])
        into = sum(1 for other in hosts if host in cannot[other])
        if out * 2 >= len(hosts) - 1 > 0 or into * 2 >= len(hosts) - 1 > 0:
            bad.add(host)
    if not bad:
        return []
    return [finding("fitness-unreachable", sorted(bad),
                    "host(s) that cannot reach, or cannot be reached by, half their peers: "
                    + ", ".join(sorted(bad)), NAME,
                    unreachable={h: sorted(cannot[h]) for h in sorted(bad)})]


PROBE = Probe(NAME, command, guard_parse(NAME, parse), check, check_fleet, timeout_s=60.0)
