"""Power and heat: when a GPU's clocks are really held down, and when it only looks alarming.

A training GPU under full load sits at its power limit: nvidia-smi then shows "SW Power Cap"
active, and that is the board doing its job, not a fault. The public health checks agree:
Azure's check_gpu_clock_throttling ignores SW Power Cap (like Idle) and flags the other
reasons. So SW Power Cap is a finding only when it costs something the fleet does not pay: the
enforced limit was lowered below the board's default (or below the fleet's), or the host's
clocks under load are below the fleet's. A HW power brake (the chassis or PSU pulling the
brake) is always a finding.

Heat is judged the same way: a GPU is throttled only when a thermal slowdown reason is active
(SW or HW thermal slowdown, or HW slowdown without a power brake). A hot GPU without one, at
normal clocks, is "running hot": worth watching, never a reason to drain the node.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from probes.base import Context, finding, fleet_minority
from probes.gpu_facts import NAME
from probes.model import Finding

# Active throttle reasons (the names of gpu_facts.THROTTLE_BITS) that mean heat, and power.
THERMAL_REASONS = ("hw_thermal_slowdown", "sw_thermal_slowdown")
BRAKE_REASONS = ("hw_power_brake_slowdown",)
# A GPU counts as loaded (its clocks comparable with its peers') from this utilization on.
BUSY_PCT = 50.0
# Limits within this many watts of the default are the default (nvidia-smi prints 2 decimals,
# and boards round their default differently).
LIMIT_TOLERANCE_W = 1.0


def split_reasons(reasons: list[str]) -> tuple[list[str], list[str], bool]:
    """Active reasons split into (thermal, power brake) and whether SW Power Cap is active.

    HW Slowdown is the board's emergency brake, pulled for overheating or for a power-supply
    event; with HW Power Brake beside it the cause is power, otherwise it is read as thermal.
    """
    active = set(reasons)
    thermal = [r for r in THERMAL_REASONS if r in active]
    brake = [r for r in BRAKE_REASONS if r in active]
    if "hw_slowdown" in active:
        (brake if brake else thermal).append("hw_slowdown")
    return thermal, brake, "sw_power_cap" in active


def _label(gpu: dict[str, Any]) -> str:
    return f"GPU{gpu.get('index')}"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def lowered_limit(gpu: dict[str, Any]) -> tuple[float, float] | None:
    """(set, default) watts when the power limit software set is below the board's default.

    The limit set is ``power.limit`` (nvidia-smi -pl, NVML's power management limit) where the
    driver printed it, else the enforced one. An enforced limit below a set limit that is the
    default comes from another limiter (NVML nvmlDeviceGetEnforcedPowerLimit: "after taking
    into account all limiters ... This includes the out of band power limit interface"; a
    Grace Hopper module's budget shows "Current Power Limit : 700 W" under "Requested : 900 W"):
    nobody lowered it on the host, and only the fleet comparison judges it.
    """
    limit = _num(gpu.get("power_requested_w"))
    if limit is None:
        limit = _num(gpu.get("power_limit_w"))
    default = _num(gpu.get("power_default_w"))
    if limit is None or default is None or limit >= default - LIMIT_TOLERANCE_W:
        return None
    return limit, default


def throttle_findings(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings = []
    thermal: dict[str, list[str]] = {}
    brake: dict[str, list[str]] = {}
    lowered: dict[str, dict[str, float]] = {}
    hot: dict[str, dict[str, Any]] = {}
    limit = ctx.threshold("gpu_temperature_max_c")
    for gpu in facts.get("gpus") or []:
        label = _label(gpu)
        t, b, capped = split_reasons(gpu.get("throttle_reasons") or [])
        if t:
            thermal[label] = t
        if b:
            brake[label] = b
        low = lowered_limit(gpu)
        busy = (_num(gpu.get("utilization_pct")) or 0.0) >= BUSY_PCT
        if low and (capped or busy):
            lowered[label] = {"enforced_w": low[0], "default_w": low[1]}
        temp = _num(gpu.get("temperature_c"))
        if temp is not None and temp > limit and not t:
            hot[label] = {"temperature_c": temp, "sm_clock_mhz": gpu.get("sm_clock_mhz"),
                          "sm_clock_max_mhz": gpu.get("sm_clock_max_mhz")}
    if thermal:
        findings.append(finding(
            "gpu-throttle-thermal", [host],
            f"{host}: thermal slowdown active on {', '.join(thermal)}", NAME, gpus=thermal,
            max_temperature_c=facts.get("temperature_max_c")))
    if brake:
        findings.append(finding(
            "gpu-throttle-power", [host],
            f"{host}: HW power brake slowdown on {', '.join(brake)} (the chassis or PSU is "
            "pulling the brake)", NAME, gpus=brake, cause="power-brake",
            power_draw_w=facts.get("power_draw_w")))
    if lowered:
        # A limit set on purpose (nvidia-smi -pl, a site power budget) is a configuration, not
        # a fault of the host: NVIDIA documents SW Power Cap as the clocks keeping to "the
        # current power limit", and the public checkers fail no node for it (Azure's
        # azure_gpu_clock_throttling.nhc skips SW Power Cap; gpud's hw-slowdown component
        # reports only HW slowdowns). So on its own host it is a warning; a host whose limit
        # or clocks are below its fleet's is judged by check_fleet (an error).
        first = next(iter(lowered.values()))
        findings.append(finding(
            "gpu-throttle-power", [host],
            f"{host}: power limit set to {first['enforced_w']:g} W (default "
            f"{first['default_w']:g} W) on {', '.join(lowered)} while under load: a "
            "configuration; restore the default if it was not set on purpose",
            NAME, severity="warning", gpus=lowered, cause="limit-below-default"))
    if hot:
        findings.append(finding(
            "gpu-running-hot", [host],
            f"{host}: {', '.join(hot)} above {limit} C without any thermal slowdown; clocks "
            + ", ".join(f"{g} {v['sm_clock_mhz']}/{v['sm_clock_max_mhz']} MHz"
                        for g, v in hot.items()) + ": watch, not throttled",
            NAME, gpus=hot, threshold_c=limit))
    return findings


def _busy_capped_clock(facts: dict[str, Any]) -> float | None:
    """The lowest SM clock among the host's loaded GPUs that sit at the SW power cap."""
    clocks = []
    for gpu in facts.get("gpus") or []:
        _, _, capped = split_reasons(gpu.get("throttle_reasons") or [])
        busy = (_num(gpu.get("utilization_pct")) or 0.0) >= BUSY_PCT
        clock = _num(gpu.get("sm_clock_mhz"))
        if capped and busy and clock is not None:
            clocks.append(clock)
    return min(clocks) if clocks else None


def fleet_power_findings(facts_by_host: dict[str, dict[str, Any]], ctx: Context,
                         job_running: Callable[[dict[str, Any]], bool]) -> list[Finding]:
    """Limits below the fleet's majority, and capped hosts clocking below the median of their
    GPU model's loaded hosts."""
    findings = []
    # hosts whose own check already named a limit below the board's default (a warning there:
    # the limit below the fleet's is still judged here, the clocks it costs are not again)
    lowered = {h for h, f in facts_by_host.items()
               if any(lowered_limit(g) for g in f.get("gpus") or [])}
    by_model: dict[str, dict[str, float]] = {}
    for host, facts in facts_by_host.items():
        for gpu in facts.get("gpus") or []:
            enforced = _num(gpu.get("power_limit_w"))
            if enforced is not None:
                per_host = by_model.setdefault(str(gpu.get("name")), {})
                per_host[host] = min(per_host.get(host, enforced), enforced)
    for model, limits in sorted(by_model.items()):
        low = fleet_minority(limits, below=True)
        if low:
            findings.append(finding(
                "gpu-throttle-power", low.hosts,
                low.below(f"set the {model} power limit below", "g", " W"), NAME,
                cause="limit-below-fleet", majority_w=low.majority, limits_w=low.hosts))
    # Clocks are compared among hosts of the same GPU model only: an A100 (1410 MHz max) or an
    # H100 PCIe (1755 MHz) walked with H100 SXM hosts (1980 MHz) is not slow for clocking lower.
    groups: dict[tuple[str, ...], list[str]] = {}
    for host, facts in facts_by_host.items():
        groups.setdefault(_model(facts), []).append(host)
    for hosts in groups.values():
        findings += _clocks_below_fleet({h: facts_by_host[h] for h in hosts}, ctx, job_running,
                                        lowered)
    return findings


def _model(facts: dict[str, Any]) -> tuple[str, ...]:
    """The GPU models nvidia-smi names on the host (empty when it names none)."""
    return tuple(sorted({str(g["name"]) for g in facts.get("gpus") or [] if g.get("name")}))


def _clocks_below_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context,
                        job_running: Callable[[dict[str, Any]], bool],
                        lowered: set[str]) -> list[Finding]:
    """Capped hosts whose loaded SM clock is below the median of the loaded hosts given (all
    of one GPU model)."""
    clocks = {h: c for h, f in facts_by_host.items()
              if job_running(f) and (c := _busy_capped_clock(f)) is not None}
    loaded = {h: c for h, f in facts_by_host.items() if job_running(f)
              for c in [min((_num(g.get("sm_clock_mhz")) or 0.0 for g in f.get("gpus") or []
                             if (_num(g.get("utilization_pct")) or 0.0) >= BUSY_PCT),
                            default=0.0)] if c}
    if not clocks or len(loaded) < 3:
        return []
    median = statistics.median(loaded.values())
    floor = median * (1 - ctx.threshold("gpu_clock_below_fleet_pct") / 100.0)
    slow = {h: c for h, c in clocks.items() if c < floor and h not in lowered}
    if not slow:
        return []
    return [finding(
        "gpu-throttle-power", slow,
        f"SM clocks at the SW power cap below the fleet's {median:g} MHz under the same "
        "job on " + ", ".join(f"{h} ({c:g} MHz)" for h, c in sorted(slow.items())),
        NAME, cause="clocks-below-fleet", fleet_median_mhz=median, clocks_mhz=slow,
        threshold_pct=ctx.threshold("gpu_clock_below_fleet_pct"))]
