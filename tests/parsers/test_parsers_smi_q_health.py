"""nvidia-smi-q: the health keys (ECC counts, retired pages, remap histogram, temperatures,
power limits, clock-event states and counters) across the layouts drivers printed.

Real samples in fixtures/real/nvidia-smi-q__*: R510 A100 excerpt (SRAM/DRAM, remap pending, bank
histogram High 1), R535 A10 (absolute thresholds), R545 H100 (T.Limit margins), R560 Titan V
(no ECC), R565 8x H100 (SRAM parity / SEC-DED split, SRAM threshold flag).
"""

from __future__ import annotations

from pathlib import Path

from probes.parsers import parse

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def first(name: str) -> dict:
    return parse("nvidia-smi-q", (REAL / f"{name}.txt").read_text(encoding="utf-8"))["gpus"][0]


def test_sram_dram_layout_and_histogram():
    g = first("nvidia-smi-q__a100-sxm4-80gb-driver510-dram-correctable-177-remap-pending-bank-high"
              "-excerpt")
    assert g["ecc_counts"]["volatile"] == {
        "sram_correctable": 0, "sram_uncorrectable": 0, "dram_correctable": 177,
        "dram_uncorrectable": 0, "correctable": 177, "uncorrectable": 0}
    assert g["remap_histogram"] == {"max": 639, "high": 1, "partial": 0, "low": 0,
                                               "none": 0}
    assert (g["retired_pages_sbe"], g["retired_pages_pending"]) == (None, None)  # N/A
    assert g["sram_threshold_exceeded"] is None and g["clocks_event_states"] == {}


def test_parity_secded_split_and_tlimit_margins():
    g = first("nvidia-smi-q__8x-h100-hbm3-sxm-driver565-tlimit-sram-secded-idle")
    assert g["ecc_counts"]["aggregate"]["sram_uncorrectable"] == 0
    assert g["sram_threshold_exceeded"] is False
    t = g["temperatures"]
    assert (t["current_c"], t["tlimit_c"], t["slowdown_tlimit_c"], t["shutdown_tlimit_c"],
            t["max_operating_tlimit_c"], t["memory_c"], t["slowdown_c"]) == (
        30, 57, -2, -8, 0, 36, None)
    assert (g["power_limit_min_w"], g["power_limit_max_w"], g["power_limit_requested_w"]) == (
        200.0, 700.0, 700.0)
    assert g["clocks_event_states"]["Idle"] is True
    assert g["clocks_event_states"]["HW Power Brake Slowdown"] is False
    assert set(g["clocks_event_counters_us"].values()) == {None}  # not printed by R565


def test_absolute_thresholds_and_no_ecc():
    a10 = first("nvidia-smi-q__1x-a10-driver535-remapped-rows-pending")
    assert (a10["temperatures"]["slowdown_c"], a10["temperatures"]["tlimit_c"],
            a10["ecc_mode_pending"]) == (98, None, "Enabled")
    titan = first("nvidia-smi-q__1x-titan-v-driver560-gen3-idle-gen1-clocks-event-reasons")
    assert titan["ecc_mode"] is None and titan["ecc_counts"]["volatile"]["correctable"] is None
    assert titan["temperatures"]["memory_max_operating_c"] == 95


def test_pre_r470_single_double_bit_layout():
    text = ("GPU 00000000:04:00.0\n    ECC Errors\n        Volatile\n"
            "            Single Bit            \n"
            "                Device Memory       : 5\n                L2 Cache            : 2\n"
            "                Texture Memory      : N/A\n                Total               : 7\n"
            "            Double Bit            \n"
            "                Device Memory       : 1\n                Total               : 1\n"
            "    Retired Pages\n        Single Bit ECC              : 0\n"
            "        Double Bit ECC              : 1\n        Pending                     : Yes\n")
    g = parse("nvidia-smi-q", text)["gpus"][0]
    assert g["ecc_counts"]["volatile"] == {
        "dram_correctable": 5, "sram_correctable": 2, "correctable": 7,
        "dram_uncorrectable": 1, "sram_uncorrectable": None, "uncorrectable": 1}
    assert g["ecc_counts"]["aggregate"]["correctable"] is None
    assert (g["retired_pages_sbe"], g["retired_pages_dbe"], g["retired_pages_pending"]) == (
        0, 1, True)


def test_clocks_event_reasons_counters():
    text = ("GPU 00000000:01:00.0\n    Clocks Event Reasons\n"
            "        SW Power Cap                  : Active\n"
            "    Clocks Event Reasons Counters\n"
            "        SW Power Capping              : 12234991553 us\n"
            "        Sync Boost                    : 0 us\n"
            "        SW Thermal Slowdown           : 11591399010 us\n"
            "        HW Thermal Slowdown           : 0 us\n"
            "        HW Power Braking              : 0 us\n")
    g = parse("nvidia-smi-q", text)["gpus"][0]
    assert g["clocks_event_reasons"] == ["SW Power Cap"]
    assert g["clocks_event_counters_us"] == {
        "sw_power_cap": 12234991553, "sync_boost": 0, "sw_thermal_slowdown": 11591399010,
        "hw_thermal_slowdown": 0, "hw_power_brake": 0}


def test_r535_hw_slowdown_with_hw_power_brake_active_on_idle_gpus():
    # Real R535 8x H100 report (leptonai/gpud testdata): every GPU idle at 86 MHz with HW
    # Slowdown and its HW Power Brake Slowdown sub-reason Active, Fabric Completed/Success.
    doc = parse("nvidia-smi-q", (REAL / "nvidia-smi-q__8x-h100-hbm3-driver535-hw-slowdown-power-"
                                        "brake-active-idle.txt").read_text(encoding="utf-8"))
    assert doc["driver_version"] == "535.161.08" and len(doc["gpus"]) == 8
    g = doc["gpus"][0]
    assert g["bus_id"] == "00000000:19:00.0" and g["sm_clock_mhz"] == 86
    assert g["clocks_event_reasons"] == ["HW Slowdown", "HW Power Brake Slowdown"]
    assert g["clocks_event_states"]["HW Thermal Slowdown"] is False
    assert (g["power_draw_w"], g["power_limit_w"], g["power_limit_default_w"]) == (
        67.74, 700.0, 700.0)
    assert g["pcie_replays"] == 67 and g["remapped_rows_pending"] is False
    assert all("HW Power Brake Slowdown" in gpu["clocks_event_reasons"] for gpu in doc["gpus"])
