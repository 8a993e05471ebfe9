"""``nvidia-smi`` default table: driver/CUDA versions and one summary row per GPU.

Operators paste this table more than any other output, from every driver generation: the
column widths changed (R418, R450 with the MIG line, R530+ wider layout) and R610 renamed the
header's versions ("KMD Version", "CUDA UMD Version"), but each GPU is still
a first row with index/name/persistence and a second row with fan/temp/power, memory and
utilisation cells between ``|`` bars. The parser keys on those cells, not on column offsets.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, none_if_na, text_lines, to_float, to_int

WHAT = "nvidia-smi"

# R610+ renamed the header labels: "KMD Version: 610.43.02   CUDA UMD Version: 13.3" (nvidia-smi
# docs: "deprecated Driver Version and CUDA Version in favor of KMD Version and CUDA UMD
# Version"); R3xx printed no CUDA version at all.
_HEADER = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>[\w.\-]+)\s+(?:Driver|KMD) Version:\s*(?P<driver>[\w.\-/]+)"
    r"(?:\s+CUDA(?: UMD)? Version:\s*(?P<cuda>[\w.\-/]+))?"
)
# Cells are split on "|" first and then read token by token: the rows are short, but a paste
# can be anything, and token splitting keeps every row linear in its length.
_PERSISTENCE = {"On", "Off", "WDDM", "TCC", "N/A"}
_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_MEMORY = re.compile(r"(?<!\d)(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_TEMP = re.compile(r"(?<![\w.])(\d+)C\b")
_FAN = re.compile(r"^\s*(\d+)%")
_PERF = re.compile(r"\b(P\d{1,2})\b")
_POWER = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)W\s*/\s*(\d+(?:\.\d+)?)W")
_UTIL = re.compile(r"^(\d+)%\s*")
_PROCESS_TYPES = {"C", "G", "C+G", "M", "M+C"}
_ERRORS = (
    "No devices were found",
    "NVIDIA-SMI has failed",
    "Failed to initialize NVML",
    "Unable to determine the device handle",
)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _from_bar(line: str) -> str:
    """Drop a paste prefix ("[1,0]<stdout>:", "host: ") in front of a table row."""
    bar = line.find("|")
    if bar > 0 and line[0] != "+":
        return line[bar:]
    return line


def _gpu_row(line: str) -> dict[str, Any] | None:
    """The first row of a GPU: "| 0  NAME  On | 00000000:19:00.0 Off | 0 |", else None."""
    cells = _cells(line) if line.startswith("|") else []
    if len(cells) < 3:
        return None
    first, second = cells[0].split(None, 1), cells[1].split()
    if len(first) != 2 or not first[0].isdecimal() or len(second) != 2:
        return None
    name_persist = first[1].rsplit(None, 1)
    if len(name_persist) != 2 or name_persist[1] not in _PERSISTENCE:
        return None
    if not _BUS_ID.match(second[0]):
        return None
    return {
        "index": int(first[0]),
        "name": name_persist[0].strip() or None,
        "persistence_mode": name_persist[1],
        "bus_id": second[0],
        "display_active": second[1],
        "ecc_uncorrected": to_int(cells[2]),
        "memory_used_mib": None,
        "memory_total_mib": None,
        "utilization_pct": None,
        "temperature_c": None,
    }


def _process_row(line: str) -> dict[str, Any] | None:
    """A process row, with (R450+) or without GI/CI columns, else None."""
    if not (line.startswith("|") and line.endswith("|")):
        return None
    tokens = line[1:-1].split()
    if len(tokens) < 5:
        return None
    if tokens[4] in _PROCESS_TYPES and tokens[3].isdecimal():
        pid, kind, rest = tokens[3], tokens[4], tokens[5:]
    elif tokens[2] in _PROCESS_TYPES and tokens[1].isdecimal():
        pid, kind, rest = tokens[1], tokens[2], tokens[3:]
    else:
        return None
    if not rest or not (
        rest[-1] == "N/A" or (rest[-1].endswith("MiB") and rest[-1][:-3].isdecimal())
    ):
        return None
    if not (tokens[0].isdecimal() or tokens[0] == "N/A"):
        return None
    return {
        "gpu": to_int(tokens[0]),
        "pid": int(pid),
        "type": kind,
        "name": " ".join(rest[:-1]) or None,
        "memory_mib": to_int(rest[-1][:-3]) if rest[-1].endswith("MiB") else None,
    }


def _second_row(line: str, gpu: dict[str, Any]) -> None:
    """Fill fan/temp/power/memory/utilisation from the row under the name row."""
    cells = _cells(line)
    if len(cells) < 3:
        return
    fan = _FAN.match(cells[0])
    temp = _TEMP.search(cells[0])
    perf = _PERF.search(cells[0])
    power = _POWER.search(cells[0])
    memory = _MEMORY.search(cells[1])
    util = _UTIL.match(cells[2])
    compute_mode = cells[2][util.end() :].strip() if util else cells[2]
    gpu.update(
        fan_pct=int(fan.group(1)) if fan else None,
        temperature_c=int(temp.group(1)) if temp else None,
        perf_state=perf.group(1) if perf else None,
        power_draw_w=to_float(power.group(1)) if power else None,
        power_cap_w=to_float(power.group(2)) if power else None,
        memory_used_mib=int(memory.group(1)) if memory else None,
        memory_total_mib=int(memory.group(2)) if memory else None,
        utilization_pct=int(util.group(1)) if util else None,
        compute_mode=none_if_na(compute_mode),
    )


def parse(text: str) -> dict[str, Any]:
    """Versions, GPU rows and the process table."""
    lines = [line.strip() for line in text_lines(text)]
    # Paste prefixes ("[1,0]<stdout>:", "host: ") end where the table's first bar starts.
    lines = [_from_bar(line) for line in lines]
    header = None
    for line in lines:
        header = _HEADER.search(line)
        if header:
            break

    gpus: list[dict[str, Any]] = []
    processes: list[dict[str, Any]] = []
    section = "gpus"
    current: dict[str, Any] | None = None
    rows_seen = 0
    for line in lines:
        if "Processes:" in line:
            section, current = "processes", None
            continue
        if "MIG devices:" in line:
            section, current = "mig", None
            continue
        if section == "gpus":
            row = _gpu_row(line)
            if row:
                current = row
                gpus.append(current)
                rows_seen = 1
            elif current is not None and line.startswith("|"):
                rows_seen += 1
                if rows_seen == 2:
                    _second_row(line, current)
                elif rows_seen == 3:
                    cells = _cells(line)
                    current["mig_mode"] = none_if_na(cells[-1]) if cells else None
            elif line.startswith("+") or not line:
                current = None
        elif section == "processes":
            process = _process_row(line)
            if process:
                processes.append(process)

    error = next((line for line in lines if any(e in line for e in _ERRORS)), None)
    if header is None and not gpus and error is None:
        fail(WHAT, "no 'NVIDIA-SMI ... Driver Version' header and no GPU rows found")
    cuda = header.group("cuda") if header else None
    return {
        "driver_version": header.group("driver") if header else None,
        "cuda_version": none_if_na(cuda),
        "smi_version": header.group("smi") if header else None,
        "gpus": gpus,
        "processes": processes,
        "error": error,
    }
