"""PyTorch "CUDA out of memory" messages, in the three wordings PyTorch has used.

<=1.4:  "Tried to allocate X (GPU 0; T total capacity; A already allocated; F free; R cached)"
<=2.0:  "Tried to allocate X (GPU 0; T total capacity; A already allocated; F free; ...)"
2.1:    "... GPU 0 has a total capacty of T of which F is free. ..." (sic)
>=2.2:  "... GPU 0 has a total capacity of T of which F is free. ..."
NCCL:   "NCCL WARN Cuda failure 'out of memory'" (no sizes: its buffers, not the caching allocator)
Sizes are converted to bytes with binary units (PyTorch prints GiB/MiB/KiB). Only the first
OOM message in the text is read; ``count`` says how many there were.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, size_to_bytes

WHAT = "CUDA out-of-memory"

_SIZE = r"(?<![\d.])(\d+(?:\.\d+)?)\s*(bytes|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)\b"
_START = re.compile(
    r"(?:CUDA|HIP) out of memory|OutOfMemoryError|CUDA error: out of memory"
    r"|Cuda failure '?out of memory",  # NCCL's own allocation (CUDACHECK in src/include/checks.h)
    re.IGNORECASE
)
_FIELDS = {
    "tried_to_allocate_bytes": re.compile(r"Tried to allocate\s+" + _SIZE),
    "total_capacity_bytes": re.compile(_SIZE + r"\s+total capacity|total capaci?ty of\s+" + _SIZE),
    "free_bytes": re.compile(_SIZE + r"\s+free\b|of which\s+" + _SIZE + r"\s+is free"),
    "allocated_by_pytorch_bytes": re.compile(
        _SIZE + r"\s+already allocated|allocated memory\s+" + _SIZE + r"\s+is allocated by PyTorch"
    ),
    # torch <= 1.4 called the reserved memory "cached": "...; 5.69 MiB free; 81.08 MiB cached)"
    "reserved_by_pytorch_bytes": re.compile(
        _SIZE + r"\s+reserved in total by PyTorch|" + _SIZE + r"\s+cached\)"),
    "reserved_unallocated_bytes": re.compile(_SIZE + r"\s+is reserved by PyTorch but unallocated"),
    "process_in_use_bytes": re.compile(r"this process has\s+" + _SIZE + r"\s+memory in use"),
}
_GPU = re.compile(r"\(GPU\s+(\d+);|\bGPU\s+(\d+)\s+has a total capaci?ty")
_OTHER_PROCESS = re.compile(r"Process\s+(\d+)\s+has\s+" + _SIZE + r"\s+memory in use")


def _bytes(m: re.Match[str] | None) -> int | None:
    if not m:
        return None
    groups = [g for g in m.groups() if g is not None]
    return size_to_bytes(groups[0], groups[1]) if len(groups) >= 2 else None


def parse(text: str) -> dict[str, Any]:
    """Sizes (bytes) and GPU index from the first OOM message."""
    starts = [m.start() for m in _START.finditer(text)]
    if not starts:
        fail(WHAT, "no 'CUDA out of memory' / OutOfMemoryError message found")
    # The message starts at the first marker; "torch.OutOfMemoryError: CUDA out of memory"
    # carries two markers for one message, so the next message is the next line with a marker.
    end = len(text)
    newline = text.find("\n", starts[0])
    for s in starts[1:]:
        if newline != -1 and s > newline:
            end = text.rfind("\n", 0, s) + 1
            break
    message = text[starts[0] : end]
    result: dict[str, Any] = {key: _bytes(rx.search(message)) for key, rx in _FIELDS.items()}
    gpu = _GPU.search(message)
    result["gpu"] = int(gpu.group(1) or gpu.group(2)) if gpu else None
    result["other_processes"] = [
        {"pid": int(pid), "bytes": size_to_bytes(num, unit)}
        for pid, num, unit in _OTHER_PROCESS.findall(message)
    ]
    result["count"] = sum(1 for line in text.splitlines() if _START.search(line))
    return result
