"""nvbandwidth (acceptance L1, active): host<->device copy bandwidth of every GPU.

``nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce`` copies between pinned host
memory and each GPU with the copy engines; a GPU whose PCIe link trained narrow or slow, or that
sits behind a degraded switch, shows here first. Each GPU's figure is judged against the floor
the public health checkers use for its model (probes/acceptance.yaml).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes import active
from probes.base import Context, Probe, finding, guard_parse, split_sections
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "nvbandwidth"
LEVEL = 1
TESTS = {"host_to_device_memcpy_ce": "h2d_gb_s", "device_to_host_memcpy_ce": "d2h_gb_s"}


def command(params: Mapping[str, Any]) -> str:
    return active.active_script(
        [active.GPUS_SECTION, ("nvbandwidth", "nvbandwidth -t " + " ".join(TESTS))],
        {"gpus": "nvidia-smi", "nvbandwidth": "nvbandwidth"})


def parse(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {**active.parse_guard(text), "gpus": [], "h2d_gb_s": {},
                             "d2h_gb_s": {}, "run_error": None, "missing": False}
    if facts["refused"]:
        return facts
    sections = split_sections(text)
    facts["gpus"] = active.parse_gpus(sections["gpus"].text if "gpus" in sections else None)
    section = sections.get("nvbandwidth")
    if section is None or section.missing:
        facts["missing"] = True
        return facts
    try:
        result = parse_kind("nvbandwidth", section.text)
    except ParseError:
        facts["run_error"] = active.first_line(section.text) or f"exit status {section.rc}"
        return facts
    for test in result["tests"]:
        key = TESTS.get(test["name"])
        if key is None or not test["matrices"]:
            continue
        # One row (the CPU) and a column per GPU; each GPU's value.
        for row in test["matrices"][0]["cells"].values():
            for gpu, value in row.items():
                if value is not None and gpu.isdigit():
                    facts[key][gpu] = value
    return facts


def figures(host: str, facts: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    crit = active.criteria(ctx)
    reported = (facts.get("gpus") or [{}])[0].get("name")
    model = active.gpu_model(host, ctx, reported, crit)
    floor = crit.per(NAME, "h2d_d2h_min_gb_s", model)
    out = []
    for key, metric in (("h2d_gb_s", "h2d"), ("d2h_gb_s", "d2h")):
        for gpu, value in sorted((facts.get(key) or {}).items(), key=lambda kv: int(kv[0])):
            out.append(active.figure(
                LEVEL, NAME, metric, value, unit="GB/s", op=">=" if floor else None,
                threshold=floor.value if floor else None, source=floor.source if floor else "",
                gpu=int(gpu), model=model))
    return out


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    found = active.guard_findings(NAME, host, facts)
    if facts.get("refused"):
        return found
    if facts.get("missing"):
        return [*found, active.tool_missing(NAME, host, "nvbandwidth", "nvbandwidth-incomplete")]
    figs = facts.get("figures") or []
    if facts.get("run_error") or not figs:
        why = facts.get("run_error") or "no host<->device result in its output"
        return [*found, finding("nvbandwidth-incomplete", [host],
                                f"nvbandwidth on {host} did not complete: {why}", NAME, why=why)]
    low = [f for f in figs if f["verdict"] == "fail"]
    if low:
        worst = min(low, key=lambda f: f["value"])
        found.append(finding(
            "h2d-bandwidth-low", [host],
            f"host<->device bandwidth on {host} below {worst['threshold']:g} GB/s: "
            + ", ".join(f"GPU {f['gpu']} {f['metric']} {f['value']:.1f}" for f in low[:8]),
            NAME, low=[{k: f[k] for k in ("gpu", "metric", "value")} for f in low],
            threshold=worst["threshold"], source=worst["source"]))
    if any(f["verdict"] == "recorded" for f in figs):
        model = figs[0].get("detail", {}).get("model")
        found.append(active.not_judged(NAME, host, "host<->device bandwidth", model,
                                       "h2d_d2h_min_gb_s"))
    return found


PROBE = Probe(NAME, command, guard_parse(NAME, parse), check, timeout_s=600.0, active=True,
              figures=figures)
