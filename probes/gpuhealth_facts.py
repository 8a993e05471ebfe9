"""The gpuhealth component's facts: its script and the parser of that script's output.

What the facts mean, and why each is read, is told in probes/gpuhealth.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import Section, failure_text, guard_parse, script, split_sections
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind
from probes.pcie import bus_key

NAME = "gpuhealth"
SAMPLE_INTERVAL_S = 2

# One nvidia-smi call for everything the gpu probe's CSV query does not read. ROW_REMAPPER is
# unknown to drivers before R450, which then refuse the whole call ("Invalid combination of
# input arguments"): only then is it asked again without it.
_DISPLAY = "ECC,ROW_REMAPPER,PAGE_RETIREMENT,TEMPERATURE,POWER,PERFORMANCE"
_DISPLAY_OLD = "ECC,PAGE_RETIREMENT,TEMPERATURE,POWER,PERFORMANCE"
# diag's time limit (timeout(1)) on each call, in seconds: a call that reaches it is diag's
# limit, never the host's fault (_text)
LIMIT_S = {"inventory": 5, "query": 10, "sample_2": 10}
# lines diag reads of each report (head -n): a longer one is cut like a timed-out one
LINES = {"query": 2400, "sample_2": 1200}
_QUERY = (
    f"out=$(timeout {LIMIT_S['query']} nvidia-smi -q -d {_DISPLAY} 2>&1); rc=$?; "
    "if [ $rc -ne 0 ] && printf '%s' \"$out\" | grep -qi 'invalid'; then "
    f"out=$(timeout {LIMIT_S['query']} nvidia-smi -q -d {_DISPLAY_OLD} 2>&1); rc=$?; fi; "
    f"printf '%s\\n' \"$out\" | cut -c1-200 | head -n {LINES['query']}; (exit $rc)"
)
_SAMPLE = (f"sleep {SAMPLE_INTERVAL_S}; out=$(timeout {LIMIT_S['sample_2']} nvidia-smi -q -d "
           "ECC,PERFORMANCE 2>&1); rc=$?; printf '%s\\n' \"$out\" | cut -c1-200 | "
           f"head -n {LINES['sample_2']}; (exit $rc)")
_INVENTORY = (f"out=$(timeout {LIMIT_S['inventory']} nvidia-smi "
              "--query-gpu=index,pci.bus_id,name,uuid --format=csv 2>&1); rc=$?; "
              "printf '%s\\n' \"$out\" | cut -c1-300 | head -n 80; (exit $rc)")
SECTIONS = [("inventory", _INVENTORY), ("query", _QUERY), ("sample_2", _SAMPLE)]
_REQUIRES = {name: "nvidia-smi" for name, _ in SECTIONS}

# clock-event reason as nvidia-smi -q prints it -> fact key
REASONS = {
    "Idle": "reason_idle", "Applications Clocks Setting": "reason_app_clocks",
    "SW Power Cap": "reason_sw_power_cap", "HW Slowdown": "reason_hw_slowdown",
    "HW Thermal Slowdown": "reason_hw_thermal_slowdown",
    "HW Power Brake Slowdown": "reason_hw_power_brake", "Sync Boost": "reason_sync_boost",
    "SW Thermal Slowdown": "reason_sw_thermal_slowdown",
    "Display Clock Setting": "reason_display_clock",
}
# clocks_event_counters_us keys of the nvidia-smi-q parser -> fact key
COUNTERS = {"sw_power_cap": "sw_power_cap_us", "sync_boost": "sync_boost_us",
            "sw_thermal_slowdown": "sw_thermal_us", "hw_thermal_slowdown": "hw_thermal_us",
            "hw_power_brake": "hw_power_brake_us"}
_ECC_KINDS = ("correctable", "uncorrectable", "dram_correctable", "dram_uncorrectable",
              "sram_correctable", "sram_uncorrectable")
_SMI_ERROR = ("Unable to determine the device handle", "GPU is lost", "Unknown Error",
              "fallen off the bus", "No devices were found",
              "couldn't communicate with the NVIDIA driver")


def command(params: Mapping[str, Any]) -> str:
    return script(SECTIONS, _REQUIRES)


# --- parsing ---------------------------------------------------------------------------------

def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _minus(a: Any, b: Any) -> float | None:
    x, y = _num(a), _num(b)
    return round(x - y, 2) if x is not None and y is not None else None


def _delta(first: Any, second: Any) -> int | None:
    if not isinstance(first, int) or not isinstance(second, int):
        return None
    return second - first if second >= first else second  # reset between the samples


def _any_true(*flags: bool | None) -> bool | None:
    known = [f for f in flags if f is not None]
    return any(known) if known else None


def _q_gpus(text: str) -> list[dict[str, Any]]:
    try:
        return list(parse_kind("nvidia-smi-q", text)["gpus"])
    except ParseError:
        return []


def _ecc_mode(value: Any) -> str | None:
    """"Enabled" or "Disabled" (NVML's two ECC modes); anything else nvidia-smi prints in the
    field ("Unknown Error", "Not Supported", "GPU is lost": nvmlErrorString of a failed read)
    is a value not read, never a mode that differs from the pending one."""
    mode = str(value).strip().capitalize() if value is not None else None
    return mode if mode in ("Enabled", "Disabled") else None


def _temperature_facts(t: Mapping[str, Any]) -> dict[str, Any]:
    """Temperatures, their thresholds, and the margins (degrees left) to each threshold.

    Boards print thresholds as absolute degrees ("GPU Slowdown Temp : 95 C") or, on newer
    drivers and boards, as T.Limit margins ("GPU T.Limit Temp : 54 C" is 54 degrees below
    T.Limit, "GPU Slowdown T.Limit Temp : -2 C" means HW slowdown starts 2 degrees above it).
    Either way ``slowdown_margin_c`` is how many degrees the GPU has left before HW slowdown
    (0 or less: at or past it); the same for shutdown and the max operating (SW slowdown) limit.
    """
    def margin(absolute: str, tlimit: str) -> float | None:
        if t.get(absolute) is not None:
            return _minus(t.get(absolute), t.get("current_c"))
        return _minus(t.get("tlimit_c"), t.get(tlimit))

    return {
        "temperature_c": _num(t.get("current_c")),
        "memory_temperature_c": _num(t.get("memory_c")),
        "shutdown_temp_c": _num(t.get("shutdown_c")),
        "slowdown_temp_c": _num(t.get("slowdown_c")),
        "max_operating_temp_c": _num(t.get("max_operating_c")),
        "memory_max_operating_temp_c": _num(t.get("memory_max_operating_c")),
        "target_temp_c": _num(t.get("target_c")),
        "tlimit_c": _num(t.get("tlimit_c")),
        "slowdown_margin_c": margin("slowdown_c", "slowdown_tlimit_c"),
        "shutdown_margin_c": margin("shutdown_c", "shutdown_tlimit_c"),
        "max_operating_margin_c": margin("max_operating_c", "max_operating_tlimit_c"),
        "memory_max_operating_margin_c": _minus(t.get("memory_max_operating_c"),
                                                t.get("memory_c")),
    }


def _power_facts(q: Mapping[str, Any]) -> dict[str, Any]:
    # R530 on print only "Current Power Limit" (the enforced one); older drivers print the
    # requested "Power Limit" and the "Enforced Power Limit" apart.
    limit = _num(q.get("power_limit_enforced_w"))
    requested = _num(q.get("power_limit_requested_w"))
    if limit is None:
        limit = _num(q.get("power_limit_w"))
    elif requested is None:  # the old layout's "Power Limit" is the one software requested
        requested = _num(q.get("power_limit_w"))
    draw, default = _num(q.get("power_draw_w")), _num(q.get("power_limit_default_w"))
    # The deficit is what software (nvidia-smi -pl) took off the default. A "Current Power
    # Limit" below a "Requested Power Limit" comes from another limiter (NVML
    # nvmlDeviceGetEnforcedPowerLimit: "after taking into account all limiters", out-of-band
    # included; a Grace Hopper module's budget): kept apart as power_platform_deficit_w.
    return {
        "power_draw_w": draw, "power_limit_w": limit, "power_default_w": default,
        "power_requested_w": requested,
        "power_min_w": _num(q.get("power_limit_min_w")),
        "power_max_w": _num(q.get("power_limit_max_w")),
        "power_limit_deficit_w": _minus(default, requested if requested is not None else limit),
        "power_platform_deficit_w": _minus(requested, limit),
        "power_draw_pct_of_limit": round(100.0 * draw / limit, 1)
        if draw is not None and limit else None,
    }


def _ecc_facts(q: Mapping[str, Any]) -> dict[str, Any]:
    counts = q.get("ecc_counts") or {}
    out: dict[str, Any] = {}
    for group in ("volatile", "aggregate"):
        values = counts.get(group) or {}
        for kind in _ECC_KINDS:
            out[f"ecc_{group}_{kind}"] = values.get(kind)
    return out


def _gpu_facts(index: int, q: Mapping[str, Any], inventory: Mapping[str, Any]) -> dict[str, Any]:
    remap = q.get("remapped_rows") or {}
    hist = q.get("remap_histogram") or {}
    states = q.get("clocks_event_states") or {}
    counters = q.get("clocks_event_counters_us") or {}
    sbe, dbe = q.get("retired_pages_sbe"), q.get("retired_pages_dbe")
    ecc_mode, ecc_pending = _ecc_mode(q.get("ecc_mode")), _ecc_mode(q.get("ecc_mode_pending"))
    gpu: dict[str, Any] = {
        "index": inventory.get("index", index), "bus_id": q.get("bus_id"),
        "name": inventory.get("name") or q.get("name"), "uuid": inventory.get("uuid"),
        "performance_state": q.get("performance_state"),
        "ecc_mode": ecc_mode, "ecc_mode_pending": ecc_pending,
        "ecc_enabled": {"Enabled": True, "Disabled": False}.get(str(ecc_mode)),
        **_ecc_facts(q),
        "sram_threshold_exceeded": q.get("sram_threshold_exceeded"),
        # Blackwell (R575 on): a TPC or HBM channel repair staged for the next reset, and the
        # flag that no repair is left for a memory fault (None: not printed, or N/A)
        "channel_repair_pending": q.get("channel_repair_pending"),
        "tpc_repair_pending": q.get("tpc_repair_pending"),
        "unrepairable_memory": q.get("unrepairable_memory"),
        "retired_sbe": sbe, "retired_dbe": dbe,
        "retired_total": sbe + dbe if isinstance(sbe, int) and isinstance(dbe, int) else None,
        "retired_pending": q.get("retired_pages_pending"),
        "remap_correctable": remap.get("correctable"),
        "remap_uncorrectable": remap.get("uncorrectable"),
        "remap_pending": remap.get("pending"), "remap_failure": remap.get("failure_occurred"),
        **{f"remap_hist_{level}": hist.get(level)
           for level in ("max", "high", "partial", "low", "none")},
        **_temperature_facts(q.get("temperatures") or {}),
        **_power_facts(q),
        **{key: states.get(label) for label, key in REASONS.items()},
        **{key: counters.get(name) for name, key in COUNTERS.items()},
    }
    gpu.update({f"{key}_delta": None for key in COUNTERS.values()})
    gpu["ecc_volatile_correctable_delta"] = gpu["ecc_volatile_uncorrectable_delta"] = None
    return gpu


def _merge_second(gpu: dict[str, Any], later: Mapping[str, Any]) -> None:
    """Deltas against the second sample; a reason counts as active if it was in either."""
    counts = (later.get("ecc_counts") or {}).get("volatile") or {}
    for kind in ("correctable", "uncorrectable"):
        gpu[f"ecc_volatile_{kind}_delta"] = _delta(gpu[f"ecc_volatile_{kind}"], counts.get(kind))
    counters = later.get("clocks_event_counters_us") or {}
    for name, key in COUNTERS.items():
        gpu[f"{key}_delta"] = _delta(gpu[key], counters.get(name))
    states = later.get("clocks_event_states") or {}
    for label, key in REASONS.items():
        gpu[key] = _any_true(gpu[key], states.get(label))


def _inventory(text: str | None) -> dict[str, dict[str, Any]]:
    if not text:
        return {}
    try:
        rows = parse_kind("nvidia-smi-query", text)["rows"]
    except ParseError:
        return {}
    return {key: {"index": row.get("index") if isinstance(row.get("index"), int) else None,
                  "name": row.get("name"), "uuid": row.get("uuid")}
            for row in rows if (key := bus_key(str(row.get("pci.bus_id") or "")))}


# timeout(1)'s exit status: timed out (124), or killed after it did not stop (137)
_TIMED_OUT = frozenset({124, 137})
_GPU_HEAD = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:", re.MULTILINE)


def _before_last_gpu(text: str) -> str:
    """The report up to its last "GPU <bus id>" block: the block a killed nvidia-smi was
    printing may be cut anywhere (its output reaches the pipe in buffer-sized pieces)."""
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if _GPU_HEAD.match(line)]
    return "\n".join(lines[:heads[-1]]) + "\n" if heads else text


def _text(sec: Section | None, name: str, facts: dict[str, Any]) -> str | None:
    if sec is None or sec.missing:
        facts["missing"].append(name)
        return None
    if sec.rc in _TIMED_OUT:
        # diag's own limit, not the host's fault: what was printed in full is read, the GPUs
        # after it are not measured (the check says so)
        facts["errors"][name] = (f"nvidia-smi did not finish within diag's {LIMIT_S[name]} s "
                                 f"limit (timeout exit status {sec.rc})")
        if name == "inventory":
            return sec.text
        text = _before_last_gpu(sec.text)
        return text if _GPU_HEAD.search(text) else None
    if name in LINES and len(sec.text.splitlines()) >= LINES[name] and _GPU_HEAD.search(sec.text):
        # head -n stopped the report: its last GPU block may be cut, the GPUs after it unread
        facts["errors"][name] = f"the report is longer than the {LINES[name]} lines diag reads"
        text = _before_last_gpu(sec.text)
        return text if _GPU_HEAD.search(text) else None
    if sec.rc != 0 and not any(mark in sec.text for mark in ("GPU 0000", "index,",
                                                              "No devices were found")):
        facts["errors"][name] = failure_text(sec.text, sec.rc)
        return None
    return sec.text


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "query" not in sections:
        raise ParseError("gpuhealth: no query section (not the output of this component)")
    facts: dict[str, Any] = {
        "gpu_count": None, "gpus": [], "driver_version": None, "temperature_max_c": None,
        "memory_temperature_max_c": None, "ecc_volatile_uncorrectable": None,
        "power_limit_min_w": None, "gpu_models": None, "sample_interval_s": None,
        "smi_errors": [],
        "missing": [], "errors": {},
    }
    inventory = _inventory(_text(sections.get("inventory"), "inventory", facts))
    query = _text(sections.get("query"), "query", facts)
    if query is not None:
        facts["smi_errors"] = [line.strip()[:200] for line in query.splitlines()
                               if any(e in line for e in _SMI_ERROR)][:8]
        gpus = _q_gpus(query)
        if not gpus and "No devices were found" not in query:
            facts["errors"].setdefault("query", failure_text(query, sections["query"].rc))
        else:
            try:
                facts["driver_version"] = parse_kind("nvidia-smi-q", query)["driver_version"]
            except ParseError:
                facts["driver_version"] = None
            facts["gpus"] = [_gpu_facts(i, q, inventory.get(bus_key(q.get("bus_id")) or "", {}))
                             for i, q in enumerate(gpus)]
            facts["gpu_count"] = len(gpus)
    sample = _text(sections.get("sample_2"), "sample_2", facts)
    if sample is not None and facts["gpus"]:
        later = {bus_key(q.get("bus_id")): q for q in _q_gpus(sample)}
        if later:
            facts["sample_interval_s"] = float(SAMPLE_INTERVAL_S)
            for gpu in facts["gpus"]:
                if (match := later.get(bus_key(gpu["bus_id"]))) is not None:
                    _merge_second(gpu, match)
        else:
            facts["errors"].setdefault("sample_2",
                                       failure_text(sample, sections["sample_2"].rc))
    gpus = facts["gpus"]
    temps = [g["temperature_c"] for g in gpus if g["temperature_c"] is not None]
    mems = [g["memory_temperature_c"] for g in gpus if g["memory_temperature_c"] is not None]
    dbe = [g["ecc_volatile_uncorrectable"] for g in gpus
           if g["ecc_volatile_uncorrectable"] is not None]
    limits = [g["power_limit_w"] for g in gpus if g["power_limit_w"] is not None]
    facts["temperature_max_c"] = max(temps) if temps else None
    facts["memory_temperature_max_c"] = max(mems) if mems else None
    facts["ecc_volatile_uncorrectable"] = sum(dbe) if dbe else None
    facts["power_limit_min_w"] = min(limits) if limits else None
    # the GPU models on the host: a limit is compared only with hosts of the same models
    facts["gpu_models"] = sorted({str(g["name"]) for g in gpus if g.get("name")}) or None
    return facts


parse = guard_parse(NAME, _parse)
