"""gpu-burn (acceptance L1, active): a timed burn of every GPU (wilicc/gpu-burn).

gpu_burn multiplies matrices on every GPU for the given time and compares the results across
the run; at the end it prints "GPU N: OK" or "FAULTY" per GPU. A FAULTY GPU computed wrong
results under load: it fails the node. A run that died or never printed its verdicts proves
nothing and is reported as incomplete, never as a pass. Gflop/s, errors and temperatures of
the last progress line are kept as figures for the node's history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes import active
from probes.base import Context, Probe, finding, guard_parse, split_sections
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "gpu-burn"
LEVEL = 1


def seconds(params: Mapping[str, Any]) -> int:
    try:
        value = int(params.get("seconds") or 0)
    except (TypeError, ValueError):
        value = 0
    return value if value > 0 else int(
        active.merged(params.get("criteria")).get(NAME, "seconds").value)


def limit_s(params: Mapping[str, Any]) -> float:
    return seconds(params) + 180.0  # CUDA start-up and the final comparison


def command(params: Mapping[str, Any]) -> str:
    # gpu_burn loads compare.ptx from its working directory (older builds): run it from there.
    burn = ('cd "$(dirname "$(command -v gpu_burn)")" && '
            f"gpu_burn -d {seconds(params)}")
    return active.active_script([active.GPUS_SECTION, ("burn", burn)],
                                {"gpus": "nvidia-smi", "burn": "gpu_burn"})


def parse(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {**active.parse_guard(text), "gpus": [], "verdicts": {},
                             "faulty": [], "gpus_tested": None, "died": False,
                             "last_progress": None, "run_error": None, "missing": False}
    if facts["refused"]:
        return facts
    sections = split_sections(text)
    facts["gpus"] = active.parse_gpus(sections["gpus"].text if "gpus" in sections else None)
    section = sections.get("burn")
    if section is None or section.missing:
        facts["missing"] = True
        return facts
    try:
        result = parse_kind("gpu-burn", section.text)
    except ParseError:
        facts["run_error"] = active.first_line(section.text) or f"exit status {section.rc}"
        return facts
    facts.update(verdicts=result["verdicts"], faulty=result["faulty"],
                 gpus_tested=result["gpus_tested"], died=result["died"],
                 last_progress=result["last_progress"], duration_s=result["duration_s"])
    return facts


def figures(host: str, facts: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    source = active.criteria(ctx).get(NAME, "max_faulty_gpus").source
    out = [active.figure(LEVEL, NAME, "verdict", verdict, op="==", threshold="OK",
                         verdict="pass" if verdict == "OK" else "fail", source=source,
                         gpu=int(gpu), seconds=seconds(ctx.params))
           for gpu, verdict in sorted((facts.get("verdicts") or {}).items(),
                                      key=lambda kv: int(kv[0]))]
    progress = facts.get("last_progress") or {}
    for i, gflops in enumerate(progress.get("gflops") or []):
        out.append(active.figure(LEVEL, NAME, "gflops", gflops, unit="Gflop/s", gpu=i))
    return out


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    found = active.guard_findings(NAME, host, facts)
    if facts.get("refused"):
        return found
    if facts.get("missing"):
        return [*found, active.tool_missing(NAME, host, "gpu_burn", "gpu-burn-incomplete")]
    if facts.get("faulty"):
        gpus = ", ".join(f"GPU {g}" for g in facts["faulty"])
        return [*found, finding("gpu-burn-faulty", [host],
                                f"gpu_burn found faulty GPU(s) on {host}: {gpus} computed "
                                "wrong results under load", NAME, faulty=facts["faulty"])]
    if facts.get("run_error") or facts.get("died") or not facts.get("verdicts"):
        why = facts.get("run_error") or ("a GPU died during the burn" if facts.get("died")
                                         else "it printed no per-GPU verdict")
        return [*found, finding("gpu-burn-incomplete", [host],
                                f"gpu_burn on {host} did not complete: {why}", NAME, why=why)]
    tested, listed = facts.get("gpus_tested"), len(facts.get("gpus") or [])
    if tested is not None and listed and tested < listed:
        found.append(finding("gpu-burn-incomplete", [host],
                             f"gpu_burn on {host} tested {tested} of the node's {listed} GPUs",
                             NAME, why="not every GPU tested", tested=tested, gpus=listed))
    return found


PROBE = Probe(NAME, command, guard_parse(NAME, parse), check, timeout_s=780.0, active=True,
              figures=figures, limit_s=limit_s)
