"""gpuhealth: what a GPU's memory, heat and power say about its health.

The gpu probe's CSV query reads a GPU's utilization, one temperature, the power limit and the
volatile uncorrectable ECC count. This component reads the rest, so the fault catalogue
(probes/faults/ecc-remap.yaml, power-thermal.yaml) can name ECC, row-remap, thermal and power
faults whatever runbook is walked. One script, three nvidia-smi calls:

- ``nvidia-smi --query-gpu=index,pci.bus_id,name,uuid``: each GPU's index and model (``-q -d``
  prints neither);
- ``nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT,TEMPERATURE,POWER,PERFORMANCE`` (without
  ROW_REMAPPER when a pre-R450 driver refuses it): per GPU the ECC mode (current and pending),
  volatile and aggregate correctable/uncorrectable counts split SRAM/DRAM, the SRAM threshold
  flag (R550 on), retired pages (SBE, DBE, pending; pre-Ampere), remapped rows (correctable,
  uncorrectable, pending, failure) and the bank remap availability histogram
  (Max/High/Partial/Low/None), the TPC / channel repair pending and unrepairable memory flags
  (R575 on, Blackwell), temperatures with their shutdown / slowdown / max operating
  thresholds (absolute, or as T.Limit margins), memory (HBM) temperature, power draw and the
  current / default / requested / min / max limits, the performance state, the clock-event
  reasons and, where the driver prints them (R570 on), their counters;
- after ``SAMPLE_INTERVAL_S``, ``nvidia-smi -q -d ECC,PERFORMANCE`` again: a correctable-error
  count or an HW-power-brake counter that moved during the sample is happening now, unlike the
  totals since the last reset.

Facts: ``gpus`` (one entry per GPU, keys listed in the merge note / probes/catalog.yaml), with the
margins ``slowdown_margin_c``, ``shutdown_margin_c``, ``max_operating_margin_c`` and
``memory_max_operating_margin_c`` (degrees left before that threshold, the same meaning in both
threshold layouts), ``power_limit_deficit_w`` (default minus the limit software set),
``power_platform_deficit_w`` (the set limit minus the enforced one: another limiter),
``power_draw_pct_of_limit``, the ``reason_*`` flags (active in either sample) and the ``*_delta``
of the ECC counts and clock-event counters; host-level ``gpu_count``, ``driver_version``,
``temperature_max_c``, ``memory_temperature_max_c``, ``ecc_volatile_uncorrectable``,
``power_limit_min_w``, ``gpu_models`` (the models named, sorted), ``sample_interval_s``,
``smi_errors``, ``missing``, ``errors``.

The check raises only not-measured: every fault of these families is catalogue data.
"""

from __future__ import annotations

from typing import Any

from probes.base import Context, Probe, not_measured
from probes.gpuhealth_facts import NAME, command, parse
from probes.model import Finding


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    missing, errors = facts.get("missing") or [], facts.get("errors") or {}
    if "query" in missing:
        return [not_measured(NAME, host, "GPU ECC, row remapping, temperature and power",
                             "nvidia-smi is not installed")]
    findings: list[Finding] = []
    if facts.get("gpu_count") is None:
        findings.append(not_measured(
            NAME, host, "GPU ECC, row remapping, temperature and power (nvidia-smi -q)",
            errors.get("query", "no nvidia-smi -q output")))
    elif facts.get("gpu_count") and facts.get("sample_interval_s") is None:
        why = errors.get("sample_2") or ("nvidia-smi is not installed" if "sample_2" in missing
                                         else "no second sample")
        findings.append(not_measured(NAME, host, "ECC and clock-event changes during the sample",
                                     why))
    if facts.get("gpu_count") and "query" in errors:
        # nvidia-smi -q stopped part way (diag's time limit): the GPUs it printed in full are
        # judged, the others are not measured (never healthy, never a fault of the host)
        findings.append(not_measured(
            NAME, host, "ECC, row remapping, temperature and power of the GPUs after the first "
            f"{facts['gpu_count']} (nvidia-smi -q)", errors["query"]))
    if facts.get("sample_interval_s") is not None and "sample_2" in errors:
        findings.append(not_measured(
            NAME, host, "ECC and clock-event changes of the GPUs the second sample did not "
            "print", errors["sample_2"]))
    if facts.get("gpu_count") and "inventory" in errors:
        findings.append(not_measured(NAME, host, "GPU index and model (nvidia-smi --query-gpu)",
                                     errors["inventory"]))
    return findings


PROBE = Probe(NAME, command, parse, check, timeout_s=45.0)
