"""``nvidia-smi topo -m``: the GPU/NIC connection matrix.

The matrix decides whether NCCL can use NVLink or GPUDirect RDMA for a GPU-NIC pair, so the
cells are kept exactly as printed (``NV18``, ``PIX``, ``SYS``) for checks to interpret. Columns
are found by whitespace rather than tabs because pasted copies usually lost their tabs; the
multi-word affinity headings are the only cells with spaces and are matched by name.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, none_if_na, strip_prefix, text_lines

WHAT = "nvidia-smi topo -m"

# Trailing per-GPU columns, by the names different driver generations print.
_AFFINITY = {
    "CPU Affinity": "cpu_affinity",
    "NUMA Affinity": "numa_affinity",
    "GPU NUMA ID": "gpu_numa_id",
}
_AFFINITY_RE = re.compile("|".join(re.escape(name) for name in _AFFINITY))
_GPU = re.compile(r"^GPU\d+$")
_NIC = re.compile(r"^NIC\d+$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _header(line: str) -> tuple[list[str], list[str]] | None:
    """Device columns and affinity columns of a header row, or None if not a header."""
    marked = _AFFINITY_RE.sub(lambda m: "\x00" + _AFFINITY[m.group(0)], line)
    tokens = marked.split()
    devices: list[str] = []
    extras: list[str] = []
    for token in tokens:
        if token.startswith("\x00"):
            extras.append(token[1:])
        elif extras:
            return None  # a device label after the affinity block: not a header
        else:
            devices.append(token)
    if not devices or not _GPU.match(devices[0]) or len(set(devices)) != len(devices):
        return None
    return devices, extras


def parse(text: str) -> dict[str, Any]:
    """Matrix, NIC legend and per-GPU CPU/NUMA affinity."""
    lines = [strip_prefix(line) for line in text_lines(text)]
    header: tuple[list[str], list[str]] | None = None
    start = 0
    for i, line in enumerate(lines):
        header = _header(line)
        if header:
            start = i + 1
            break
    if header is None:
        fail(WHAT, "no GPU header row found")
    devices, extras = header
    known = set(devices)

    links: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str | None]] = {name: {} for name in _AFFINITY.values()}
    for line in lines[start:]:
        if line.strip().startswith("Legend"):
            break
        tokens = line.split()
        if not tokens or tokens[0] not in known or tokens[0] in links:
            continue
        row = tokens[0]
        cells = tokens[1 : 1 + len(devices)]
        links[row] = {
            col: cell
            for col, cell in zip(devices, cells, strict=False)
            if col != row and cell != "X"
        }
        if _GPU.match(row):
            for name, value in zip(extras, tokens[1 + len(devices) :], strict=False):
                affinity[name][row] = none_if_na(value)
    if not links:
        fail(WHAT, "GPU header row found but no matrix rows")

    legend = {}
    for line in lines[start:]:
        m = _NIC_LEGEND.match(line)
        if m:
            legend[m.group(1)] = m.group(2)

    nics: dict[str, str | None] = {}
    for dev in devices:
        if _NIC.match(dev):
            nics[dev] = legend.get(dev)
        elif not _GPU.match(dev):
            nics[dev] = dev  # older drivers label NIC columns with the device name itself

    return {
        "gpus": [dev for dev in devices if _GPU.match(dev)],
        "nics": nics,
        "links": links,
        "cpu_affinity": affinity["cpu_affinity"],
        "numa_affinity": affinity["numa_affinity"],
        "gpu_numa_id": affinity["gpu_numa_id"],
    }
