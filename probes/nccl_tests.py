"""nccl-tests: a saved all_reduce_perf result, judged against the busbw baseline for the GPU.

Operators run nccl-tests to tell "the fabric/NVLink is slow" from "the job is slow". The probe
reads a result someone saved on the host (params.result), parses it and compares the bus
bandwidth of the large messages with the baseline table (probes/thresholds.yaml): single-node
floors per GPU model from the published health checks, and cross-node levels per SKU (GPUs and
fabric; params sku picks one, else the GPU model) with a warn level (below the typical figure)
and a fail level. Any "#wrong" count is data corruption.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from typing import Any

from probes.base import Context, Probe, finding, not_measured, script, split_sections
from probes.hostfold import fold_hosts
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "nccl-tests"

LARGE_BYTES = 128 << 20  # busbw is judged on messages of at least 128 MiB (bandwidth-bound)
DEFAULT_GPU_MODEL = "H100"
_NO_FILE = "diag: no such file"
_NO_PARAM = "diag: no result param"


def command(params: Mapping[str, Any]) -> str:
    result = params.get("result")
    if not result:
        body = f"echo '{_NO_PARAM}'"
    else:
        path = shlex.quote(str(result))
        body = (f"if [ -f {path} ]; then timeout 10 head -c 4000000 {path}; "
                f"else echo '{_NO_FILE}'; fi")
    return script([("result", body)])


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "result" not in sections:
        raise ParseError("nccl-tests: no result section (not the output of the nccl-tests probe)")
    facts: dict[str, Any] = {
        "avg_busbw_gb_s": None, "max_busbw_gb_s": None, "ranks": None, "wrong": None,
        "result_state": "ok", "hosts": [], "large_busbw_gb_s": None, "largest_bytes": None,
        "nccl_version": None, "completed": None, "test_failures": []}
    body = sections["result"].text
    if body.strip() == _NO_PARAM:
        facts["result_state"] = "no-param"
        return facts
    if body.strip() == _NO_FILE:
        facts["result_state"] = "no-file"
        return facts
    try:
        result = parse_kind("nccl-tests", body)
    except ParseError as exc:
        facts["result_state"] = f"unreadable: {exc}"[:200]
        return facts
    rows = result["rows"]
    large = [b for r in rows if r["size_bytes"] >= LARGE_BYTES
             for b in (r["busbw_oop_gb_s"], r["busbw_ip_gb_s"]) if b is not None]
    # The summary's "Out of bounds values" and the per-row #wrong cells should agree; if an
    # edited or truncated output disagrees, the larger count wins (corruption is never hidden).
    cells = [r[k] for r in rows for k in ("wrong_oop", "wrong_ip") if r.get(k) is not None]
    wrong = result["wrong"]
    if cells:
        wrong = max(wrong or 0, sum(cells))
    facts.update(avg_busbw_gb_s=result["avg_busbw_gb_s"], max_busbw_gb_s=result["max_busbw_gb_s"],
                 ranks=result["ranks"], wrong=wrong, hosts=result["hosts"][:64],
                 nccl_version=result.get("nccl_version"), completed=result["completed"],
                 test_failures=result["test_failures"][:8],
                 large_busbw_gb_s=max(large) if large else None,
                 largest_bytes=max((r["size_bytes"] for r in rows), default=None))
    return facts


def levels(value: Any) -> tuple[float, float] | None:
    """(warn, fail) of a baseline table entry: a number is one floor, {warn, fail} two."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value), float(value)
    if isinstance(value, dict):
        warn, fail = value.get("warn"), value.get("fail")
        nums = [v for v in (warn, fail) if isinstance(v, int | float)
                and not isinstance(v, bool)]
        if len(nums) == 2:
            return float(max(nums)), float(min(nums))
        if len(nums) == 1:
            return float(nums[0]), float(nums[0])
    return None


def _baseline(table: dict[str, Any], model: str,
              sku: str | None = None) -> tuple[str, float, float] | None:
    """(key, warn, fail) of the baseline for the SKU (param sku: the key itself) or, else, the
    key that appears in the GPU model name ("NVIDIA H100 80GB HBM3" -> H100)."""
    if sku and sku in table and (both := levels(table[sku])):
        return sku, *both
    model = model.upper()
    for key in sorted(table, key=len, reverse=True):
        if key.upper() in model and (both := levels(table[key])):
            return key, *both
    return None


def _int_param(ctx: Context, key: str) -> int | None:
    try:
        value = int(ctx.params.get(key) or 0)
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def _nodes(facts: dict[str, Any], ctx: Context) -> int | None:
    """params.nodes, else the distinct hosts of the Rank lines, else ranks / GPUs per node."""
    if nodes := _int_param(ctx, "nodes"):
        return nodes
    if facts.get("hosts"):
        return len(facts["hosts"])
    if facts.get("ranks"):
        ranks: int = facts["ranks"]
        return math.ceil(ranks / (_int_param(ctx, "gpus_per_node") or 8))
    return None


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    state = facts.get("result_state")
    result = ctx.params.get("result")
    if state == "no-param":
        return [not_measured(NAME, host, "nccl-tests result",
                             "no result file given (param result=PATH of a saved "
                             "all_reduce_perf output)")]
    if state == "no-file":
        return [not_measured(NAME, host, "nccl-tests result", f"{result} does not exist")]
    if state != "ok":
        return [not_measured(NAME, host, "nccl-tests result", str(state))]
    findings: list[Finding] = []
    if facts.get("wrong"):
        findings.append(finding(
            "nccl-tests-wrong", [host],
            f"nccl-tests counted {facts['wrong']} wrong value(s) in {result}: the collective "
            "returned corrupted data (GPU, NVLink or NIC fault)",
            NAME, wrong=facts["wrong"], result=result))
    busbw = facts.get("large_busbw_gb_s")
    if facts.get("completed") is False and facts.get("test_failures"):
        # An aborted run (failure lines, no summary): say why instead of "no large message".
        findings.append(not_measured(
            NAME, host, "all_reduce bus bandwidth",
            f"the run in {result} did not complete: {facts['test_failures'][0][:200]}"))
        return findings
    model = str(ctx.params.get("gpu_model") or DEFAULT_GPU_MODEL)
    nodes = _nodes(facts, ctx)
    base = _baseline_for(nodes, model, ctx)
    if busbw is None:
        findings.append(not_measured(
            NAME, host, "all_reduce bus bandwidth",
            f"the result has no message of {LARGE_BYTES >> 20} MiB or more (largest "
            f"{facts.get('largest_bytes')} bytes); rerun with -e 8G"))
    elif base is None:
        findings.append(not_measured(NAME, host, "all_reduce bus bandwidth",
                                     f"no busbw baseline for GPU model '{model}'"))
    elif busbw < base[1] and not _multi(nodes):
        findings.append(_busbw_low(facts, base, nodes, [host], ""))
    return findings


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    """A low multi-node result, once per run, naming no host.

    A run across nodes measures every node and link it used together: the host its result
    file was read on is not the slow one any more than the others (the topology and fabric
    checks that follow find which). Read on several hosts (a shared file system), the same
    run is one finding, with where it was read as evidence."""
    model = str(ctx.params.get("gpu_model") or DEFAULT_GPU_MODEL)
    # one run (figure, ranks, hosts, nodes) -> its facts and baseline, and where it was read
    runs: dict[tuple[Any, ...], tuple[dict[str, Any], tuple[str, float, float], list[str]]] = {}
    for host, facts in sorted(facts_by_host.items()):
        busbw, nodes = facts.get("large_busbw_gb_s"), _nodes(facts, ctx)
        if facts.get("result_state") != "ok" or busbw is None or not _multi(nodes):
            continue
        if facts.get("completed") is False and facts.get("test_failures"):
            continue
        base = _baseline_for(nodes, model, ctx)
        if base is not None and busbw < base[1]:
            key = (busbw, facts.get("ranks"), tuple(facts.get("hosts") or ()), nodes)
            runs.setdefault(key, (facts, base, []))[2].append(host)
    return [_busbw_low(facts, base, key[3], [], fold_hosts(read_on))
            for key, (facts, base, read_on) in runs.items()]


def _multi(nodes: int | None) -> bool:
    return nodes is not None and nodes > 1


def _baseline_for(nodes: int | None, model: str,
                  ctx: Context) -> tuple[str, float, float] | None:
    table = ctx.threshold("busbw_multi_node_gb_s" if _multi(nodes) else "busbw_single_node_gb_s")
    sku = ctx.params.get("sku")
    return _baseline(table, model, str(sku) if sku else None)


def _busbw_low(facts: dict[str, Any], base: tuple[str, float, float], nodes: int | None,
               hosts: list[str], read_on: str) -> Finding:
    busbw = facts["large_busbw_gb_s"]
    key, warn, fail = base
    level = "fail" if busbw < fail else "warn"
    where = (f"; a run across nodes names no single host (result read on {read_on}): the "
             "topology and fabric checks find which" if read_on else "")
    extra = {"read_on": read_on, "run_hosts": facts.get("hosts")} if read_on else {}
    return finding(
        "busbw-low", hosts,
        f"all_reduce busbw {busbw:.1f} GB/s is below the {key} "
        f"{'multi' if _multi(nodes) else 'single'}-node baseline "
        + (f"{fail:.0f} GB/s" if level == "fail" or warn == fail
           else f"{warn:.0f} GB/s (fail below {fail:.0f})")
        + f" ({nodes or '?'} node(s), {facts.get('ranks') or '?'} ranks){where}",
        NAME, severity=None if level == "fail" else "warning",
        busbw_gb_s=busbw, baseline_gb_s=warn, fail_gb_s=fail, level=level,
        gpu_model=key, nodes=nodes, ranks=facts.get("ranks"),
        avg_busbw_gb_s=facts.get("avg_busbw_gb_s"), **extra)


PROBE = Probe(NAME, command, parse, check, check_fleet=check_fleet, timeout_s=20.0)
