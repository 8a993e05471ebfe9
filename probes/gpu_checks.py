"""The gpu probe's checks: per host (XIDs inside the window, a GPU off the bus, ECC and row
remapping, missing GPUs, thermal and power throttling, low utilization under a job) and across
the fleet (fewer GPUs than most hosts of the same GPU model, utilization far below the peers').
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from probes import xid
from probes.base import Context, finding, fleet_minority, mad_outliers, not_measured
from probes.gpu_facts import NAME, in_window, pci_key, window_minutes
from probes.gpu_power import fleet_power_findings, throttle_findings
from probes.model import Finding
from probes.topology import by_model

# A process holding this much memory on some GPU means a job is running on the host.
_JOB_MEMORY_MIB = 1024
# Utilization outliers closer than this to the fleet median are noise, whatever the MAD says.
_UTIL_MIN_SPREAD_PCT = 10.0


def _bus(pci: str) -> str:
    """One spelling per GPU, ``0000:9b:00``: the kernel writes 0000:9b:00, nvidia-smi
    00000000:9B:00.0 and lspci 9b:00.0 for the same device."""
    match = re.search(r"(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.\d)?$",
                      pci.strip())
    if not match:
        return pci
    domain = (match.group(1) or "0000")[-4:]
    return f"{domain}:{match.group(2)}:{match.group(3)}".lower()


def _gpu_label(facts: dict[str, Any], pci: str | None) -> str:
    key = pci_key(pci)
    for gpu in facts.get("gpus") or []:
        if key and pci_key(gpu.get("bus_id")) == key and gpu.get("index") is not None:
            return f"GPU{gpu['index']} ({pci})"
    return pci or "unknown GPU"


def _xid_findings(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    """One finding per catalog bucket of the XIDs inside the window, with each code's actions
    (probes/xid_catalog.yaml) and its latest kernel-log line in the evidence."""
    minutes = window_minutes(ctx.params, ctx.threshold("xid_window_minutes"))
    recent = in_window(facts.get("xids") or [], minutes)
    overrides = ctx.thresholds.get("xid_overrides") or {}
    by_code: dict[str, list[tuple[dict[str, Any], xid.XidAction]]] = {}
    for event in recent:
        action = xid.classify(event["code"], event.get("text"), overrides)
        by_code.setdefault(action.finding, []).append((event, action))
    findings = []
    for code, items in by_code.items():
        latest_of: dict[int, tuple[dict[str, Any], xid.XidAction]] = {}
        for event, action in items:
            latest_of[event["code"]] = (event, action)
        xids = sorted(latest_of)
        gpus = sorted({_gpu_label(facts, e.get("pci")) for e, _ in items})
        severities = {a.severity for _, a in items}
        latest = items[-1][0]
        findings.append(finding(
            code, [host],
            f"XID {', '.join(map(str, xids))} on {host} ({', '.join(gpus)}) in the last "
            f"{minutes:g} min. " + " ".join(_advice(*latest_of[c]) for c in xids),
            NAME, severity=severities.pop() if len(severities) == 1 else None,
            xids=xids, gpus=gpus, count=len(items), window_minutes=minutes,
            latest=f"Xid {latest['code']}: {latest.get('text') or ''}"[:200],
            age_min=latest.get("age_min"),
            actions={str(c): a.summary() for c, (_, a) in sorted(latest_of.items())},
            lines={str(c): e.get("line") or e.get("text") for c, (e, _) in
                   sorted(latest_of.items())},
            unknown=[c for c, (_, a) in sorted(latest_of.items()) if not a.known]))
    fallen = in_window(facts.get("fallen_off_bus") or [], minutes)
    lost = list(facts.get("gpu_lost") or [])
    if fallen or lost or any(e["code"] == 79 for e in recent):
        pcis = sorted({_bus(e.get("pci") or "?") for e in fallen}
                      | {_bus(e["pci"]) for e in recent if e["code"] == 79}
                      | {_bus(p) for p in lost})
        findings.append(finding(
            "gpu-fallen-off-bus", [host],
            f"{host}: GPU fell off the bus ({', '.join(_gpu_label(facts, p) for p in pcis)})",
            NAME, pci=pcis, window_minutes=minutes,
            smi_errors=(facts.get("smi_errors") or [])[:3]))
    return findings


def _advice(event: dict[str, Any], action: xid.XidAction) -> str:
    """One XID code's verdict in a sentence: what NVIDIA's catalog says to do, now and then."""
    if not action.known and not action.overridden:
        line = (event.get("line") or event.get("text") or "").strip()
        return f"XID {action.code} is not in NVIDIA's Xid catalog: {action.action} ({line})."
    name = action.description if action.description not in (None, "Unused") else action.mnemonic
    then = f" Then {action.investigatory}: {action.investigation}." if (
        action.investigatory and action.investigation and action.investigatory
        not in (action.immediate, action.investigation)) else ""
    site = " (site override)" if action.overridden else ""
    return f"XID {action.code} ({name}): {action.immediate}{site}, {action.action}.{then}"


def _gpus_where(facts: dict[str, Any], predicate: Any) -> list[str]:
    return [f"GPU{g['index']}" if g.get("index") is not None else str(g.get("bus_id"))
            for g in facts.get("gpus") or [] if predicate(g)]


def _models(facts: dict[str, Any]) -> tuple[str, ...] | None:
    """The GPU models nvidia-smi names on the host, or None when it names none."""
    names = sorted({str(g["name"]) for g in facts.get("gpus") or [] if g.get("name")})
    return tuple(names) or None


def _job_running(facts: dict[str, Any], ctx: Context) -> bool:
    explicit = ctx.params.get("job_running")
    if isinstance(explicit, bool):
        return explicit
    return any((g.get("memory_used_mib") or 0) >= _JOB_MEMORY_MIB for g in facts.get("gpus") or [])


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    errors = facts.get("errors") or {}
    missing = facts.get("missing") or []
    if facts.get("gpu_count") is None:
        why = "nvidia-smi is not installed" if "query" in missing else \
            errors.get("query", "no nvidia-smi output")
        findings.append(not_measured(NAME, host, "GPU state (nvidia-smi)", why))
    if not facts.get("kernel_log_readable"):
        why = "no kernel_log section" if "kernel_log" in missing else \
            errors.get("kernel_log", "kernel log not readable")
        findings.append(not_measured(NAME, host, "XIDs in the kernel log", why))
    if facts.get("gpu_count") and "remap" not in missing and "remap" in errors:
        findings.append(not_measured(NAME, host, "remapped rows", errors["remap"]))

    findings += _xid_findings(host, facts, ctx)

    ecc = {f"GPU{g.get('index')}": g["ecc_uncorrected"] for g in facts.get("gpus") or []
           if (g.get("ecc_uncorrected") or 0) > 0}
    if ecc:
        findings.append(finding(
            "ecc-uncorrectable", [host],
            f"{host}: uncorrectable ECC errors on {', '.join(ecc)} (volatile count)", NAME,
            gpus=sorted(ecc), counts=ecc))
    pending = _gpus_where(facts, lambda g: g.get("remapped_rows_pending")
                          or g.get("retired_pages_pending"))
    if pending:
        findings.append(finding(
            "row-remap-pending", [host],
            f"{host}: row remapping (or page retirement) pending on {', '.join(pending)}; "
            "the GPU needs a reset to apply it", NAME, gpus=pending))
    failed = _gpus_where(facts, lambda g: g.get("remapped_rows_failure"))
    if failed:
        findings.append(finding(
            "row-remap-failure", [host],
            f"{host}: row remapping failed on {', '.join(failed)}; replace the GPU", NAME,
            gpus=failed))

    count = facts.get("gpu_count")
    if count is not None:
        expected = ctx.params.get("expected_gpus") or ctx.threshold("expected_gpus_per_node")
        pci = facts.get("pci_gpu_count")
        if expected and count < expected:
            findings.append(finding(
                "gpu-missing", [host], f"{host}: {count} GPU(s) visible, {expected} expected",
                NAME, visible=count, expected=expected, pci_gpu_count=pci))
        elif pci is not None and pci > count:
            findings.append(finding(
                "gpu-missing", [host],
                f"{host}: {pci} NVIDIA GPU(s) on the PCI bus but only {count} visible to the "
                "driver", NAME, visible=count, pci_gpu_count=pci))
    elif facts.get("pci_gpu_count") and "query" not in missing:
        findings.append(finding(
            "gpu-missing", [host],
            f"{host}: {facts['pci_gpu_count']} NVIDIA GPU(s) on the PCI bus but nvidia-smi "
            "sees none", NAME, visible=None, pci_gpu_count=facts["pci_gpu_count"]))

    findings += throttle_findings(host, facts, ctx)

    avg = facts.get("utilization_avg_pct")
    low = ctx.threshold("gpu_low_utilization_pct")
    if avg is not None and avg < low and _job_running(facts, ctx):
        findings.append(finding(
            "gpu-low-utilization", [host],
            f"{host}: GPU utilization averages {avg:g}% (below {low}%) while a job holds the "
            "GPUs", NAME, utilization_avg_pct=avg, utilization_min_pct=facts.get(
                "utilization_min_pct"), threshold=low))
    return findings


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    findings = []
    if not (ctx.params.get("expected_gpus") or ctx.threshold("expected_gpus_per_node")):
        counts = {h: f["gpu_count"] for h, f in facts_by_host.items()
                  if isinstance(f.get("gpu_count"), int)}
        # Hosts the per-host check already caught (PCI count above the driver's) are left out.
        caught = {h for h, c in counts.items() if (facts_by_host[h].get("pci_gpu_count") or 0) > c}
        # A mixed fleet (a 4x L40S node walked with 8x H100 nodes) is compared model by model;
        # a host that sees no GPU at all has no model and is held to the commonest one.
        for group in by_model(counts, {h: _models(f) for h, f in facts_by_host.items()}):
            short = fleet_minority(group, below=True, spare=caught)
            if short:
                findings.append(finding(
                    "gpu-missing", short.hosts, short.below("see fewer GPUs than"),
                    NAME, majority=short.majority, counts=short.hosts))
    findings += fleet_power_findings(facts_by_host, ctx, lambda f: _job_running(f, ctx))
    util = {h: f["utilization_avg_pct"] for h, f in facts_by_host.items()
            if isinstance(f.get("utilization_avg_pct"), int | float) and _job_running(f, ctx)}
    low = mad_outliers(util, k=ctx.threshold("outlier_mad_k"), high=False,
                       min_spread=_UTIL_MIN_SPREAD_PCT)
    if low:
        median = statistics.median(util.values())
        findings.append(finding(
            "gpu-util-outlier", low,
            f"GPU utilization far below the peers' (about {median:g}%) on "
            + ", ".join(f"{h} ({v:g}%)" for h, v in sorted(low.items())),
            NAME, values=low, peers=len(util)))
    return findings
