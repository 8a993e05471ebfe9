"""``nvidia-smi -q``: the long per-GPU report.

Its keys repeat under different sections ("Pending" appears under MIG Mode, ECC Mode and
Remapped Rows), so each value is addressed by its full section path, built from indentation.
Works on full reports and on filtered ones (``-d ECC,ROW_REMAPPER``) where most sections are
missing: absent sections give null, never a default.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, none_if_na, text_lines, to_float, to_int

WHAT = "nvidia-smi -q"

_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KV = re.compile(r"^(?P<key>[^:]*?\S)\s+:\s?(?P<value>.*)$")
_LEADING_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\b")

Path = tuple[str, ...]


def _walk(lines: list[str]) -> tuple[dict[str, str], list[tuple[str, dict[Path, str]]]]:
    """Top-level fields and, per GPU block, a flat {section path: value} map."""
    top: dict[str, str] = {}
    gpus: list[tuple[str, dict[Path, str]]] = []
    current: dict[Path, str] | None = None
    stack: list[tuple[int, str]] = []  # (indent, name) of enclosing sections
    for raw in lines:
        if not raw.strip() or raw.lstrip().startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" \t"))
        line = raw.strip()
        gpu = _GPU.match(line)
        if gpu and indent == 0:
            current = {}
            gpus.append((gpu.group(1), current))
            stack = []
            continue
        kv = _KV.match(line)
        key = kv.group("key").strip() if kv else line
        if indent == 0 and kv:
            top.setdefault(key, kv.group("value").strip())
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if current is not None and kv:
            path = (*(name for _, name in stack), key)
            current.setdefault(path, kv.group("value").strip())
        stack.append((indent, key))
    return top, gpus


def _get(fields: dict[Path, str], *path: str) -> str | None:
    return none_if_na(fields.get(path))


def _num(fields: dict[Path, str], *path: str) -> int | float | None:
    """Leading number of a value such as "23028 MiB", "33 C" or "43.89 W"."""
    value = _get(fields, *path)
    m = _LEADING_NUMBER.match(value) if value else None
    if not m:
        return None
    return to_int(m.group(1)) if "." not in m.group(1) else to_float(m.group(1))


def _yes_no(value: str | None) -> bool | None:
    if value is None:
        return None
    return {"yes": True, "no": False}.get(value.lower())


def _subtree(fields: dict[Path, str], *prefix: str) -> dict[str, dict[str, int | None]]:
    """Counters under a section, grouped by the next path element (Volatile / Aggregate)."""
    out: dict[str, dict[str, int | None]] = {}
    n = len(prefix)
    for path, value in fields.items():
        if len(path) > n + 1 and path[:n] == prefix:
            group = path[n].lower()
            out.setdefault(group, {})[" ".join(path[n + 1 :])] = to_int(value)
    return out


def _power(f: dict[Path, str]) -> int | float | None:
    """Power draw: "Power Readings / Power Draw" (to R525), "GPU Power Readings / Power Draw"
    (R530-R545), "GPU Power Readings / Instantaneous Power Draw" and "Average Power Draw"
    (R550 on, the average often N/A)."""
    for path in (("GPU Power Readings", "Power Draw"),
                 ("GPU Power Readings", "Instantaneous Power Draw"),
                 ("GPU Power Readings", "Average Power Draw"),
                 ("Power Readings", "Power Draw")):
        if (value := _num(f, *path)) is not None:
            return value
    return None


def _version(value: str | None) -> str | None:
    """A version field without R610's "[Deprecated; will be removed ...]" note."""
    value = none_if_na(value)
    return none_if_na(value.split("[", 1)[0]) if value else None


def _gpu(bus_from_header: str, f: dict[Path, str]) -> dict[str, Any]:
    reasons = [
        path[-1]
        for path, value in f.items()
        if len(path) >= 2
        and path[0] in ("Clocks Event Reasons", "Clocks Throttle Reasons")
        and value.strip() == "Active"
    ]
    return {
        "name": _get(f, "Product Name"),
        "bus_id": _get(f, "PCI", "Bus Id") or bus_from_header,
        "uuid": _get(f, "GPU UUID"),
        "serial": _get(f, "Serial Number"),
        "vbios_version": _get(f, "VBIOS Version"),
        "persistence_mode": _get(f, "Persistence Mode"),
        "performance_state": _get(f, "Performance State"),
        # "FB Memory Usage" since R3xx's split from BAR1; the first R3xx drivers printed
        # "Memory Usage" (in MB, which nvidia-smi means as MiB)
        "memory_total_mib": _num(f, "FB Memory Usage", "Total") if ("FB Memory Usage", "Total")
        in f else _num(f, "Memory Usage", "Total"),
        "memory_used_mib": _num(f, "FB Memory Usage", "Used") if ("FB Memory Usage", "Used")
        in f else _num(f, "Memory Usage", "Used"),
        "utilization_pct": _num(f, "Utilization", "Gpu"),
        "temperature_c": _num(f, "Temperature", "GPU Current Temp"),
        "power_draw_w": _power(f),
        "pcie_gen_current": _num(f, "PCI", "GPU Link Info", "PCIe Generation", "Current"),
        "pcie_width_current": _get(f, "PCI", "GPU Link Info", "Link Width", "Current"),
        "reset_required": _yes_no(_get(f, "GPU Reset Status", "Reset Required")),
        "ecc_mode": _get(f, "ECC Mode", "Current"),
        "ecc": _subtree(f, "ECC Errors"),
        "retired_pages": _subtree(f, "Retired Pages"),
        "remapped_rows_pending": _yes_no(_get(f, "Remapped Rows", "Pending")),
        "remapped_rows": {
            "correctable": _num(f, "Remapped Rows", "Correctable Error"),
            "uncorrectable": _num(f, "Remapped Rows", "Uncorrectable Error"),
            "pending": _yes_no(_get(f, "Remapped Rows", "Pending")),
            "failure_occurred": _yes_no(_get(f, "Remapped Rows", "Remapping Failure Occurred")),
        },
        "clocks_event_reasons": reasons,
    }


def parse(text: str) -> dict[str, Any]:
    """Versions and the per-GPU facts checks use (names, bus ids, ECC, remapped rows)."""
    lines = text_lines(text)
    top, blocks = _walk(lines)
    has_banner = "NVSMI LOG" in text
    if not blocks and not has_banner and "Attached GPUs" not in top:
        fail(WHAT, "no 'NVSMI LOG' banner, 'Attached GPUs' line or 'GPU <bus id>' block found")
    return {
        # R610 on: "KMD Version" / "CUDA UMD Version", the old labels marked "[Deprecated ...]"
        "driver_version": _version(top.get("KMD Version")) or _version(top.get("Driver Version")),
        "cuda_version": _version(top.get("CUDA UMD Version")) or _version(top.get("CUDA Version")),
        "timestamp": none_if_na(top.get("Timestamp")),
        "attached_gpus": to_int(top.get("Attached GPUs")),
        "gpus": [_gpu(bus, fields) for bus, fields in blocks],
    }
