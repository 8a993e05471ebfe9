"""nccl-node (acceptance L2, active): ``all_reduce_perf`` across every GPU of the node.

NVLink/NVSwitch (or PCIe) inside one node carries the all_reduce; its bus bandwidth at
bandwidth-bound message sizes is judged against the floor the public checkers use for the GPU
model (Azure: 460 GB/s on 8x H100, 228 on 8x A100). Any ``#wrong`` value is corrupted data and
fails the node outright; a run that aborted (CUDA/NCCL failure, no summary) is incomplete.
The measure shared with the multi-node level lives here too (:func:`judge_run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes import active
from probes.base import Context, Probe, finding, guard_parse
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "nccl-node"
LEVEL = 2
SIZES = "-b 8 -e 8G -f 2"
# The node's GPU count from nvidia-smi (8 when it cannot tell), one thread driving them all.
_RUN = ("g=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU '); "
        '[ "$g" -gt 0 ] || g=8; '
        f'all_reduce_perf {SIZES} -g "$g"')


def _sizes(spec: str = SIZES) -> list[int]:
    """The message sizes ``-b B -e E -f F`` runs."""
    words = spec.split()
    first, last, factor = (_bytes(words[words.index(flag) + 1]) for flag in ("-b", "-e", "-f"))
    sizes = [first]
    while sizes[-1] * factor <= last:
        sizes.append(sizes[-1] * factor)
    return sizes


def _bytes(word: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(word[:-1]) * units[word[-1]] if word[-1] in units else int(word)


def limit_s(params: Mapping[str, Any]) -> float:
    """How long the run may take before it is a hang: the time its sizes take at the model's
    busbw floor (the slowest floor when the model is not known), with start-up and margin,
    within a floor and a cap (probes/acceptance.yaml, each value with its source)."""
    crit = active.merged(params.get("criteria"))
    model = crit.model_of(str(params["gpu_model"])) if params.get("gpu_model") else None
    floor = crit.per(NAME, "busbw_min_gb_s", model) if model else None
    floors = [floor.value] if floor else [
        c.value for key in crit.keys(NAME, "busbw_min_gb_s")
        if (c := crit.per(NAME, "busbw_min_gb_s", key)) is not None]
    gpus = 8  # the traffic per GPU grows towards 2x with the GPU count: 8 is the most
    moved = 2 * sum(_sizes()) * crit.get(NAME, "limit_iterations").value * 2 * (gpus - 1) / gpus
    expected = crit.get(NAME, "limit_startup_s").value + moved / (min(floors or [100]) * 1e9)
    return float(min(max(expected * crit.get(NAME, "limit_margin").value,
                         crit.get(NAME, "limit_floor_s").value),
                     crit.get(NAME, "limit_cap_s").value))


def command(params: Mapping[str, Any]) -> str:
    return active.active_script([active.GPUS_SECTION, ("nccl", _RUN)],
                                {"gpus": "nvidia-smi", "nccl": "all_reduce_perf"})


def run_facts(text: str, rc: int | None) -> dict[str, Any]:
    """One all_reduce_perf output as the facts both the node and multi-node levels judge:
    busbw per size, #wrong, whether it completed, and why not."""
    facts: dict[str, Any] = {"rows": [], "ranks": None, "hosts": [], "wrong": None,
                             "completed": False, "failures": [], "avg_busbw_gb_s": None}
    try:
        result = parse_kind("nccl-tests", text)
    except ParseError:
        facts["failures"] = [active.first_line(text) or f"exit status {rc}"]
        return facts
    rows = [{"size_bytes": r["size_bytes"],
             "busbw_gb_s": _mean(r.get("busbw_oop_gb_s"), r.get("busbw_ip_gb_s"))}
            for r in result["rows"]]
    cells = [r[k] for r in result["rows"] for k in ("wrong_oop", "wrong_ip")
             if r.get(k) is not None]
    wrong = result.get("wrong")
    if cells:  # the summary and the cells should agree; the larger count wins
        wrong = max(wrong or 0, sum(cells))
    failures = list(result.get("test_failures") or [])
    failures += [f"NCCL WARN {w}" for w in (result.get("nccl_warns") or [])][:5]
    completed = result.get("completed")
    if completed is None:
        completed = result.get("avg_busbw_gb_s") is not None
    facts.update(rows=rows, ranks=result.get("ranks"), hosts=result.get("hosts") or [],
                 wrong=wrong, completed=bool(completed) and bool(rows), failures=failures[:10],
                 avg_busbw_gb_s=result.get("avg_busbw_gb_s"))
    return facts


def _mean(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def parse(text: str) -> dict[str, Any]:
    facts, section = active.tool_section(text, "nccl", run=None)
    if section is None:
        return facts
    facts["run"] = run_facts(section.text, section.rc)
    return facts


def busbw_at_size(run: Mapping[str, Any], min_bytes: int) -> tuple[float | None, int | None]:
    """busbw at the largest message of at least *min_bytes* (the plateau), and that size."""
    rows = [r for r in run.get("rows") or []
            if r["size_bytes"] >= min_bytes and r["busbw_gb_s"] is not None]
    if not rows:
        return None, None
    top = max(rows, key=lambda r: r["size_bytes"])
    return top["busbw_gb_s"], top["size_bytes"]


def judge_run(level: int, test: str, measured: Mapping[str, Any] | None, floor: Any,
              min_bytes: int, max_wrong: Any, **detail: Any) -> list[dict[str, Any]]:
    """Figures for one all_reduce run: #wrong, then busbw against *floor* (a Criterion or
    None when the model/fabric has none)."""
    if not measured:
        return [active.figure(level, test, "busbw", None, unit="GB/s", **detail)]
    out = [active.figure(level, test, "wrong", measured.get("wrong"), op="<=",
                         threshold=max_wrong.value, source=max_wrong.source, **detail)]
    busbw, size = busbw_at_size(measured, min_bytes)
    out.append(active.figure(
        level, test, "busbw", busbw, unit="GB/s", op=">=" if floor else None,
        threshold=floor.value if floor else None, source=floor.source if floor else "",
        size_bytes=size, ranks=measured.get("ranks"), completed=measured.get("completed"),
        **detail))
    return out


def figures(host: str, facts: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    crit = active.criteria(ctx)
    reported = (facts.get("gpus") or [{}])[0].get("name")
    model = active.gpu_model(host, ctx, reported, crit)
    return judge_run(LEVEL, NAME, facts.get("run"), crit.per(NAME, "busbw_min_gb_s", model),
                     int(crit.get(NAME, "min_bytes").value), crit.get(NAME, "max_wrong"),
                     model=model)


def run_findings(name: str, host: str, hosts: list[str], run: Mapping[str, Any] | None,
                 figs: list[dict[str, Any]], what: str) -> list[Finding]:
    """What one judged run says about *hosts* (the node, or a pair): corruption, abort, low
    busbw, or no criterion for it."""
    prefix = "multinode" if name == "nccl-multinode" else "node"
    by = {f["metric"]: f for f in figs}
    wrong = by.get("wrong")
    if wrong and wrong["verdict"] == "fail":
        return [finding(f"{prefix}-nccl-wrong", hosts,
                        f"all_reduce_perf {what} counted {wrong['value']} wrong value(s): the "
                        "collective returned corrupted data (GPU, NVLink or NIC fault)", name,
                        wrong=wrong["value"])]
    busbw = by.get("busbw")
    if not run or not run.get("completed") or busbw is None or busbw["value"] is None:
        why = "; ".join((run or {}).get("failures") or []) or (
            "no message of a bandwidth-bound size" if run and run.get("completed")
            else "no result")
        return [finding(f"{prefix}-nccl-aborted", hosts,
                        f"all_reduce_perf {what} did not complete: {why}", name, why=why)]
    if busbw["verdict"] == "fail":
        return [finding(f"{prefix}-busbw-low", hosts,
                        f"all_reduce busbw {what} is {busbw['value']:.1f} GB/s, below the floor "
                        f"{busbw['threshold']:g} GB/s ({busbw['source']})", name,
                        busbw_gb_s=busbw["value"], floor_gb_s=busbw["threshold"],
                        source=busbw["source"], **(busbw.get("detail") or {}))]
    if busbw["verdict"] == "recorded":
        detail = busbw.get("detail") or {}
        key = "busbw_min_gb_s" if prefix == "node" else "pair_busbw_min_gb_s"
        return [active.not_judged(name, host, f"all_reduce busbw {what}",
                                  detail.get("model") or detail.get("fabric"), key)]
    return []


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    found, done = active.check_start(NAME, host, facts, "all_reduce_perf", "node-nccl-aborted")
    if done:
        return found
    return [*found, *run_findings(NAME, host, [host], facts.get("run"),
                                  facts.get("figures") or [], f"on {host}")]


PROBE = Probe(NAME, command, guard_parse(NAME, parse), check, timeout_s=1200.0, active=True,
              figures=figures, limit_s=limit_s)
