"""Tool stand-ins for acceptance tests without GPUs: small shell scripts, put first on a node's
PATH (``tests.fleet.sshfleet`` per host, or a local bin directory), that print real recorded
output from ``fixtures/real`` whatever their arguments say.

A stand-in node is a composite: its dcgmi prints what a real 7x B300 node printed, its
all_reduce_perf what a real 8x A100 node printed, and so on; the tests declare the GPU model the
criteria judge by (inventory ``gpu_model``). Each script dispatches on its arguments only where
one tool answers several questions (``nvidia-smi -q -d PIDS`` vs ``--query-gpu``).
"""

from __future__ import annotations

import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "real"

DCGMI_PASS = "dcgmi-diag__r3-dcgm4.6.1-7x-b300-per-gpu-rows-all-pass.txt"
DCGMI_FAIL = ("dcgmi-diag__r2-fragment-gpu-memory-pass-gpus-1-7-fail-gpu-0-thermal-violation-"
              "excerpt.txt")
BURN_PASS = "gpu-burn__7x-b300-600s-all-ok-progress-elided-by-author.txt"
NVBW_PASS = "nvbandwidth__v0.10-7x-b300-ce-tests-with-coefficient-of-variation-part.txt"
NCCL_PASS = "nccl-tests__allreduce-1node-8x-a100-sxm4-40gb-oci.txt"  # 232 GB/s >= A100's 228
NCCL_LOW = "nccl-tests__allreduce-2node-16x-a100-40gb-kubeflow-mpijob-rdma-sriov.txt"  # 171
NCCL_PAIR = "nccl-tests__allreduce-2node-16x-h100-gcp-a3mega-mpirun-8g.txt"
SMI_QUERY = "nvidia-smi-query__driver-name-computecap-7x-b300.csv.txt"
SMI_Q_IDLE = "nvidia-smi-q__1x-a10-driver535-remapped-rows-pending.txt"  # Processes : None
SMI_Q_BUSY = ("nvidia-smi-q__8x-rtx4090-driver535-gen4-link-idle-at-gen1-host-max-5-first-gpu-"
              "part.txt")
SMI_Q_XORG = "nvidia-smi-q__1x-titan-v-driver560-gen3-idle-gen1-clocks-event-reasons.txt"
SMI_TOPO = "nvidia-smi-topo__8x-h100-hbm3-nv18-8x-mlx5.txt"
SMI_DEFAULT = "nvidia-smi__default-8x-h100-hbm3-driver550.txt"
NODE_DRAINED = "scontrol-node__oneline-idle-drain-slurm22.05.out"
NODE_IDLE = "scontrol-node__oneline-idle-not-drained-slurm22.05.out"
XID_LINES = "dmesg-xid__xid48-63-94-dbe-row-remap-contained.txt"
IBSTAT_1PORT = "ibstat__mlx4-connectx3-fdr56-1port.txt"  # one Active IB port for the one GPU


def cat(name: str) -> str:
    """A command printing the recording byte for byte. The text is inlined (not a path): the
    fleet's test user need not read this checkout."""
    return f"printf '%s' {shlex.quote((REAL / name).read_text())}"


def baseline_section(probe: str, section: str) -> str:
    """One section of a probe's healthy baseline output (fixtures/scenarios/_baseline, built from
    real recordings): what the evidence sweep reads from a healthy node."""
    lines = (ROOT / "fixtures" / "scenarios" / "_baseline" / f"{probe}.txt").read_text()
    body = lines.split(f"=== diag:section {section}\n", 1)[1]
    return body.split(f"=== diag:rc {section} ", 1)[0]


def nvidia_smi(pids: str = SMI_Q_IDLE, query: str = SMI_QUERY, q: str = SMI_Q_IDLE) -> str:
    # the gpu probe's own query (the evidence sweep runs it on every node) reads the baseline's
    # answer; any other --query-gpu the fitness recording
    gpu_query = shlex.quote(baseline_section("gpu", "query"))
    return "\n".join([
        'case "$*" in',
        f'  *"-d PIDS"*) {cat(pids)} ;;',
        f"  *--query-gpu=index,name,pci.bus_id,utilization.gpu,*) printf '%s' {gpu_query} ;;",
        f'  *--query-gpu=*) {cat(query)} ;;',
        f'  *"topo -m"*) {cat(SMI_TOPO)} ;;',
        f'  *-q*) {cat(q)} ;;',
        f'  *) {cat(SMI_DEFAULT)} ;;',
        "esac",
    ])


def scontrol(node_state: str = NODE_DRAINED) -> str:
    return "\n".join([
        'case "$*" in',
        f'  "show node"*) {cat(node_state)} ;;',
        '  "show reservation"*) exit 0 ;;',
        '  *) echo "scontrol stand-in: $*" >&2; exit 1 ;;',
        "esac",
    ])


MODINFO = "\n".join([
    'k=$(uname -r)',
    'case "$2" in',
    '  version) echo 550.54.15 ;;',
    '  vermagic) echo "$k SMP preempt mod_unload modversions" ;;',
    '  filename) echo "/lib/modules/$k/updates/dkms/nvidia.ko" ;;',
    '  *) echo "modinfo stand-in: $*" >&2; exit 1 ;;',
    "esac",
])


def hang(first: str, seconds: int = 3600) -> str:
    """A test that starts, prints its first lines, then never ends (a wedged GPU)."""
    head = "".join((REAL / first).read_text().splitlines(keepends=True)[:3])
    return f"printf '%s' {shlex.quote(head)}\nexec sleep {seconds}"


def node(*, dcgmi: str = DCGMI_PASS, nccl: str = NCCL_PASS, burn: str | None = BURN_PASS,
         burn_body: str | None = None, pids: str = SMI_Q_IDLE,
         slurm_node: str = NODE_DRAINED) -> dict[str, str]:
    """The stand-ins of one node: every acceptance tool, answering like *these* recordings."""
    return {
        "nvidia-smi": nvidia_smi(pids=pids),
        "scontrol": scontrol(slurm_node),
        "dcgmi": cat(dcgmi),
        "gpu_burn": burn_body if burn_body is not None else cat(burn or BURN_PASS),
        "nvbandwidth": cat(NVBW_PASS),
        "all_reduce_perf": cat(nccl),
        "ping": "exit 0",
        "ibstat": cat(IBSTAT_1PORT),
        # the driver module built for the running kernel (a machine whose own modinfo finds
        # no nvidia module made every stand-in node "driver-module-missing-for-kernel")
        "modinfo": MODINFO,
    }


def write_bin(directory: Path, tools: dict[str, str]) -> Path:
    """The stand-ins as executables in *directory* (for a local PATH)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, body in tools.items():
        path = directory / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return directory
