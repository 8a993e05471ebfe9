"""dcgm-diag (acceptance L1, active): NVIDIA's own GPU diagnostics, ``dcgmi diag -r N -j``.

DCGM's run levels trade time for depth (docs: -r 1 seconds, -r 2 about two minutes, -r 3 about
15 minutes of stress, memory, PCIe and NVLink tests, -r 4 extended); acceptance runs -r 3, and
-r 4 for a first acceptance (``first: true``). Every test row is a figure per GPU; any Fail, or
an error DCGM raises before its tests (row remappings pending, a GPU it cannot use), fails the
node and names the test and the GPU. A Warn is reported, not passed over.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes import active
from probes.base import Context, Probe, finding, guard_parse
from probes.model import Finding

NAME = "dcgm-diag"
LEVEL = 1
# Host-side limit per run level: DCGM's documented durations with room for 8 GPUs.
_LIMIT_S = {1: 300.0, 2: 900.0, 3: 3600.0, 4: 10800.0}
_VERDICT = {"Pass": "pass", "Fail": "fail", "Warn": "warn", "Skip": "skipped"}


def run_level(params: Mapping[str, Any]) -> int:
    crit = active.merged(params.get("criteria"))
    key = "first_acceptance_level" if params.get("first") else "run_level"
    try:
        level = int(params.get("level") or crit.get(NAME, key).value)
    except (TypeError, ValueError):
        level = int(crit.get(NAME, "run_level").value)
    return level if level in _LIMIT_S else 3


def limit_s(params: Mapping[str, Any]) -> float:
    return _LIMIT_S[run_level(params)]


def command(params: Mapping[str, Any]) -> str:
    level = run_level(params)
    return active.active_script([active.GPUS_SECTION, ("dcgmi", f"dcgmi diag -r {level} -j")],
                                {"gpus": "nvidia-smi", "dcgmi": "dcgmi"})


def parse(text: str) -> dict[str, Any]:
    facts, section = active.tool_section(text, "dcgmi", level=None, tests=[], failed_tests=[],
                                         errors=[], run_error=None)
    result = section and active.parse_tool(facts, section, "dcgmi-diag")
    if not result:
        return facts
    facts.update(tests=result["tests"], failed_tests=result["failed_tests"],
                 errors=result["errors"], dcgm_version=result["dcgm_version"])
    return facts


def figures(host: str, facts: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    level = run_level(ctx.params)
    source = active.criteria(ctx).get(NAME, "max_failed_tests").source
    out = []
    for error in facts.get("errors") or []:
        out.append(active.figure(LEVEL, NAME, "deployment", error, verdict="fail",
                                 source=source, run_level=level))
    for test in facts.get("tests") or []:
        gpus = test.get("gpus") or {}
        for gpu, status in (gpus.items() if gpus else [(None, test["status"])]):
            out.append(active.figure(
                LEVEL, NAME, test["name"], status, op="==", threshold="Pass",
                verdict=_VERDICT.get(status, "recorded"), source=source,
                gpu=int(gpu) if gpu is not None else None, run_level=level))
    return out


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    found, done = active.check_start(NAME, host, facts, "dcgmi", "dcgm-diag-incomplete")
    if done:
        return found
    level = run_level(ctx.params)
    if facts.get("run_error"):
        return [*found, finding("dcgm-diag-incomplete", [host],
                                f"dcgmi diag -r {level} did not run on {host}: "
                                f"{facts['run_error']}", NAME, error=facts["run_error"])]
    figs = facts.get("figures") or []
    failed = [f for f in figs if f["verdict"] == "fail"]
    if failed:
        named = sorted({_where(f) for f in failed})
        messages = [m for t in facts.get("tests") or [] if t["status"] == "Fail"
                    for m in t["messages"]][:10]
        # DCGM's own words ("Found 126 faulty memory elements on GPU 5"): what an RMA asks for
        said = f"; DCGM: {' | '.join(messages)}"[:600] if messages else ""
        found.append(finding(
            "dcgm-diag-failed", [host],
            f"dcgmi diag -r {level} failed on {host}: {', '.join(named)}{said}", NAME,
            failed=named, messages=messages))
    elif not facts.get("tests"):
        found.append(finding("dcgm-diag-incomplete", [host],
                             f"dcgmi diag -r {level} on {host} reported no test", NAME))
    warned = sorted({_where(f) for f in figs if f["verdict"] == "warn"})
    if warned:
        found.append(finding("dcgm-diag-warning", [host],
                             f"dcgmi diag -r {level} warned on {host}: {', '.join(warned)}",
                             NAME, warned=warned))
    return found


def _where(fig: Mapping[str, Any]) -> str:
    if fig["metric"] == "deployment":
        return f"deployment ({fig['value']})"
    return str(fig["metric"]) + (f" (GPU {fig['gpu']})" if fig["gpu"] is not None else "")


PROBE = Probe(NAME, command, guard_parse(NAME, parse), check, timeout_s=3600.0, active=True,
              figures=figures, limit_s=limit_s)
