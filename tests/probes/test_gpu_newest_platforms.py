"""The gpu and gpuhealth probes on what the newest platforms and drivers print.

- ``[GPU requires reset]`` in a ``--query-gpu`` cell (NVML_ERROR_RESET_REQUIRED) is a GPU that
  cannot be used until it is reset, not a reading that is merely missing like ``[N/A]``;
- a Grace Hopper's enforced GPU power limit sits under its requested (= default) limit because
  another limiter holds it there (fixtures/real/nvidia-smi-q__1x-gh200-*: Current 700 W,
  Requested 900 W, Default 900 W): nobody lowered the limit on the host, so it is no per-host
  power fault; a limit set with nvidia-smi -pl (requested = enforced < default) still is.
"""

from __future__ import annotations

from probes.faults.apply import judge
from probes.gpu import PROBE as GPU
from probes.gpuhealth import PROBE as GPUHEALTH
from tests.probes.probe_outputs import baseline, codes, context, real, replace, section_text

BASE = baseline("gpu")
HEALTH = baseline("gpuhealth")
GH200_Q = real("nvidia-smi-q__1x-gh200-480gb-driver550-current-limit-700w-under-requested"
               "-default-900w")
RESET = "[GPU requires reset]"
# the query as drivers answer it now: power.limit (the limit software set) last
HEADER = ("index, name, pci.bus_id, utilization.gpu [%], memory.used [MiB], memory.total [MiB], "
          "temperature.gpu, power.draw [W], enforced.power.limit [W], power.default_limit [W], "
          "clocks.current.sm [MHz], clocks.max.sm [MHz], clocks_event_reasons.active, "
          "ecc.errors.uncorrected.volatile.total, retired_pages.pending, power.limit [W]")


def gpu_codes(text: str) -> list[str]:
    facts = GPU.parse(text)
    ctx = context()
    found = GPU.check("gpu001", facts, ctx) + judge("gpu", {"gpu001": facts}, ctx.thresholds)
    return codes(found)


def with_query(*rows: str) -> str:
    return replace(BASE, query="\n".join([HEADER, *rows]) + "\n",
                   pci="".join(f"{r.split(', ')[2][4:].lower()} 0302: 10de:2342 (rev a1)\n"
                               for r in rows))


def baseline_rows() -> list[str]:
    return [row + ", 700.00 W" for row in section_text(BASE, "query").splitlines()[1:]]


# --- [GPU requires reset] ------------------------------------------------------------------

def test_query_asks_for_the_limit_software_set() -> None:
    assert "retired_pages.pending,power.limit " in GPU.command({})


def test_gpu_requires_reset_cells_are_a_fault_of_that_gpu() -> None:
    rows = baseline_rows()
    rows[3] = (f"3, NVIDIA H100 80GB HBM3, 00000000:5D:00.0, {RESET}, 0 MiB, 81559 MiB, {RESET}, "
               f"{RESET}, 700.00 W, 700.00 W, {RESET}, 1980 MHz, {RESET}, {RESET}, [N/A], "
               "700.00 W")
    facts = GPU.parse(replace(BASE, query="\n".join([HEADER, *rows]) + "\n"))
    assert [g["requires_reset"] for g in facts["gpus"]] == [False] * 3 + [True] + [False] * 4
    assert facts["gpus"][3]["temperature_c"] is None  # unreadable, not a temperature
    ctx = context()
    found = judge("gpu", {"gpu001": facts}, ctx.thresholds)
    assert codes(found) == ["gpu-requires-reset"]
    assert "GPU3" in str(found[0].evidence) or "00000000:5D:00.0" in str(found[0].evidence)


def test_na_and_not_supported_cells_are_no_reset() -> None:
    rows = baseline_rows()
    rows[3] = ("3, NVIDIA H100 80GB HBM3, 00000000:5D:00.0, [N/A], 71297 MiB, 81559 MiB, 60, "
               "611.06 W, 700.00 W, 700.00 W, 1980 MHz, 1980 MHz, 0x0000000000000000, "
               "[Not Supported], [N/A], 700.00 W")
    facts = GPU.parse(replace(BASE, query="\n".join([HEADER, *rows]) + "\n"))
    assert not any(g["requires_reset"] for g in facts["gpus"])
    assert gpu_codes(replace(BASE, query="\n".join([HEADER, *rows]) + "\n")) == []


# --- power limits: set on the host, or held by another limiter -----------------------------

GH200_LOADED = ("0, NVIDIA GH200 480GB, 00000000:DD:00.0, 100 %, 91234 MiB, 97871 MiB, 63, "
                "698.41 W, 700.00 W, 900.00 W, 1755 MHz, 1980 MHz, 0x0000000000000004, 0, "
                "[N/A], {requested}")


def test_gh200_enforced_under_requested_default_is_no_power_fault() -> None:
    facts = GPU.parse(with_query(GH200_LOADED.format(requested="900.00 W")))
    gpu = facts["gpus"][0]
    assert (gpu["power_limit_w"], gpu["power_requested_w"], gpu["power_default_w"]) == (
        700.0, 900.0, 900.0)
    assert gpu_codes(with_query(GH200_LOADED.format(requested="900.00 W"))) == []


def test_a_limit_set_below_the_default_is_still_power_throttling() -> None:
    found = GPU.check("gpu001", GPU.parse(with_query(GH200_LOADED.format(
        requested="700.00 W"))), context())
    assert codes(found) == ["gpu-throttle-power"]
    assert found[0].evidence["cause"] == "limit-below-default"
    assert found[0].severity == "warning"  # a configuration, not a standing fault
    # a driver that was not asked for power.limit: the enforced limit is all there is
    old = GH200_LOADED.format(requested="").rsplit(", ", 1)[0]
    old_header = HEADER.rsplit(", ", 1)[0]
    text = replace(BASE, query=f"{old_header}\n{old}\n",
                   pci="0000:dd:00.0 0302: 10de:2342 (rev a1)\n")
    assert codes(GPU.check("gpu001", GPU.parse(text), context())) == ["gpu-throttle-power"]


def test_a_platform_limited_host_below_its_fleet_is_still_found() -> None:
    # the same GH200 among hosts whose GPUs may use their 900 W: judged against the fleet
    low = GPU.parse(with_query(GH200_LOADED.format(requested="900.00 W")))
    peer = GPU.parse(with_query(GH200_LOADED.replace("700.00 W", "900.00 W").format(
        requested="900.00 W")))
    fleet = {"gpu001": low, "gpu002": peer, "gpu003": peer, "gpu004": peer}
    found = GPU.check_fleet(fleet, context())
    assert [(f.code, sorted(f.hosts), f.severity) for f in found] == [
        ("gpu-throttle-power", ["gpu001"], "error")]


def test_a_fleet_capped_alike_on_purpose_has_no_error() -> None:
    # every host set to 500 W with nvidia-smi -pl (a site's power budget): each host names
    # the setting as a warning, and no host is below its fleet
    capped = GPU.parse(with_query(GH200_LOADED.replace("700.00 W", "500.00 W").replace(
        "698.41 W", "499.20 W").format(requested="500.00 W")))
    fleet = {f"gpu00{i}": capped for i in range(1, 5)}
    ctx = context()
    per_host = [f for h, facts in fleet.items() for f in GPU.check(h, facts, ctx)]
    assert {(f.code, f.severity) for f in per_host} == {("gpu-throttle-power", "warning")}
    assert GPU.check_fleet(fleet, ctx) == []


def _gh200_health() -> str:
    return replace(HEALTH, inventory="index, pci.bus_id, name, uuid\n0, 00000000:DD:00.0, "
                   "NVIDIA GH200 480GB, GPU-35d58415-1094-5ad1-64d1-b797587d33a7\n",
                   query=GH200_Q, sample_2=GH200_Q)


def test_real_gh200_report_power_deficits() -> None:
    gpu = GPUHEALTH.parse(_gh200_health())["gpus"][0]
    assert (gpu["power_limit_w"], gpu["power_requested_w"], gpu["power_default_w"]) == (
        700.0, 900.0, 900.0)
    assert gpu["power_limit_deficit_w"] == 0.0 and gpu["power_platform_deficit_w"] == 200.0
    facts = {"gpu001": GPUHEALTH.parse(_gh200_health())}
    assert "gpu-power-limit-below-default" not in codes(judge("gpuhealth", facts,
                                                              context().thresholds))


def test_requested_limit_below_default_is_the_lowered_limit() -> None:
    lowered = GH200_Q.replace("        Requested Power Limit             : 900.00 W",
                              "        Requested Power Limit             : 700.00 W")
    text = replace(_gh200_health(), query=lowered, sample_2=lowered)
    gpu = GPUHEALTH.parse(text)["gpus"][0]
    assert gpu["power_limit_deficit_w"] == 200.0 and gpu["power_platform_deficit_w"] == 0.0
    facts = {"gpu001": GPUHEALTH.parse(text)}
    assert "gpu-power-limit-below-default" in codes(judge("gpuhealth", facts,
                                                          context().thresholds))
