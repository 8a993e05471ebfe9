"""topology: how each GPU reaches its NICs and its peers.

GPUDirect RDMA is only fast when a GPU and its NIC share a PCIe switch; a GPU whose nearest RDMA
NIC is across the CPU interconnect (SYS) makes NCCL either skip GPUDirect or push every byte
through the other socket, and one such node slows the whole ring. NVLink links that went
inactive do the same inside the node. One script reads ``nvidia-smi topo -m`` (the matrix,
parsed into a networkx graph: GPUs and NICs as nodes, the matrix cells as edge attributes) and
``nvidia-smi nvlink --status``.

The nearest NIC of a GPU is its best link by PCIe distance: PIX < PXB < PHB < NODE < SYS. Only
NICs the matrix lists count (nvidia-smi lists RDMA devices, mlx5_* and the like); the params
``hcas`` (NCCL_IB_HCA syntax: ``mlx5_0,mlx5_3``, ``=mlx5_0:1``, ``^mlx5_8``) narrow them to the
ones the job uses. A GPU whose nearest NIC is SYS raises gpu-nic-cross-numa, PHB/NODE
gpu-nic-far; both only on hosts that have RDMA NICs at all. gpu-nic-far also needs a platform
that puts NICs behind PCIe switches with GPUs (some GPU of the host reaches a NIC through PIX or
PXB): on a host where no GPU shares a switch with any NIC (a workstation whose cards sit on the
CPU's root ports, a VM whose flat topology shows everything as PHB) the host bridge is the
design, not a card in the wrong slot.

NVLink: a link printed ``<inactive>`` counts as inactive; a GPU for which nvidia-smi says
"Unable to retrieve NVLink information as all links are inActive" counts all its links as
inactive when other GPUs of the host have NVLink (on a PCIe node with no NVLink every GPU says
so, and nothing is wrong). Across hosts, a host with fewer active links than the fleet majority
of its GPU model is raised too (a node whose GPUs all lost NVLink has nothing to compare with
inside); hosts of another model (a PCIe node, an A100 node among H100s) are not held to it.
A GPU in MIG mode reports every link down by design (NVIDIA's MIG user guide: "GPU to GPU P2P
(both PCIe and NVLink) is not supported" in MIG mode; probes/nvlink.py reads it the same way):
its links are not counted, and a host is compared only with hosts with as many MIG GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from probes.base import (
    Context,
    Probe,
    finding,
    fleet_minority,
    guard_parse,
    not_measured,
    script,
    split_sections,
)
from probes.model import Finding
from probes.nccl_env import selects
from probes.nvlink import GPU_ROWS_SH, addin_card, addin_expected, gpu_rows
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

if TYPE_CHECKING:
    import networkx as nx

NAME = "topology"

_SECTIONS = [
    ("topo", "timeout 15 nvidia-smi topo -m"),
    ("nvlink", "timeout 15 nvidia-smi nvlink --status"),
    ("gpus", GPU_ROWS_SH),  # MIG mode per GPU
]
_REQUIRES = {"topo": "nvidia-smi", "nvlink": "nvidia-smi", "gpus": "nvidia-smi"}

# PCIe distance between a GPU and a NIC, best first (nvidia-smi topo -m legend).
LINK_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}
_FAR = ("PHB", "NODE")
_SWITCHED = ("PIX", "PXB")  # through PCIe switches, without the host bridge

_GPU_LINE = re.compile(r"^\s*GPU\s+(\d+):")
_GPU_MODEL = re.compile(r"^\s*GPU\s+\d+:\s+(.+?)\s+\(UUID:", re.M)
# What NVML prints for a GPU without NVLink (a PCIe card), per GPU, instead of links.
_NOT_SUPPORTED = re.compile(r"Unable to retrieve NVLink information\W*Not Supported", re.I)
_ALL_INACTIVE = re.compile(r"Unable to retrieve NVLink information as all links are inActive",
                           re.I)


def command(params: Mapping[str, Any]) -> str:
    return script(_SECTIONS, _REQUIRES)


# --- NCCL_IB_HCA-style selection, shared with the network probe -----------------------------

def hca_selector(spec: Any) -> Any:
    """A predicate (device, port) -> bool from an NCCL_IB_HCA-style spec; None selects all.

    NCCL's own rules (probes/nccl_env.py): ``mlx5_0,mlx5_1:1`` selects by prefix, ``=mlx5_0`` by
    exact name, a leading ``^`` excludes the listed devices instead (``^=`` in that order). A
    list of names works like a comma list.
    """
    if spec is None or spec == "" or spec == []:
        return None
    text = ",".join(map(str, spec)) if isinstance(spec, list | tuple) else str(spec)
    text = text.strip()

    def selected(device: str, port: int | None = None) -> bool:
        return selects(text, device, port)

    return selected


# --- parsing ---------------------------------------------------------------------------------

def _parse_nvlink(text: str, mig: Mapping[int, bool] | None = None) -> dict[str, Any]:
    """Per GPU: active and inactive link counts; GPUs NVML says have no active link at all.
    A GPU in MIG mode (*mig*: index -> enabled) has its links down by design: none missing."""
    mig = mig or {}
    all_inactive: list[int | None] = []
    current: int | None = None
    gpu_indices: list[int] = []
    for line in text.splitlines():
        m = _GPU_LINE.match(line)
        if m:
            current = int(m.group(1))
            gpu_indices.append(current)
        if _ALL_INACTIVE.search(line):
            all_inactive.append(current)
    try:
        gpus = parse_kind("nvidia-smi-nvlink", text)["gpus"]
    except ParseError:
        if not gpu_indices and not all_inactive:
            raise
        gpus = [{"index": i, "links": []} for i in gpu_indices]
    per_gpu: dict[str, dict[str, Any]] = {}
    bridged = addin_expected(gpus)
    for gpu in gpus:
        links = gpu.get("links") or []
        label = f"GPU{gpu['index']}" if gpu.get("index") is not None else "GPU?"
        active = sum(1 for link in links if link.get("active") is True)
        # a PCIe / NVL add-in card without a bridge reports every link down by design
        # (probes/nvlink.py addin_card; NVIDIA/NVSentinel PR #1481): no link of it is missing;
        # a bridged one uses only some of its links (H100 NVL: 12 of 18, Azure/azurehpc-health-
        # checks issue 162): the rest are down by design too (nvlink.addin_expected)
        addin = bool(addin_card(gpu.get("name")))
        by_design = addin and (not active
                               or active >= bridged.get(str(gpu.get("name") or ""), 0))
        in_mig = bool(mig.get(gpu.get("index"))) if gpu.get("index") is not None else False
        by_design = by_design or in_mig
        per_gpu[label] = {
            "active": active,
            "inactive": [] if by_design else [link["link"] for link in links
                                              if link.get("active") is False],
            "all_inactive": not (addin and not active) and not in_mig
            and gpu.get("index") in all_inactive,
            "mig": in_mig,
        }
    for index in all_inactive:
        label = f"GPU{index}" if index is not None else "GPU?"
        per_gpu.setdefault(label, {"active": 0, "inactive": [],
                                   "all_inactive": not mig.get(index) if index is not None
                                   else True, "mig": bool(index is not None and mig.get(index))})
    return per_gpu


def _nvlink_counts(per_gpu: dict[str, dict[str, Any]]) -> tuple[int, int]:
    """(active, inactive) over the host; an all-inactive GPU counts as many links as its peers."""
    links_per_gpu = max((g["active"] + len(g["inactive"]) for g in per_gpu.values()), default=0)
    active = sum(g["active"] for g in per_gpu.values())
    inactive = 0
    for gpu in per_gpu.values():
        if gpu["all_inactive"] and not gpu["active"] and not gpu["inactive"]:
            gpu["inactive_count"] = links_per_gpu if active else 0
        else:
            gpu["inactive_count"] = len(gpu["inactive"])
        inactive += gpu["inactive_count"]
    return active, inactive


def build_graph(topo: dict[str, Any]) -> nx.Graph:
    """The topo matrix as a graph: GPU and NIC nodes, edges carrying ``link`` and ``rank``."""
    import networkx as nx

    graph = nx.Graph()
    for gpu in topo.get("gpus") or []:
        graph.add_node(gpu, kind="gpu", numa=(topo.get("numa_affinity") or {}).get(gpu))
    for label, name in (topo.get("nics") or {}).items():
        graph.add_node(label, kind="nic", name=name or label)
    links = topo.get("links") or {}
    gpus = set(topo.get("gpus") or [])
    # GPU rows first: they are what nvidia-smi reports for the GPU; NIC rows only fill gaps.
    for a in sorted(links, key=lambda row: row not in gpus):
        for b, link in links[a].items():
            if a in graph and b in graph and not graph.has_edge(a, b):
                graph.add_edge(a, b, link=link, rank=LINK_RANK.get(link))
    return graph


def nearest_nics(graph: nx.Graph, selected: Any = None) -> dict[str, dict[str, Any] | None]:
    """Per GPU, its best-ranked NIC neighbour (ties: the first NIC in matrix order)."""
    out: dict[str, dict[str, Any] | None] = {}
    for node, data in graph.nodes(data=True):
        if data.get("kind") != "gpu":
            continue
        best = None
        for nic in graph.neighbors(node):
            nic_data = graph.nodes[nic]
            if nic_data.get("kind") != "nic" or (selected and not selected(nic_data["name"])):
                continue
            rank = graph.edges[node, nic].get("rank")
            if rank is not None and (best is None or rank < best[0]):
                best = (rank, nic_data["name"], graph.edges[node, nic]["link"])
        out[node] = {"nic": best[1], "link": best[2]} if best else None
    return out


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if not {"topo", "nvlink"} & set(sections):
        raise ParseError("topology: neither a topo nor an nvlink section")
    facts: dict[str, Any] = {"gpus": None, "nics": None, "gpu_nic_links": None,
                             "numa_affinity": None, "nvlink_inactive": None,
                             "nvlink_active": None, "nvlink": None, "links": None,
                             "gpu_models": None, "mig_gpus": None, "missing": [], "errors": {}}
    for name in ("topo", "nvlink"):
        sec = sections.get(name)
        if sec is None or sec.missing:
            facts["missing"].append(name)
        elif sec.rc != 0 and not re.search(r"GPU\s*\d", sec.text):
            facts["errors"][name] = (sec.text.strip().splitlines() or
                                     [f"nvidia-smi exited {sec.rc}"])[0][:200]
    topo_sec = sections.get("topo")
    if topo_sec is not None and not topo_sec.missing and "topo" not in facts["errors"]:
        topo = parse_kind("nvidia-smi-topo", topo_sec.text)
        graph = build_graph(topo)
        facts["gpus"] = list(topo["gpus"])
        facts["nics"] = dict(topo["nics"])
        facts["numa_affinity"] = dict(topo["numa_affinity"])
        facts["links"] = {gpu: topo["links"].get(gpu, {}) for gpu in topo["gpus"]}
        facts["gpu_nic_links"] = nearest_nics(graph) if topo["nics"] else {}
    nvlink_sec = sections.get("nvlink")
    if nvlink_sec is not None and not nvlink_sec.missing and "nvlink" not in facts["errors"]:
        # A driver with no NVLink support on these GPUs prints nothing at all.
        gpus_sec = sections.get("gpus")
        mig = gpu_rows(gpus_sec.text)[1] if gpus_sec is not None and not gpus_sec.missing \
            and gpus_sec.text.strip() else None
        per_gpu = _parse_nvlink(nvlink_sec.text, mig) if nvlink_sec.text.strip() else {}
        # None: MIG mode not read (an older recording, a driver before R450)
        facts["mig_gpus"] = None if mig is None else sorted(
            label for label, g in per_gpu.items() if g.get("mig"))
        active, inactive = _nvlink_counts(per_gpu)
        facts["nvlink"] = per_gpu
        facts["nvlink_active"] = active
        facts["nvlink_inactive"] = inactive
        facts["gpu_models"] = sorted(set(_GPU_MODEL.findall(nvlink_sec.text))) or None
        if _NOT_SUPPORTED.search(nvlink_sec.text) and not active and not inactive:
            # PCIe cards: NVML says the GPUs have no NVLink, so there is no link count to set
            # beside an NVLink peer's (a mixed fleet is not a host with its links down).
            facts["nvlink_active"] = None
    return facts


parse = guard_parse(NAME, _parse)


# --- checks ----------------------------------------------------------------------------------

def _nearest(facts: dict[str, Any], ctx: Context) -> dict[str, dict[str, Any] | None]:
    """Nearest NIC per GPU, re-derived from the matrix when the params narrow the NICs."""
    selected = hca_selector(ctx.params.get("hcas"))
    if selected is None or not facts.get("links"):
        return facts.get("gpu_nic_links") or {}
    topo = {"gpus": facts.get("gpus") or [], "nics": facts.get("nics") or {},
            "links": facts["links"], "numa_affinity": facts.get("numa_affinity") or {}}
    return nearest_nics(build_graph(topo), selected)


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    missing, errors = facts.get("missing") or [], facts.get("errors") or {}
    if facts.get("gpus") is None:
        why = "nvidia-smi is not installed" if "topo" in missing else \
            errors.get("topo", "no topology output")
        findings.append(not_measured(NAME, host, "GPU/NIC topology", why))
    if facts.get("nvlink_inactive") is None:
        why = "nvidia-smi is not installed" if "nvlink" in missing else \
            errors.get("nvlink", "no nvlink output")
        findings.append(not_measured(NAME, host, "NVLink status", why))

    nearest = _nearest(facts, ctx)
    if any(nearest.values()):  # only hosts with RDMA NICs are judged
        numa = facts.get("numa_affinity") or {}
        cross = {gpu: {**best, "gpu_numa": numa.get(gpu)} for gpu, best in nearest.items()
                 if best and best["link"] == "SYS"}
        # Far is a misplaced card only where the platform shares PCIe switches between GPUs
        # and NICs (all NICs count, whatever the params select).
        switched = any(best and best["link"] in _SWITCHED
                       for best in (facts.get("gpu_nic_links") or {}).values())
        far = {gpu: best for gpu, best in nearest.items()
               if switched and best and best["link"] in _FAR}
        if cross:
            findings.append(finding(
                "gpu-nic-cross-numa", [host],
                f"{host}: {', '.join(cross)} reach their nearest RDMA NIC only across the CPU "
                "interconnect (SYS)", NAME, gpus=cross))
        if far:
            findings.append(finding(
                "gpu-nic-far", [host],
                f"{host}: {', '.join(far)} reach their nearest NIC through the host bridge ("
                + ", ".join(sorted({b['link'] for b in far.values()})) + "), not a PCIe switch",
                NAME, gpus=far))

    if facts.get("nvlink_inactive"):
        per_gpu = {gpu: (g["inactive"] or "all") for gpu, g in (facts.get("nvlink") or {}).items()
                   if g.get("inactive_count")}
        findings.append(finding(
            "nvlink-inactive", [host],
            f"{host}: {facts['nvlink_inactive']} NVLink link(s) inactive on "
            f"{', '.join(per_gpu)}", NAME, inactive=facts["nvlink_inactive"],
            active=facts.get("nvlink_active"), gpus=per_gpu))
    return findings


def by_model(hosts: Mapping[str, Any], model: Mapping[str, Any]) -> list[dict[str, Any]]:
    """*hosts* (host -> value) split by GPU model (*model*: host -> a hashable model key or
    None): hosts of one model are compared with each other only, in a mixed fleet. A host whose
    model is unknown joins the most common model."""
    groups: dict[Any, dict[str, Any]] = {}
    for host, value in hosts.items():
        groups.setdefault(model.get(host), {})[host] = value
    unknown = groups.pop(None, {})
    if not groups:
        return [unknown] if unknown else []
    largest = max(groups, key=lambda key: len(groups[key]))
    groups[largest].update(unknown)
    return list(groups.values())


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    active = {h: f["nvlink_active"] for h, f in facts_by_host.items()
              if isinstance(f.get("nvlink_active"), int)}
    # hosts with MIG GPUs (links down by design) only beside hosts with as many
    models = {h: (tuple(f["gpu_models"]), len(f.get("mig_gpus") or ()))
              if f.get("gpu_models") else None for h, f in facts_by_host.items()}
    # Hosts whose own count already shows inactive links were raised by check().
    caught = {h for h in active if facts_by_host[h].get("nvlink_inactive")}
    findings = []
    for group in by_model(active, models):
        short = fleet_minority(group, below=True, spare=caught)
        if short:
            findings.append(finding(
                "nvlink-inactive", short.hosts,
                short.below("have fewer active NVLink links than"), NAME,
                majority=short.majority, active=short.hosts))
    return findings


PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=45.0)
