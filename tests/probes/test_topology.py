"""The topology probe: GPU-NIC distances from nvidia-smi topo -m, and NVLink link states."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from probes.catalog import load_catalog
from probes.parsers import ParseError
from probes.topology import PROBE, build_graph, hca_selector
from tests.probes.probe_outputs import (
    ROOT,
    baseline,
    codes,
    context,
    edit,
    output,
    real,
    replace,
    section_text,
    sections_of,
    sh_accepts,
)

BASE = baseline("topology")
LEGEND = real("nvidia-smi-topo__2x-rtx6000-ada-threadripper-1numa-2x-mlx5").split("Legend:", 1)[1]

# 4 GPUs on two sockets, both NICs on socket 0 (a realistic mis-cabled 4-GPU server).
TOPO_4GPU_NICS_ON_SOCKET0 = """\
        GPU0    GPU1    GPU2    GPU3    NIC0    NIC1    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV12    NV12    NV12    PXB     NODE    0-31,64-95      0               N/A
GPU1    NV12     X      NV12    NV12    NODE    PXB     0-31,64-95      0               N/A
GPU2    NV12    NV12     X      NV12    SYS     SYS     32-63,96-127    1               N/A
GPU3    NV12    NV12    NV12     X      SYS     SYS     32-63,96-127    1               N/A
NIC0    PXB     NODE    SYS     SYS      X      NODE
NIC1    NODE    PXB     SYS     SYS     NODE     X

Legend:""" + LEGEND

# 2 GPUs with an NVLink bridge and no NIC at all (a workstation).
TOPO_NO_NIC = """\
        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV4     0-31,64-95      0               N/A
GPU1    NV4      X      0-31,64-95      0               N/A

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""
ALL_INACTIVE = "NVML: Unable to retrieve NVLink information as all links are inActive"


def nvlink_blocks(text: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    for line in section_text(text, "nvlink").splitlines():
        if line.startswith("GPU "):
            blocks.append([line])
        else:
            blocks[-1].append(line)
    return blocks


def join(blocks: list[list[str]]) -> str:
    return "\n".join(line for block in blocks for line in block) + "\n"


def check(text: str, **ctx) -> list:
    return PROBE.check("gpu001", PROBE.parse(text), context(**ctx))


def test_command_is_one_posix_script():
    # The script passes `sh -n` and asks for the matrix and the NVLink states.
    script = PROBE.command({})
    assert sh_accepts(script).returncode == 0
    assert "nvidia-smi topo -m" in script and "nvidia-smi nvlink --status" in script


def test_baseline_facts():
    # The real 8xH100 matrix: every GPU has a PIX NIC; 8x18 NVLink links active.
    facts = PROBE.parse(BASE)
    assert facts["gpus"] == [f"GPU{i}" for i in range(8)]
    assert facts["nics"] == {f"NIC{i}": f"mlx5_{i}" for i in range(8)}
    assert facts["gpu_nic_links"]["GPU5"] == {"nic": "mlx5_5", "link": "PIX"}
    assert facts["numa_affinity"] == {f"GPU{i}": "0" if i < 4 else "1" for i in range(8)}
    assert facts["nvlink_inactive"] == 0 and facts["nvlink_active"] == 144
    assert set(load_catalog().probes["topology"].facts) <= set(facts)
    json.dumps(facts)


def test_baseline_raises_nothing():
    # Healthy node and a fleet of identical nodes: no finding.
    facts = PROBE.parse(BASE)
    assert PROBE.check("gpu001", facts, context()) == []
    assert PROBE.check_fleet({f"gpu00{i}": facts for i in range(1, 5)}, context()) == []


def test_gpus_whose_nics_are_on_the_other_socket():
    # Both NICs hang off socket 0: GPU2 and GPU3 reach one only through SYS.
    findings = check(replace(BASE, topo=TOPO_4GPU_NICS_ON_SOCKET0))
    assert codes(findings) == ["gpu-nic-cross-numa"]
    assert findings[0].evidence["gpus"]["GPU2"] == {"nic": "mlx5_0", "link": "SYS",
                                                    "gpu_numa": "1"}


def test_nics_narrowed_by_the_hcas_param():
    # NCCL_IB_HCA=mlx5_0,mlx5_1: GPU2/3 are far from both, GPU4-7 across the socket.
    findings = check(BASE, params={"hcas": "=mlx5_0,mlx5_1"})
    assert codes(findings) == ["gpu-nic-cross-numa", "gpu-nic-far"]
    assert sorted(findings[0].evidence["gpus"]) == ["GPU4", "GPU5", "GPU6", "GPU7"]
    assert sorted(findings[1].evidence["gpus"]) == ["GPU2", "GPU3"]


def test_pix_link_lost_leaves_the_gpu_behind_the_host_bridge():
    # GPU4's own NIC gone from its row (edited to SYS): its best is now NODE, gpu-nic-far.
    row = next(line for line in section_text(BASE, "topo").splitlines()
               if line.startswith("GPU4"))
    findings = check(edit(BASE, "topo", row, row.replace("PIX", "SYS")))
    assert codes(findings) == ["gpu-nic-far"]
    assert findings[0].evidence["gpus"] == {"GPU4": {"nic": "mlx5_5", "link": "NODE"}}


PCIE_NVLINK = ("GPU 0: NVIDIA H100 PCIe (UUID: GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9)\n"
               + ALL_INACTIVE + "\n")


@pytest.mark.parametrize(("sample", "link"), [
    ("nvidia-smi-topo__1x-h100-pcie-kvm-1x-mlx5", "PHB"),  # a VM: everything is PHB
    # NICs behind another host bridge of the same socket
    ("nvidia-smi-topo__2x-rtx6000-ada-threadripper-1numa-2x-mlx5", "NODE"),
])
def test_real_pcie_hosts_whose_nics_sit_on_the_host_bridge_by_design(sample, link):
    # No GPU of these hosts shares a PCIe switch with any NIC: the host bridge is the platform's
    # design (the catalogue's gpu-nic-far twin), not a card in the wrong slot.
    facts = PROBE.parse(replace(BASE, topo=real(sample), nvlink=PCIE_NVLINK))
    assert facts["nvlink_inactive"] == 0  # no GPU of the host has NVLink: nothing is down
    assert {b["link"] for b in facts["gpu_nic_links"].values()} == {link}
    assert PROBE.check("ws01", facts, context()) == []


def test_far_nics_on_a_switched_platform_are_still_found_when_the_params_narrow_them():
    # The whole matrix has PIX pairs, so a job that picks a NODE NIC for a GPU is told.
    findings = check(BASE, params={"hcas": "=mlx5_0"})
    assert codes(findings) == ["gpu-nic-cross-numa", "gpu-nic-far"]
    assert sorted(findings[1].evidence["gpus"]) == ["GPU1", "GPU2", "GPU3"]


def test_the_fleet_compares_nvlink_counts_within_a_gpu_model():
    # A PCIe H100 guest (no bridge: NVML says all links inactive) walked with HGX H100 nodes,
    # and an A100 node (12 links per GPU): neither is held to the H100 nodes' 144 links.
    pcie = PROBE.parse(replace(BASE, topo=real("nvidia-smi-topo__1x-h100-pcie-kvm-1x-mlx5"),
                               nvlink=PCIE_NVLINK))
    a100 = PROBE.parse(replace(BASE, nvlink=real("nvidia-smi-nvlink__status-8x-a100-sxm4-80gb-"
                                                 "12-links")))
    healthy = PROBE.parse(BASE)
    assert pcie["gpu_models"] == ["NVIDIA H100 PCIe"]
    assert healthy["gpu_models"] == ["NVIDIA H100 80GB HBM3"]
    fleet = {"gpu001": healthy, "gpu002": healthy, "gpu003": pcie, "gpu004": healthy,
             "gpu005": a100}
    assert PROBE.check_fleet(fleet, context()) == []
    # Within the H100 model, a host that lost NVLink is still found.
    blocks = [[block[0], ALL_INACTIVE] for block in nvlink_blocks(BASE)]
    fleet["gpu002"] = PROBE.parse(replace(BASE, nvlink=join(blocks)))
    fleet["gpu006"] = healthy
    findings = PROBE.check_fleet(fleet, context())
    assert codes(findings) == ["nvlink-inactive"] and findings[0].hosts == ("gpu002",)


def test_host_without_nics_is_not_judged_on_nic_distance():
    # No RDMA NIC in the matrix: no NIC finding at all.
    facts = PROBE.parse(replace(BASE, topo=TOPO_NO_NIC, nvlink=""))
    assert facts["nics"] == {} and facts["gpu_nic_links"] == {}
    assert PROBE.check("ws01", facts, context()) == []


def test_one_inactive_nvlink_link():
    # Link 7 of GPU3 prints <inactive>.
    blocks = nvlink_blocks(BASE)
    blocks[3] = [line.replace("Link 7: 26.562 GB/s", "Link 7: <inactive>") for line in blocks[3]]
    facts = PROBE.parse(replace(BASE, nvlink=join(blocks)))
    assert facts["nvlink_inactive"] == 1
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["nvlink-inactive"]
    assert findings[0].evidence["gpus"] == {"GPU3": [7]}


def test_gpu_with_all_links_inactive():
    # GPU1 prints NVML's "all links are inActive" while its peers have 18 links each.
    blocks = nvlink_blocks(BASE)
    blocks[1] = [blocks[1][0], ALL_INACTIVE]
    facts = PROBE.parse(replace(BASE, nvlink=join(blocks)))
    assert facts["nvlink_inactive"] == 18 and facts["nvlink_active"] == 126
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["nvlink-inactive"]
    assert findings[0].evidence["gpus"] == {"GPU1": "all"}


def test_real_a100_nvlink_status():
    # The real 8xA100 output: 12 links per GPU, all up.
    facts = PROBE.parse(replace(BASE, nvlink=real("nvidia-smi-nvlink__status-8x-a100-sxm4-80gb-"
                                                  "12-links")))
    assert facts["nvlink_active"] == 96 and facts["nvlink_inactive"] == 0


def test_host_whose_gpus_all_lost_nvlink_is_found_by_the_fleet():
    # Every GPU of gpu003 says "all links are inActive": only the peers show what is missing.
    blocks = [[block[0], ALL_INACTIVE] for block in nvlink_blocks(BASE)]
    dead = PROBE.parse(replace(BASE, nvlink=join(blocks)))
    assert dead["nvlink_active"] == 0 and dead["nvlink_inactive"] == 0
    healthy = PROBE.parse(BASE)
    fleet = {"gpu001": healthy, "gpu002": healthy, "gpu003": dead, "gpu004": healthy}
    findings = PROBE.check_fleet(fleet, context())
    assert codes(findings) == ["nvlink-inactive"] and findings[0].hosts == ("gpu003",)


def test_nvidia_smi_missing_is_not_measured():
    # No nvidia-smi: both sections missing, two not-measured findings.
    findings = check(replace(BASE, topo=None, nvlink=None))
    assert codes(findings) == ["not-measured", "not-measured"]


def test_nvml_failure_is_not_measured():
    # The driver/library mismatch error instead of a matrix: not measured, not a parse error.
    error = ("Failed to initialize NVML: Driver/library version mismatch\n"
             "NVML library version: 550.90\n", 18)
    findings = check(replace(BASE, topo=error, nvlink=error))
    assert codes(findings) == ["not-measured", "not-measured"]


@pytest.mark.parametrize("text", [
    "",                                                       # nothing
    "GPU0 X NV18\nrandom words\n",                           # unsectioned text
    "=== diag:section ibstat\nCA 'mlx5_0'\n=== diag:rc ibstat 0\n",  # another probe's output
    "=== diag:section topo\nno matrix here\n=== diag:rc topo 0\n",  # a topo section of garbage
])
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        PROBE.parse(text)


@pytest.mark.parametrize(("spec", "device", "port", "selected"), [
    ("mlx5_0", "mlx5_0", 1, True),          # prefix match, NCCL's default
    ("mlx5_1", "mlx5_10", 1, True),         # ... which also takes mlx5_10
    ("=mlx5_1", "mlx5_10", 1, False),       # exact match does not
    ("mlx5_0:1", "mlx5_0", 2, False),       # a port narrows it
    ("^mlx5_8,mlx5_9", "mlx5_8", 1, False),  # exclusion list
    ("^mlx5_8,mlx5_9", "mlx5_0", 1, True),    # ... which keeps the others
    (["mlx5_2", "mlx5_3"], "mlx5_3", 1, True),  # a YAML list works like a comma list
])
def test_hca_selector(spec, device, port, selected):
    assert hca_selector(spec)(device, port) is selected


def test_graph_carries_link_ranks():
    # The matrix as a networkx graph: GPU-NIC edges ranked, GPU-GPU NVLink edges unranked.
    topo = {"gpus": ["GPU0", "GPU1"], "nics": {"NIC0": "mlx5_0"},
            "links": {"GPU0": {"GPU1": "NV18", "NIC0": "PIX"}, "GPU1": {"NIC0": "SYS"}}}
    graph = build_graph(topo)
    assert graph.edges["GPU0", "NIC0"]["rank"] == 0 and graph.edges["GPU1", "NIC0"]["rank"] == 4
    assert graph.edges["GPU0", "GPU1"]["link"] == "NV18"


def test_importing_the_probe_does_not_import_networkx():
    # networkx loads only when a matrix is parsed, so listing probes stays cheap.
    code = "import sys, probes.topology; print('networkx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def _with_mig(text: str, enabled: set[int]) -> str:
    """*text* with the MIG-mode section: GPUs *enabled* in MIG mode, the others not."""
    gpus = "index, pci.bus_id, mig.mode.current\n" + "".join(
        f"{i}, 00000000:{0x19 + i:02X}:00.0, {'Enabled' if i in enabled else 'Disabled'}\n"
        for i in range(len(nvlink_blocks(text))))
    return output({**sections_of(text), "gpus": gpus})


def test_a_mig_gpus_links_are_down_by_design():
    # NVIDIA's MIG user guide: no GPU-to-GPU P2P over NVLink in MIG mode, and NVML reports a
    # MIG GPU's links down (DCGM DcgmHealthWatch.cpp, bug 200682374): GPU1 and GPU4 in MIG
    # mode, as on the real A100 node of fixtures/real (nvidia-smi -L, MIG on GPUs 0 and 4)
    blocks = nvlink_blocks(BASE)
    for gpu in (1, 4):
        blocks[gpu] = [blocks[gpu][0], ALL_INACTIVE]
    text = replace(BASE, nvlink=join(blocks))
    facts = PROBE.parse(_with_mig(text, {1, 4}))
    assert (facts["nvlink_inactive"], facts["mig_gpus"]) == (0, ["GPU1", "GPU4"])
    assert codes(PROBE.check("gpu001", facts, context())) == []
    # the twin: the same links down with MIG off is two GPUs cut off their NVLink
    assert codes(check(_with_mig(text, set()))) == ["nvlink-inactive"]
    assert codes(check(text)) == ["nvlink-inactive"]  # MIG mode not read: as before
    # a MIG GPU's links listed one by one as <inactive> (R535+) are not counted either
    listed = nvlink_blocks(BASE)
    listed[2] = [line.replace("26.562 GB/s", "<inactive>") for line in listed[2]]
    assert codes(check(_with_mig(replace(BASE, nvlink=join(listed)), {2}))) == []
    assert codes(check(_with_mig(replace(BASE, nvlink=join(listed)), set()))) == \
        ["nvlink-inactive"]


def test_the_fleet_compares_mig_hosts_only_with_each_other():
    healthy = PROBE.parse(BASE)
    blocks = nvlink_blocks(BASE)
    blocks[1] = [blocks[1][0], ALL_INACTIVE]
    mig = PROBE.parse(_with_mig(replace(BASE, nvlink=join(blocks)), {1}))
    fleet = {"gpu001": healthy, "gpu002": healthy, "gpu003": mig, "gpu004": healthy}
    assert PROBE.check_fleet(fleet, context()) == []
    # a link lost on a non-MIG GPU of a MIG host is still found against its MIG peers
    lost = nvlink_blocks(BASE)
    lost[1] = [lost[1][0], ALL_INACTIVE]
    lost[5] = [line.replace("Link 3: 26.562 GB/s", "Link 3: <inactive>") for line in lost[5]]
    short = PROBE.parse(_with_mig(replace(BASE, nvlink=join(lost)), {1}))
    assert codes(PROBE.check("gpu005", short, context())) == ["nvlink-inactive"]
