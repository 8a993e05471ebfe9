"""``nvidia-smi -q``: the long per-GPU report.

Its keys repeat under different sections ("Pending" appears under MIG Mode, ECC Mode and
Remapped Rows), so each value is addressed by its full section path, built from indentation.
Works on full reports and on filtered ones (``-d ECC,ROW_REMAPPER``) where most sections are
missing: absent sections give null, never a default.

The health keys (ECC counts, retired pages, the row-remap histogram, temperatures and their
thresholds, power limits, clock-event reasons and their counters) are read in every layout the
drivers printed: ECC as "Single Bit / Double Bit" per location (to R460), as "SRAM/DRAM
Correctable/Uncorrectable" (R470 on) and with the SRAM uncorrectable count split into "Parity" and
"SEC-DED" (R550 on); temperature thresholds as absolute degrees or, on newer boards, as margins to
T.Limit ("GPU Slowdown T.Limit Temp : -2 C"), kept apart because they mean different things.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, none_if_na, text_lines, to_float, to_int, yes_no

WHAT = "nvidia-smi -q"

_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KV = re.compile(r"^(?P<key>[^:]*?\S)\s+:\s?(?P<value>.*)$")
_LEADING_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\b")

Path = tuple[str, ...]


def _walk(lines: list[str]) -> tuple[dict[str, str], list[tuple[str, dict[Path, str]]]]:
    """Top-level fields and, per GPU block, a flat {section path: value} map.

    A line is "KEY : VALUE" when its first colon follows whitespace after a non-blank key (what
    ``_KV`` says, read without the regular expression: this loop runs over every line of every
    GPU's report, twice per walk, and the regex's backtracking was most of a parse)."""
    top: dict[str, str] = {}
    gpus: list[tuple[str, dict[Path, str]]] = []
    current: dict[Path, str] | None = None
    indents: list[int] = []  # indents of the enclosing sections
    names: list[str] = []  # and their names
    for raw in lines:
        line = raw.strip()
        if not line or line[0] == "=":
            continue
        indent = len(raw) - len(raw.lstrip(" \t"))
        if indent == 0 and line[:3] == "GPU" and (gpu := _GPU.match(line)):
            current = {}
            gpus.append((gpu.group(1), current))
            indents, names = [], []
            continue
        kv = _split(line)
        key = kv[0] if kv else line
        if indent == 0 and kv:
            top.setdefault(key, kv[1])
            continue
        while indents and indents[-1] >= indent:
            indents.pop()
            names.pop()
        if current is not None and kv:
            current.setdefault((*names, key), kv[1])
        indents.append(indent)
        names.append(key)
    return top, gpus


def _split(line: str) -> tuple[str, str] | None:
    """``_KV``'s (key, value) of a stripped line, or None: the key is what comes before the
    first colon when whitespace precedes it, or (the regex's \\S may be that colon) the text
    up to and with the first colon when whitespace and a second colon follow it."""
    colon = line.find(":")
    if colon < 0:
        return None
    if colon > 0 and line[colon - 1].isspace():
        return line[:colon].rstrip(), line[colon + 1:].strip()
    rest = line[colon + 1:]
    after = rest.lstrip()
    if len(after) < len(rest) and after[:1] == ":":
        return line[:colon + 1], after[1:].strip()
    return None


def _get(fields: dict[Path, str], *path: str) -> str | None:
    return none_if_na(fields.get(path))


def _num(fields: dict[Path, str], *path: str) -> int | float | None:
    """Leading number of a value such as "23028 MiB", "33 C" or "43.89 W"."""
    value = _get(fields, *path)
    m = _LEADING_NUMBER.match(value) if value else None
    if not m:
        return None
    return to_int(m.group(1)) if "." not in m.group(1) else to_float(m.group(1))


def _subtree(fields: dict[Path, str], *prefix: str) -> dict[str, dict[str, int | None]]:
    """Counters under a section, grouped by the next path element (Volatile / Aggregate)."""
    out: dict[str, dict[str, int | None]] = {}
    n = len(prefix)
    for path, value in fields.items():
        if len(path) > n + 1 and path[:n] == prefix:
            group = path[n].lower()
            out.setdefault(group, {})[" ".join(path[n + 1 :])] = to_int(value)
    return out


def _int_of(value: str | None) -> int | None:
    """The leading integer of "16x", "4", "0" (a count or a link width as printed)."""
    m = re.match(r"^\s*(\d+)", value) if value else None
    return int(m.group(1)) if m else None


def _pcie(f: dict[Path, str]) -> dict[str, int | None]:
    """The "GPU Link Info" block and the replay counters of the PCI section.

    Drivers before about R525 print only Max and Current under "PCIe Generation"; the Device and
    Host lines are then absent and stay null rather than borrowing Max. "Max" is the most the
    link can train to (the lower of the GPU's and the host port's maximum on drivers that print
    both); an idle GPU may show Current far below it, which is power saving, not a fault: the
    parser reports it and judges nothing.
    """
    gen = ("PCI", "GPU Link Info", "PCIe Generation")
    width = ("PCI", "GPU Link Info", "Link Width")
    return {
        "pcie_gen_max": _int_of(_get(f, *gen, "Max")),
        "pcie_gen_current": _int_of(_get(f, *gen, "Current")),
        "pcie_gen_device_max": _int_of(_get(f, *gen, "Device Max")),
        "pcie_gen_host_max": _int_of(_get(f, *gen, "Host Max")),
        "pcie_width_max": _int_of(_get(f, *width, "Max")),
        "pcie_width_current": _int_of(_get(f, *width, "Current")),
        # "Replays since reset" on the R3xx drivers (no rollover counter then)
        "pcie_replays": _int_of(_get(f, "PCI", "Replays Since Reset")
                                or _get(f, "PCI", "Replays since reset")),
        "pcie_replay_rollovers": _int_of(_get(f, "PCI", "Replay Number Rollovers")),
    }


def _power(f: dict[Path, str], key: str) -> int | float | None:
    """A power reading in watts; drivers since R530 call the section "GPU Power Readings"."""
    section = "GPU Power Readings" if ("GPU Power Readings", key) in f else "Power Readings"
    return _num(f, section, key)


def _power_draw(f: dict[Path, str]) -> int | float | None:
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


_SRAM_PARTS = ("Register File", "L1 Cache", "L2 Cache", "Texture Memory", "Texture Shared", "CBU",
               "SRAM")


def _sum_known(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _ecc_counts(f: dict[Path, str], group: str) -> dict[str, int | None]:
    """One ECC counter group ("Volatile" or "Aggregate") in the same keys for every layout."""
    def count(*path: str) -> int | None:
        return _int_of(_get(f, "ECC Errors", group, *path))

    if any(path[:3] == ("ECC Errors", group, "Single Bit") for path in f):
        # to R460: per location under "Single Bit" (correctable) and "Double Bit"
        out: dict[str, int | None] = {}
        for kind, bits in (("correctable", "Single Bit"), ("uncorrectable", "Double Bit")):
            out[f"dram_{kind}"] = count(bits, "Device Memory")
            out[f"sram_{kind}"] = _sum_known(*(count(bits, part) for part in _SRAM_PARTS))
            out[kind] = count(bits, "Total")
            if out[kind] is None:
                out[kind] = _sum_known(out[f"dram_{kind}"], out[f"sram_{kind}"])
        return out
    sram_u = count("SRAM Uncorrectable")
    if sram_u is None:  # R550 on: parity-protected and SEC-DED-protected SRAMs apart
        sram_u = _sum_known(count("SRAM Uncorrectable Parity"), count("SRAM Uncorrectable SEC-DED"))
    out = {"sram_correctable": count("SRAM Correctable"), "sram_uncorrectable": sram_u,
           "dram_correctable": count("DRAM Correctable"),
           "dram_uncorrectable": count("DRAM Uncorrectable")}
    out["correctable"] = _sum_known(out["sram_correctable"], out["dram_correctable"])
    out["uncorrectable"] = _sum_known(out["sram_uncorrectable"], out["dram_uncorrectable"])
    return out


def _retired(f: dict[Path, str]) -> dict[str, Any]:
    """Retired pages (page retirement, to Volta/Turing; N/A on Ampere and later)."""
    pending = None
    for key in ("Pending Page Blacklist", "Pending Page Retirement", "Pending"):
        if ("Retired Pages", key) in f:
            pending = yes_no(_get(f, "Retired Pages", key))
            break
    return {"retired_pages_sbe": _int_of(_get(f, "Retired Pages", "Single Bit ECC")),
            "retired_pages_dbe": _int_of(_get(f, "Retired Pages", "Double Bit ECC")),
            "retired_pages_pending": pending}


_TEMPERATURES = {
    "current_c": "GPU Current Temp", "tlimit_c": "GPU T.Limit Temp",
    "shutdown_c": "GPU Shutdown Temp", "shutdown_tlimit_c": "GPU Shutdown T.Limit Temp",
    "slowdown_c": "GPU Slowdown Temp", "slowdown_tlimit_c": "GPU Slowdown T.Limit Temp",
    "max_operating_c": "GPU Max Operating Temp",
    "max_operating_tlimit_c": "GPU Max Operating T.Limit Temp",
    "target_c": "GPU Target Temperature", "memory_c": "Memory Current Temp",
    "memory_max_operating_c": "Memory Max Operating Temp",
    "memory_max_operating_tlimit_c": "Memory Max Operating T.Limit Temp",
}
# "Clocks Event Reasons Counters" (R535 on): microseconds spent in each reason since the driver
# loaded (NVML's NVML_FI_DEV_CLOCKS_EVENT_REASON_* field values).
_COUNTERS = {"sw_power_cap": "SW Power Capping", "sync_boost": "Sync Boost",
             "sw_thermal_slowdown": "SW Thermal Slowdown",
             "hw_thermal_slowdown": "HW Thermal Slowdown", "hw_power_brake": "HW Power Braking"}
_HISTOGRAM = ("Max", "High", "Partial", "Low", "None")
_REPAIR = {"channel_repair_pending": "Channel Repair Pending",
           "tpc_repair_pending": "TPC Repair Pending", "unrepairable_memory": "Unrepairable Memory"}


def _temperatures(f: dict[Path, str]) -> dict[str, int | float | None]:
    temps = {key: _num(f, "Temperature", label) for key, label in _TEMPERATURES.items()}
    if temps["current_c"] is None:  # the first drivers: "Temperature / Gpu : 45 C"
        temps["current_c"] = _num(f, "Temperature", "Gpu")
    return temps


def _event_counters(f: dict[Path, str]) -> dict[str, int | None]:
    section = next((s for s in ("Clocks Event Reasons Counters", "Clocks Throttle Reasons Counters")
                    if any(path[0] == s for path in f)), None)
    return {key: (_int_of(_get(f, section, label)) if section else None)
            for key, label in _COUNTERS.items()}


def _gpu(bus_from_header: str, f: dict[Path, str]) -> dict[str, Any]:
    states = {
        path[-1]: value.strip() == "Active"
        for path, value in f.items()
        if len(path) >= 2
        and path[0] in ("Clocks Event Reasons", "Clocks Throttle Reasons")
        and value.strip() in ("Active", "Not Active")
    }
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
        # "Gpu" through R565; R575 on print "GPU" (the 580.173.02 RTX 5080 sample in fixtures/real)
        "utilization_pct": _num(f, "Utilization", "Gpu") if ("Utilization", "Gpu") in f
        else _num(f, "Utilization", "GPU"),
        "temperature_c": _num(f, "Temperature", "GPU Current Temp"),
        "power_draw_w": _power_draw(f),
        "power_limit_w": _power(f, "Current Power Limit") or _power(f, "Power Limit"),
        "power_limit_enforced_w": _power(f, "Enforced Power Limit"),
        "power_limit_default_w": _power(f, "Default Power Limit"),
        "sm_clock_mhz": _num(f, "Clocks", "SM"),
        "sm_clock_max_mhz": _num(f, "Max Clocks", "SM"),
        **_pcie(f),
        "reset_required": yes_no(_get(f, "GPU Reset Status", "Reset Required")),
        # "Ecc Mode" before R450
        "ecc_mode": _get(f, "ECC Mode", "Current") or _get(f, "Ecc Mode", "Current"),
        "ecc": _subtree(f, "ECC Errors"),
        "retired_pages": _subtree(f, "Retired Pages"),
        "remapped_rows_pending": yes_no(_get(f, "Remapped Rows", "Pending")),
        "remapped_rows": {
            "correctable": _num(f, "Remapped Rows", "Correctable Error"),
            "uncorrectable": _num(f, "Remapped Rows", "Uncorrectable Error"),
            "pending": yes_no(_get(f, "Remapped Rows", "Pending")),
            "failure_occurred": yes_no(_get(f, "Remapped Rows", "Remapping Failure Occurred")),
        },
        # banks by spare rows left: max (all), high, partial, low, none (no spare row left)
        "remap_histogram": {level.lower(): _int_of(_get(f, "Remapped Rows",
                                                        "Bank Remap Availability Histogram",
                                                        level))
                            for level in _HISTOGRAM},
        "clocks_event_reasons": reasons,
        # every reason printed, Active or not ("Not Active" is known, an absent line is not)
        "clocks_event_states": states,
        "clocks_event_counters_us": _event_counters(f),
        "ecc_mode_pending": _get(f, "ECC Mode", "Pending") or _get(f, "Ecc Mode", "Pending"),
        "ecc_counts": {"volatile": _ecc_counts(f, "Volatile"),
                       "aggregate": _ecc_counts(f, "Aggregate")},
        "sram_threshold_exceeded": yes_no(_get(f, "ECC Errors", "Aggregate",
                                                "SRAM Threshold Exceeded")),
        # R575 on (Blackwell): NVML nvmlDeviceGetRepairStatus / GetUnrepairableMemoryFlag_v1,
        # printed under "ECC Errors"; absent on older drivers, "N/A" where unsupported
        **{key: yes_no(_get(f, "ECC Errors", label)) for key, label in _REPAIR.items()},
        **_retired(f),
        "temperatures": _temperatures(f),
        "power_limit_requested_w": _power(f, "Requested Power Limit"),
        "power_limit_min_w": _power(f, "Min Power Limit"),
        "power_limit_max_w": _power(f, "Max Power Limit"),
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
