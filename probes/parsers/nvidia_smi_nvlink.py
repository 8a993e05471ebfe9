"""``nvidia-smi nvlink --status`` (``-s``): per-GPU NVLink link speeds.

An inactive or missing link is the usual cause of an NVLink-less ring and slow all-reduce, so
each link keeps its printed speed (GB/s) and an ``active`` flag. The same "GPU n:" / "Link n:"
shape is printed by ``nvlink -e``/``-c``; such lines are kept as per-link counters/attributes.
A GPU for which NVML reports no links at all ("all links are inActive", "Not Supported") has
no links and says why (``nvml_error``, ``all_links_inactive``).
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines, to_float, to_int

WHAT = "nvidia-smi nvlink --status"

_GPU = re.compile(r"^\s*GPU\s+(\d+):\s*(.*)$")
_LINK = re.compile(r"^\s*Link\s+(\d+):(.*)$")
_SPEED = re.compile(r"^(\d+(?:\.\d+)?)\s*GB/s$")
_COUNTER = re.compile(r"^(.+?):\s*(-?\d+)$")
# What NVML prints instead of links: "NVML: Unable to retrieve Nvlink information as all links
# are inActive" (an NVLink GPU whose links are all down) or "...: Not Supported" (a PCIe card).
_NVML = re.compile(r"^\s*NVML:\s*(Unable to retrieve NVLink information.*)$", re.I)


def parse(text: str) -> dict[str, Any]:
    """GPUs with their links, in printed order."""
    gpus: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    by_link: dict[int, dict[str, Any]] = {}
    link_lines = nvml_lines = 0
    for raw in text_lines(text):
        line = strip_prefix(raw)
        # each pattern tried only where its word is (a report is thousands of "Link" lines)
        gpu = _GPU.match(line) if "GPU" in line else None
        if gpu:
            name, _, uuid = gpu.group(2).partition("(UUID:")
            current = {
                "index": int(gpu.group(1)),
                "name": name.strip() or None,
                "uuid": uuid.strip().rstrip(")").strip() or None,
                "links": [],
            }
            gpus.append(current)
            by_link = {}
            continue
        if (line.lstrip()[:4].upper() == "NVML") and (nvml := _NVML.match(line)):
            if current is None:
                current = {"index": None, "name": None, "uuid": None, "links": []}
                gpus.append(current)
            message = nvml.group(1).strip()
            current["nvml_error"] = message
            current["all_links_inactive"] = "inactive" in message.lower()
            nvml_lines += 1
            continue
        link = _LINK.match(line) if "Link" in line else None
        if not link:
            continue
        link_lines += 1
        if current is None:  # excerpt that starts below its GPU line
            current = {"index": None, "name": None, "uuid": None, "links": []}
            gpus.append(current)
        number, value = int(link.group(1)), link.group(2).strip()
        entry = by_link.get(number)
        if entry is None:
            entry = {"link": number, "speed_gb_s": None, "active": None}
            by_link[number] = entry
            current["links"].append(entry)
        speed = _SPEED.match(value) if value.endswith("GB/s") else None
        if speed:
            entry["speed_gb_s"] = to_float(speed.group(1))
            entry["active"] = True
        elif "inactive" in value.lower():
            entry["active"] = False
        elif counter := _COUNTER.match(value):
            entry.setdefault("counters", {})[counter.group(1).strip()] = to_int(counter.group(2))
        else:
            entry.setdefault("attributes", []).append(value)
    if not link_lines and not nvml_lines:
        fail(WHAT, "no 'Link <n>:' lines found")
    return {"gpus": gpus}
