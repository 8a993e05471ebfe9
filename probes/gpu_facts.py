"""The gpu probe's facts: its script (nvidia-smi's query and row remapper, the kernel log's
NVRM lines, lspci) and the parser that turns that script's output into per-GPU entries, XID
events with their age, and the host's aggregates.

What the facts mean is told in probes/gpu.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import default_thresholds, guard_parse, script, split_sections
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind
from probes.parsers._common import yes_no

NAME = "gpu"

_FIELDS = ("index,name,pci.bus_id,utilization.gpu,memory.used,memory.total,temperature.gpu,"
           "power.draw,enforced.power.limit,power.default_limit,clocks.sm,clocks.max.sm,"
           "{reasons}.active,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
           "power.limit")
_QUERY = "timeout 15 nvidia-smi --query-gpu=" + _FIELDS + " --format=csv 2>&1"
# Drivers that predate the clocks_event_reasons names (or drop the throttle ones) refuse the
# whole query with "not a valid field"; only then is it asked again with the other names.
_QUERY_SECTION = (
    "out=$(" + _QUERY.format(reasons="clocks_throttle_reasons") + "); rc=$?; "
    "if [ $rc -ne 0 ] && printf '%s' \"$out\" | grep -qi 'not a valid field'; then "
    "out=$(" + _QUERY.format(reasons="clocks_event_reasons") + "); rc=$?; fi; "
    "printf '%s\\n' \"$out\"; (exit $rc)"
)
_KERNEL_LOG = (
    "if out=$(timeout 10 dmesg 2>&1); then src=dmesg; "
    "elif out=$(timeout 10 journalctl -k -b --no-pager -o short-monotonic "
    "--since \"-{minutes}min\" 2>&1); then src=journalctl; else src=none; fi; "
    "echo \"source $src\"; "
    "if [ \"$src\" = none ]; then printf '%s\\n' \"$out\" | tail -n 3; false; "
    "else printf '%s\\n' \"$out\" | grep -E "
    "'NVRM|SXid|fallen off the bus|not seeing messages|insufficient permissions' "
    "| tail -n 300; true; fi"
)
_REQUIRES = {"query": "nvidia-smi", "remap": "nvidia-smi", "pci": "lspci"}

# nvmlClocksThrottleReasons / nvmlClocksEventReasons bits (nvml.h), by nvidia-smi field name.
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# The names nvidia-smi -q prints for the same reasons ("HW Slowdown : Active").
_Q_REASONS = {
    "Idle": "gpu_idle", "Applications Clocks Setting": "applications_clocks_setting",
    "SW Power Cap": "sw_power_cap", "HW Slowdown": "hw_slowdown", "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown", "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Brake Slowdown": "hw_power_brake_slowdown",
    "Display Clock Setting": "display_clock_setting",
}
_MAX_EVENTS = 50  # kernel-log events kept in the facts (the most recent)

_SMI_ERROR = re.compile(
    r"Unable to determine the device handle|GPU is lost|fallen off the bus|Unknown Error")
# A cell NVML could not read because the GPU needs a reset first (NVML_ERROR_RESET_REQUIRED:
# "The GPU requires a reset before it can be used again"); nvidia-smi prints it in brackets.
_RESET_CELL = re.compile(r"\[GPU requires reset\]", re.I)
_STAMP = re.compile(r"^\s*\[\s*(\d+(?:\.\d+)?)\]")
_PCI = re.compile(r"(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?\s*$")
_PCI_IN_TEXT = re.compile(r"(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.[0-7]")
_LSPCI = re.compile(r"^\s*(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\s+"
                    r"(?P<cls>[0-9a-fA-F]{4}):\s+10de:[0-9a-fA-F]{4}", re.M)


def window_minutes(params: Mapping[str, Any], default: Any) -> float:
    for key in ("xid_window_minutes", "window_minutes"):
        value = params.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return float(default)


def command(params: Mapping[str, Any]) -> str:
    minutes = max(1, round(window_minutes(params, default_thresholds()["xid_window_minutes"])))
    sections = [
        ("clock", f"cat /proc/uptime; echo 'window_minutes {minutes}'"),
        ("kernel_log", _KERNEL_LOG.format(minutes=minutes)),
        ("query", _QUERY_SECTION),
        ("remap", "timeout 15 nvidia-smi -q -d ROW_REMAPPER"),
        ("pci", "timeout 5 lspci -n -d 10de:"),
    ]
    return script(sections, _REQUIRES)


# --- parsing ---------------------------------------------------------------------------------

def _key(m: re.Match[str] | None) -> str | None:
    return f"{(m.group(1) or '0000')[-4:]}:{m.group(2)}:{m.group(3)}".lower() if m else None


def pci_key(bus_id: str | None) -> str | None:
    """'00000000:9B:00.0', '0000:9b:00' and '9b:00.0' all become '0000:9b:00'.

    The PCI domain is kept: on hosts whose GPUs sit in separate domains (Azure ND A100 v4 /
    ND H100 v5 VMs: 00000001:00:00.0 ... 0000000E:00:00.0, every GPU on bus 00) the bus alone
    names all of them at once. A bus id printed without a domain is in domain 0000.
    """
    if not bus_id:
        return None
    return _key(_PCI.search(bus_id.strip()))


def _pci_key_in(line: str) -> str | None:
    return _key(_PCI_IN_TEXT.search(line))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _throttle(mask: Any) -> tuple[str | None, list[str] | None]:
    if not isinstance(mask, str) or not re.fullmatch(r"0x[0-9a-fA-F]+", mask.strip()):
        return None, None
    bits = int(mask, 16)
    return mask.strip(), [name for bit, name in THROTTLE_BITS.items() if bits & bit]


def _parse_query(text: str, rc: int | None, facts: dict[str, Any]) -> list[dict[str, Any]] | None:
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.strip().startswith("index,")), None)
    other = [line.strip() for line in (lines if header is None else lines[:header]) if line.strip()]
    errors = [line for line in lines if _SMI_ERROR.search(line)]
    facts["smi_errors"] = [line.strip()[:200] for line in errors][:8]
    facts["gpu_lost"] = sorted({k for line in errors if re.search(r"lost|fallen off", line, re.I)
                                for k in [_pci_key_in(line)] if k})
    if header is None:
        if any("No devices were found" in line for line in other):
            return []
        if rc == 0:
            raise ParseError("gpu: the query section is not nvidia-smi CSV output")
        facts["errors"]["query"] = (other[0] if other else f"nvidia-smi exited {rc}")[:200]
        return None
    csv_lines = [lines[header]] + [line for line in lines[header + 1:]
                                   if line.count(",") == lines[header].count(",")]
    if len(csv_lines) == 1:
        return []
    rows = parse_kind("nvidia-smi-query", "\n".join(csv_lines))["rows"]
    # the CSV lines the rows were read from, to see the cells the parser turned into null
    raw = [line for line in csv_lines[1:] if line.strip()]
    raw = raw if len(raw) == len(rows) else [""] * len(rows)
    gpus = []
    for row, line in zip(rows, raw, strict=True):
        mask, reasons = _throttle(row.get("clocks_throttle_reasons.active",
                                          row.get("clocks_event_reasons.active")))
        ecc = row.get("ecc.errors.uncorrected.volatile.total")
        index = row.get("index")
        gpus.append({
            "index": index if isinstance(index, int) else None,
            "name": row.get("name"),
            "bus_id": row.get("pci.bus_id"),
            "utilization_pct": _number(row.get("utilization.gpu")),
            "memory_used_mib": _number(row.get("memory.used")),
            "memory_total_mib": _number(row.get("memory.total")),
            "temperature_c": _number(row.get("temperature.gpu")),
            "power_draw_w": _number(row.get("power.draw")),
            "power_limit_w": _number(row.get("enforced.power.limit")),
            "power_default_w": _number(row.get("power.default_limit")),
            # the limit software set (nvidia-smi -pl); the enforced one may be lower when another
            # limiter (out-of-band, a Grace module's budget) holds the GPU below it
            "power_requested_w": _number(row.get("power.limit")),
            "sm_clock_mhz": _number(row.get("clocks.current.sm", row.get("clocks.sm"))),
            "sm_clock_max_mhz": _number(row.get("clocks.max.sm")),
            "throttle_mask": mask,
            "throttle_reasons": reasons,
            "ecc_uncorrected": ecc if isinstance(ecc, int) and not isinstance(ecc, bool) else None,
            "retired_pages_pending": yes_no(row.get("retired_pages.pending")),
            "remapped_rows_pending": None,
            "remapped_rows_failure": None,
            "requires_reset": bool(_RESET_CELL.search(line)) if line else None,
        })
    return gpus


def _parse_remap(text: str, gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Remapped-row flags merged into the GPU entries by bus id; the -q GPUs as a list."""
    q_gpus: list[dict[str, Any]] = parse_kind("nvidia-smi-q", text)["gpus"]
    by_bus = {pci_key(g.get("bus_id")): g for g in gpus}
    for q in q_gpus:
        remap = q.get("remapped_rows") or {}
        gpu = by_bus.get(pci_key(q.get("bus_id")))
        if gpu is None:
            continue
        gpu["remapped_rows_pending"] = remap.get("pending")
        gpu["remapped_rows_failure"] = remap.get("failure_occurred")
        if gpu["throttle_reasons"] is None and q.get("clocks_event_reasons"):
            gpu["throttle_reasons"] = [_Q_REASONS[r] for r in q["clocks_event_reasons"]
                                       if r in _Q_REASONS]
    return q_gpus


def _parse_kernel_log(text: str, uptime: float | None, facts: dict[str, Any]) -> None:
    lines = text.splitlines()
    source = lines[0].split(None, 1)[1].strip() if lines and lines[0].startswith("source ") \
        else None
    facts["kernel_log_source"] = source
    body = lines[1:] if source else lines
    if source == "none":
        facts["kernel_log_readable"] = False
        facts["errors"]["kernel_log"] = (" ".join(body).strip() or "no dmesg, no journalctl")[:200]
        return
    if any(re.search(r"not seeing messages|insufficient permissions", line) for line in body):
        facts["kernel_log_readable"] = False
        facts["errors"]["kernel_log"] = "journalctl: no permission to read the kernel log"
        return
    facts["kernel_log_readable"] = True
    xids: list[dict[str, Any]] = []
    fallen: list[dict[str, Any]] = []
    for line in body:
        if not re.search(r"Xid|fallen off the bus", line):
            continue
        stamp = _STAMP.match(line)
        age = None
        if stamp and uptime is not None:
            age = round(max(0.0, uptime - float(stamp.group(1))) / 60.0, 1)
        try:
            parsed = parse_kind("dmesg-xid", line)
        except ParseError:
            continue
        for event in parsed["xids"]:
            xids.append({"code": event["code"], "pci": event["pci"], "age_min": age,
                         "text": (event.get("text") or "")[:160], "line": line.strip()[:300]})
        if parsed["fallen_off_bus"] and not parsed["xids"]:
            pci = parsed["fallen_off_bus_pci"]
            fallen.append({"pci": pci[0] if pci else None, "age_min": age})
        elif parsed["fallen_off_bus"]:
            fallen.append({"pci": parsed["xids"][0]["pci"], "age_min": age})
    facts["xids"] = xids[-_MAX_EVENTS:]
    facts["fallen_off_bus"] = fallen[-_MAX_EVENTS:]


def in_window(events: list[dict[str, Any]], minutes: float | None) -> list[dict[str, Any]]:
    """Events inside the window; an event of unknown age counts (it cannot be ruled out)."""
    if minutes is None:
        return list(events)
    return [e for e in events if e.get("age_min") is None or e["age_min"] <= minutes]


def _aggregate(gpus: list[dict[str, Any]] | None, facts: dict[str, Any]) -> None:
    if gpus is None:
        return
    facts["gpu_count"] = len(gpus)

    def values(key: str) -> list[float]:
        return [g[key] for g in gpus if isinstance(g.get(key), int | float)]

    util = values("utilization_pct")
    if util:
        facts["utilization_avg_pct"] = round(sum(util) / len(util), 1)
        facts["utilization_min_pct"] = min(util)
    used, total = values("memory_used_mib"), values("memory_total_mib")
    if used and total and sum(total) > 0:
        facts["memory_used_pct"] = round(100.0 * sum(used) / sum(total), 1)
    if temps := values("temperature_c"):
        facts["temperature_max_c"] = max(temps)
    if power := values("power_draw_w"):
        facts["power_draw_w"] = round(sum(power) / len(power), 1)
    if clocks := values("sm_clock_mhz"):
        facts["sm_clock_mhz"] = min(clocks)
    if limits := values("power_limit_w"):
        facts["power_limit_w"] = min(limits)
    if defaults := values("power_default_w"):
        facts["power_default_limit_w"] = min(defaults)
    if max_clocks := values("sm_clock_max_mhz"):
        facts["sm_clock_max_mhz"] = min(max_clocks)
    reasons = [g["throttle_reasons"] for g in gpus if g.get("throttle_reasons") is not None]
    if reasons:
        facts["throttle_reasons"] = sorted({r for rs in reasons for r in rs})
    ecc = [g["ecc_uncorrected"] for g in gpus if g.get("ecc_uncorrected") is not None]
    if ecc:
        facts["ecc_uncorrected"] = sum(ecc)
    for key in ("remapped_rows_pending", "remapped_rows_failure"):
        flags = [g[key] for g in gpus if g.get(key) is not None]
        if key == "remapped_rows_pending":
            flags += [g["retired_pages_pending"] for g in gpus
                      if g.get("retired_pages_pending") is not None]
        if flags:
            facts[key] = any(flags)


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if not {"query", "kernel_log"} & set(sections):
        raise ParseError("gpu: neither a query nor a kernel_log section")
    facts: dict[str, Any] = {
        "gpu_count": None, "utilization_avg_pct": None, "utilization_min_pct": None,
        "memory_used_pct": None, "temperature_max_c": None, "power_draw_w": None,
        "power_limit_w": None, "power_default_limit_w": None, "sm_clock_max_mhz": None,
        "sm_clock_mhz": None, "throttle_reasons": None, "ecc_uncorrected": None,
        "remapped_rows_pending": None, "remapped_rows_failure": None, "xid_codes": None,
        "gpus": [], "xids": [], "fallen_off_bus": [], "pci_gpu_count": None, "gpu_lost": [],
        "smi_errors": [], "kernel_log_source": None, "kernel_log_readable": None,
        "xid_window_minutes": None, "uptime_s": None, "missing": [], "errors": {},
    }
    for name in ("clock", "kernel_log", "query", "remap", "pci"):
        sec = sections.get(name)
        if sec is None or sec.missing:
            facts["missing"].append(name)

    clock = sections.get("clock")
    if clock is not None and not clock.missing:
        first = clock.text.split()
        if first and re.fullmatch(r"\d+(?:\.\d+)?", first[0]):
            facts["uptime_s"] = float(first[0])
        window = re.search(r"^window_minutes (\d+(?:\.\d+)?)\s*$", clock.text, re.M)
        if window:
            facts["xid_window_minutes"] = float(window.group(1))

    log = sections.get("kernel_log")
    if log is not None and not log.missing:
        _parse_kernel_log(log.text, facts["uptime_s"], facts)
        if facts["kernel_log_readable"]:
            recent = in_window(facts["xids"], facts["xid_window_minutes"])
            facts["xid_codes"] = sorted({e["code"] for e in recent})

    query = sections.get("query")
    gpus = None
    if query is not None and not query.missing:
        gpus = _parse_query(query.text, query.rc, facts)
    remap = sections.get("remap")
    if remap is not None and not remap.missing:
        if remap.rc == 0 and remap.text.strip():
            _parse_remap(remap.text, gpus or [])
        else:
            facts["errors"]["remap"] = (remap.text.strip().splitlines() or
                                        [f"nvidia-smi -q exited {remap.rc}"])[0][:200]
    _aggregate(gpus, facts)
    facts["gpus"] = gpus or []

    pci = sections.get("pci")
    if pci is not None and not pci.missing and pci.rc == 0:
        classes = _LSPCI.findall(pci.text)
        facts["pci_gpu_count"] = sum(1 for cls in classes if cls in ("0300", "0302"))
    return facts


parse = guard_parse(NAME, _parse)
