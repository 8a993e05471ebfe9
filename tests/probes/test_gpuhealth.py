"""The gpuhealth component: ECC, row remapping, temperatures and power (evidence sweep).

Real samples: nvidia-smi -q of 8x H100 SXM (driver 565, thamada/nvidia-smi), 1x H100 (545,
PrincetonUniversity/gpu_programming_intro), an A100 with DRAM correctable errors and a pending
remap (510, stas00/ml-engineering), and the A10 / Titan V samples of leptonai/gpud
(fixtures/real/nvidia-smi-q__*). The filtered ``-q -d`` output is the full report's sections.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from probes.faults import load_faults
from probes.faults.apply import judge
from probes.gpuhealth import PROBE
from probes.gpuhealth_facts import SAMPLE_INTERVAL_S
from probes.parsers import ParseError
from tests.probes.probe_outputs import (
    baseline,
    codes,
    context,
    edit,
    real,
    replace,
    section_text,
    sh_accepts,
)

BASE = baseline("gpuhealth")
H100X8 = real("nvidia-smi-q__8x-h100-hbm3-sxm-driver565-tlimit-sram-secded-idle")


def parse(text: str) -> dict:
    return PROBE.parse(text)


def gpu(text: str, index: int = 0) -> dict:
    return parse(text)["gpus"][index]


def in_gpu0(text: str, section: str, old: str, new: str) -> str:
    """Edit a line of GPU 0's block (the first occurrence) in one section."""
    return edit(text, section, old, new)


def test_script_is_posix_bounded_and_samples_twice():
    script = PROBE.command({})
    assert sh_accepts(script).returncode == 0, sh_accepts(script).stderr
    if shutil.which("dash"):
        assert subprocess.run(["dash", "-n", "-c", script]).returncode == 0
    assert "nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT,TEMPERATURE,POWER,PERFORMANCE" \
        in script
    assert "-d ECC,PAGE_RETIREMENT,TEMPERATURE" in script  # pre-R450 fallback
    assert f"sleep {SAMPLE_INTERVAL_S}" in script and "head -n" in script


def test_script_runs_here_without_nvidia_smi():
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    out = subprocess.run(["sh", "-c", PROBE.command({})], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0
    facts = parse(out.stdout)
    assert facts["missing"] == ["inventory", "query", "sample_2"] and facts["gpus"] == []
    (finding,) = PROBE.check("gpu001", facts, context())
    assert finding.code == "not-measured" and "not installed" in finding.message


def test_baseline_is_healthy():
    facts = parse(BASE)
    assert (facts["gpu_count"], facts["driver_version"], facts["temperature_max_c"]) == (
        8, "550.90.07", 63.0)
    assert facts["sample_interval_s"] == SAMPLE_INTERVAL_S and facts["power_limit_min_w"] == 700
    first = facts["gpus"][0]
    assert (first["index"], first["bus_id"], first["name"]) == (
        0, "00000000:19:00.0", "NVIDIA H100 80GB HBM3")
    # T.Limit layout: 26 C below T.Limit, HW slowdown at -2: 28 degrees left
    assert (first["slowdown_margin_c"], first["shutdown_margin_c"],
            first["max_operating_margin_c"]) == (28.0, 34.0, 26.0)
    assert first["memory_max_operating_margin_c"] is None  # no absolute HBM threshold printed
    assert (first["power_limit_w"], first["power_limit_deficit_w"],
            first["power_draw_pct_of_limit"]) == (700.0, 0.0, 88.3)
    assert first["reason_sw_power_cap"] is False and first["hw_power_brake_us"] is None
    assert (first["ecc_enabled"], first["ecc_volatile_correctable_delta"],
            first["remap_hist_max"], first["retired_total"]) == (True, 0, 2560, None)
    # history on GPU 5: corrected errors counted since the GPU was first used, none now
    assert (facts["gpus"][5]["ecc_aggregate_dram_correctable"],
            facts["gpus"][5]["ecc_volatile_correctable"]) == (2, 0)
    assert PROBE.check("gpu001", facts, context()) == []


def test_real_h100_reports():
    facts = parse(replace(BASE, query=H100X8, sample_2=H100X8))
    assert facts["gpu_count"] == 8 and facts["driver_version"] == "565.57.01"
    first = facts["gpus"][0]  # bus 18 is not in the inventory: no index/name from there
    assert (first["bus_id"], first["index"], first["temperature_c"],
            first["memory_temperature_c"], first["slowdown_margin_c"]) == (
        "00000000:18:00.0", 0, 30.0, 36.0, 59.0)
    assert (first["sram_threshold_exceeded"], first["ecc_aggregate_sram_uncorrectable"],
            first["ecc_volatile_correctable_delta"]) == (False, 0, 0)
    assert (first["reason_idle"], first["power_default_w"], first["power_min_w"]) == (
        True, 700.0, 200.0)
    h100 = real("nvidia-smi-q__1x-h100-hbm3-driver545-tlimit-temps-ecc-enabled-idle")
    one = gpu(replace(BASE, query=h100, sample_2=h100))
    assert (one["temperature_c"], one["tlimit_c"], one["slowdown_margin_c"],
            one["memory_temperature_c"], one["ecc_volatile_uncorrectable"]) == (
        33.0, 54.0, 56.0, 41.0, 0)


def test_real_a100_dram_correctable_and_pending_remap():
    text = real("nvidia-smi-q__a100-sxm4-80gb-driver510-dram-correctable-177-remap-pending-bank-"
                "high-excerpt")
    one = gpu(replace(BASE, query=text, sample_2=None))
    assert (one["ecc_volatile_dram_correctable"], one["ecc_aggregate_correctable"],
            one["remap_correctable"], one["remap_pending"], one["remap_hist_max"],
            one["remap_hist_high"]) == (177, 177, 1, True, 639, 1)
    assert one["ecc_mode"] is None and one["temperature_c"] is None  # elided: not measured


def test_absolute_thresholds_of_older_boards():
    a10 = real("nvidia-smi-q__1x-a10-driver535-remapped-rows-pending")
    one = gpu(replace(BASE, query=a10, sample_2=a10))
    assert (one["slowdown_temp_c"], one["slowdown_margin_c"], one["shutdown_margin_c"],
            one["max_operating_margin_c"]) == (98.0, 65.0, 68.0, 58.0)
    assert (one["remap_uncorrectable"], one["remap_pending"]) == (4, True)
    titan = real("nvidia-smi-q__1x-titan-v-driver560-gen3-idle-gen1-clocks-event-reasons")
    one = gpu(replace(BASE, query=titan, sample_2=titan))
    assert (one["memory_max_operating_temp_c"], one["memory_max_operating_margin_c"],
            one["ecc_mode"], one["ecc_enabled"]) == (95.0, 54.0, None, None)


# nvidia-smi -q of R460 and older: ECC per location under "Single Bit" / "Double Bit" (the
# layout of the real pre-Ampere reports found with the code search, e.g. Tesla K20 / V100
# outputs, which pad "Single Bit" with trailing spaces); retired pages with counts;
# absolute temperatures.
OLD_Q = """
==============NVSMI LOG==============

Timestamp                           : Mon Jan 20 10:18:33 2025
Driver Version                      : 450.80.02
CUDA Version                        : 11.0

Attached GPUs                       : 1
GPU 00000000:19:00.0
    Performance State               : P0
    Clocks Throttle Reasons
        Idle                        : Not Active
        Applications Clocks Setting : Not Active
        SW Power Cap                : Active
        HW Slowdown                 : Not Active
            HW Thermal Slowdown     : Not Active
            HW Power Brake Slowdown : Not Active
        Sync Boost                  : Not Active
        SW Thermal Slowdown         : Not Active
        Display Clock Setting       : Not Active
    Ecc Mode
        Current                     : Enabled
        Pending                     : Enabled
    ECC Errors
        Volatile
            Single Bit@@
                Device Memory       : 3
                Register File       : 0
                L1 Cache            : 0
                L2 Cache            : 1
                Texture Memory      : N/A
                Texture Shared      : N/A
                CBU                 : N/A
                Total               : 4
            Double Bit@@
                Device Memory       : 0
                Register File       : 0
                L1 Cache            : 0
                L2 Cache            : 0
                Texture Memory      : N/A
                Texture Shared      : N/A
                CBU                 : 0
                Total               : 0
        Aggregate
            Single Bit@@
                Device Memory       : 40
                Register File       : 0
                L1 Cache            : 0
                L2 Cache            : 1
                Texture Memory      : N/A
                Texture Shared      : N/A
                CBU                 : N/A
                Total               : 41
            Double Bit@@
                Device Memory       : 2
                Register File       : 0
                L1 Cache            : 0
                L2 Cache            : 0
                Texture Memory      : N/A
                Texture Shared      : N/A
                CBU                 : 0
                Total               : 2
    Retired Pages
        Single Bit ECC              : 1
        Double Bit ECC              : 2
        Pending Page Blacklist      : Yes
    Temperature
        GPU Current Temp            : 45 C
        GPU Shutdown Temp           : 90 C
        GPU Slowdown Temp           : 87 C
        GPU Max Operating Temp      : 83 C
        Memory Current Temp         : 41 C
        Memory Max Operating Temp   : 85 C
    Power Readings
        Power Management            : Supported
        Power Draw                  : 290.32 W
        Power Limit                 : 300.00 W
        Default Power Limit         : 300.00 W
        Enforced Power Limit        : 250.00 W
        Min Power Limit             : 150.00 W
        Max Power Limit             : 300.00 W
""".replace("@@", " " * 12)  # nvidia-smi pads these section lines with trailing spaces


def test_pre_ampere_layout():
    one = gpu(replace(BASE, query=OLD_Q, sample_2=OLD_Q))
    assert (one["ecc_mode"], one["ecc_enabled"]) == ("Enabled", True)  # spelled "Ecc Mode"
    assert (one["ecc_volatile_correctable"], one["ecc_volatile_dram_correctable"],
            one["ecc_volatile_sram_correctable"], one["ecc_aggregate_uncorrectable"],
            one["ecc_aggregate_dram_uncorrectable"]) == (4, 3, 1, 2, 2)
    assert (one["retired_sbe"], one["retired_dbe"], one["retired_total"],
            one["retired_pending"]) == (1, 2, 3, True)
    assert one["remap_pending"] is None  # no ROW_REMAPPER on this driver: unknown, not "No"
    # "Power Limit" (requested) is the default; the enforced 250 W is another limiter's
    assert (one["power_limit_w"], one["power_limit_deficit_w"], one["power_platform_deficit_w"],
            one["reason_sw_power_cap"]) == (250.0, 0.0, 50.0, True)
    assert (one["slowdown_margin_c"], one["memory_max_operating_margin_c"]) == (42.0, 44.0)


# "Clocks Event Reasons Counters" as R570 prints them (the real laptop report found with the
# code search: "SW Power Capping : 12234991553 us ... HW Power Braking : 0 us").
def counters(brake_us: int) -> str:
    return ("    Clocks Event Reasons Counters\n"
            "        SW Power Capping                  : 12234991553 us\n"
            "        Sync Boost                        : 0 us\n"
            "        SW Thermal Slowdown               : 11591399010 us\n"
            "        HW Thermal Slowdown               : 0 us\n"
            f"        HW Power Braking                  : {brake_us} us\n")


def test_counters_and_ecc_moving_during_the_sample():
    marker = "    Sparse Operation Mode                 : Disabled\n"
    text = in_gpu0(BASE, "query", marker, counters(2454539) + marker)
    text = in_gpu0(text, "sample_2", marker, counters(3954539) + marker)
    text = in_gpu0(text, "sample_2", "            DRAM Correctable              : 0",
                   "            DRAM Correctable              : 57")
    one = gpu(text)
    assert (one["hw_power_brake_us"], one["hw_power_brake_us_delta"], one["sw_thermal_us_delta"],
            one["ecc_volatile_correctable_delta"]) == (2454539, 1500000, 0, 57)
    # a reason active in the second sample only counts as active
    text = in_gpu0(BASE, "sample_2", "            HW Power Brake Slowdown       : Not Active",
                   "            HW Power Brake Slowdown       : Active")
    assert gpu(text)["reason_hw_power_brake"] is True


def test_lost_gpu_no_gpu_and_failures():
    q = section_text(BASE, "query")
    cut = q.index("GPU 00000000:3B:00.0")
    lost = (q[:cut] + "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown "
            "Error\n", 15)
    facts = parse(replace(BASE, query=lost))
    assert facts["gpu_count"] == 1 and "Unknown Error" in facts["smi_errors"][0]
    facts = parse(replace(BASE, query=("No devices were found", 6), sample_2=(
        "No devices were found", 6)))
    assert facts["gpu_count"] == 0 and PROBE.check("gpu001", facts, context()) == []
    driver = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 9)
    facts = parse(replace(BASE, query=driver, sample_2=driver))
    assert facts["gpu_count"] is None and "couldn't communicate" in facts["errors"]["query"]
    assert codes(PROBE.check("gpu001", facts, context())) == ["not-measured"]
    facts = parse(replace(BASE, sample_2=None))
    assert facts["sample_interval_s"] is None
    assert facts["gpus"][0]["ecc_volatile_correctable_delta"] is None
    assert codes(PROBE.check("gpu001", facts, context())) == ["not-measured"]
    facts = parse(replace(BASE, query="garbage \x00 not nvidia-smi\n"))
    assert "query" in facts["errors"] and facts["gpu_count"] is None
    with pytest.raises(ParseError):
        parse("==============NVSMI LOG==============\n")


def test_timed_out_nvidia_smi_is_diags_limit_not_the_hosts_fault():
    # timeout(1) kills nvidia-smi -q at diag's limit (exit status 124); what reached the pipe is
    # cut at a buffer boundary, mid-line: the GPUs printed in full are read, the one being
    # printed and those after it are not measured (never healthy, never a fault)
    q = section_text(BASE, "query")
    cut = q[:q.index("GPU 00000000:4C:00.0") + 200]
    facts = parse(replace(BASE, query=(cut, 124)))
    assert [g["bus_id"] for g in facts["gpus"]] == ["00000000:19:00.0", "00000000:3B:00.0"]
    assert "10 s limit" in facts["errors"]["query"]
    found = PROBE.check("gpu001", facts, context())
    assert codes(found) == ["not-measured"] and "after the first 2" in found[0].message
    facts = parse(replace(BASE, query=("", 124)))
    assert facts["gpu_count"] is None and "did not finish" in facts["errors"]["query"]
    assert codes(PROBE.check("gpu001", facts, context())) == ["not-measured"]
    s2 = section_text(BASE, "sample_2")
    facts = parse(replace(BASE, sample_2=(s2[:s2.index("GPU 00000000:5D:00.0") + 90], 137)))
    assert facts["sample_interval_s"] == SAMPLE_INTERVAL_S
    assert facts["gpus"][2]["ecc_volatile_correctable_delta"] == 0  # 4C: printed in full
    assert facts["gpus"][3]["ecc_volatile_correctable_delta"] is None  # 5D: being printed
    assert codes(PROBE.check("gpu001", facts, context())) == ["not-measured"]


def test_a_report_cut_by_heads_line_limit_is_read_like_a_timed_out_one(monkeypatch):
    # head -n stops a report longer than diag reads with nvidia-smi's exit status 0: the cut
    # block and the GPUs after it are not measured, not silently left out
    import probes.gpuhealth_facts as facts_module

    q = section_text(BASE, "query")
    monkeypatch.setitem(facts_module.LINES, "query", 100)
    facts = parse(replace(BASE, query="\n".join(q.splitlines()[:100]) + "\n"))
    assert facts["gpu_count"] == 1 and "100 lines" in facts["errors"]["query"]
    assert codes(PROBE.check("gpu001", facts, context())) == ["not-measured"]


def test_an_ecc_mode_nvidia_smi_could_not_read_is_not_a_pending_change():
    # nvidia-smi prints NVML's error string in place of a value it could not read (nvmlErrorString:
    # "Unknown Error", "GPU is lost"; NVIDIA/dcgm-exporter#319, an A10G under 535.161.08: "Product
    # Brand : Unknown Error"); such a Current is no mode, so it cannot differ from Pending
    text = in_gpu0(BASE, "query", "        Current                           : Enabled",
                   "        Current                           : Unknown Error")
    one = gpu(text)
    assert (one["ecc_mode"], one["ecc_mode_pending"], one["ecc_enabled"]) == (None, "Enabled", None)
    assert "gpu-ecc-mode-change-pending" not in _judge(text)
    text = in_gpu0(BASE, "query", "        Pending                           : Enabled",
                   "        Pending                           : Disabled")
    assert _judge(text) == ["gpu-ecc-mode-change-pending"]


def test_ecc_disabled_is_judged_on_whole_data_center_model_names():
    # the rule names data-center models with HBM; a workstation "RTX A1000" or "RTX A3000" holds
    # "A100" / "A30" in its name and is not one of them, while "V100S" is
    off = in_gpu0(BASE, "query", "        Current                           : Enabled\n"
                  "        Pending                           : Enabled",
                  "        Current                           : Disabled\n"
                  "        Pending                           : Disabled")
    off = in_gpu0(off, "sample_2", "        Current                           : Enabled\n"
                  "        Pending                           : Enabled",
                  "        Current                           : Disabled\n"
                  "        Pending                           : Disabled")
    assert "gpu-ecc-disabled" in _judge(off)
    for name, raised in (("NVIDIA RTX A1000", False), ("NVIDIA RTX A3000 Laptop GPU", False),
                         ("Tesla V100S-PCIE-32GB", True)):
        text = edit(off, "inventory", "NVIDIA H100 80GB HBM3", name)
        assert gpu(text)["name"] == name
        assert ("gpu-ecc-disabled" in _judge(text)) is raised, name


def _judge(text: str, hosts: int = 1) -> list[str]:
    ctx = context()
    facts = {f"gpu00{i}": parse(text if i == 0 else BASE) for i in range(hosts)}
    return codes(f for f in judge("gpuhealth", facts, ctx.thresholds) if "gpu000" in f.hosts)


def test_catalogue_names_faults_and_spares_the_baseline():
    sigs = load_faults().signatures
    if "gpu-hw-power-brake" not in sigs:
        pytest.skip("the ecc-remap / power-thermal families are not merged into probes/faults")
    assert _judge(BASE, hosts=3) == []
    brake = in_gpu0(BASE, "query", "            HW Power Brake Slowdown       : Not Active",
                    "            HW Power Brake Slowdown       : Active")
    brake = in_gpu0(brake, "query", "        HW Slowdown                       : Not Active",
                    "        HW Slowdown                       : Active")
    assert _judge(brake) == ["gpu-hw-power-brake"]
    exhausted = in_gpu0(BASE, "query", "            None                          : 0 bank(s)",
                        "            None                          : 1 bank(s)")
    assert _judge(exhausted) == ["gpu-remap-bank-exhausted"]


def test_real_r580_blackwell_repair_flags_and_the_catalogue():
    # R575 on print "Channel Repair Pending", "TPC Repair Pending" and "Unrepairable Memory"
    # under "ECC Errors" (NVML nvmlDeviceGetRepairStatus / GetUnrepairableMemoryFlag_v1)
    text = real("nvidia-smi-q__1x-rtx5080-laptop-driver580-idle-p8-gen1-x8-of-x16-repair-flags-"
                "head-excerpt")
    one = gpu(replace(BASE, query=text, sample_2=text))
    assert (one["channel_repair_pending"], one["tpc_repair_pending"],
            one["unrepairable_memory"], one["ecc_mode"]) == (False, False, None, None)
    assert _judge(replace(BASE, query=text, sample_2=text)) == []
    pending = text.replace("Channel Repair Pending                         : No",
                           "Channel Repair Pending                         : Yes")
    assert _judge(replace(BASE, query=pending, sample_2=pending)) == ["gpu-repair-pending"]
    tpc = text.replace("TPC Repair Pending                             : No",
                       "TPC Repair Pending                             : Yes")
    assert _judge(replace(BASE, query=tpc, sample_2=tpc)) == ["gpu-repair-pending"]
    lost = text.replace("Unrepairable Memory                            : N/A",
                        "Unrepairable Memory                            : Yes")
    assert _judge(replace(BASE, query=lost, sample_2=lost)) == ["gpu-unrepairable-memory"]
