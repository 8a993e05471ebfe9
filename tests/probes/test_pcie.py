"""The pcie probe: GPU and NIC links below their maximum, idle GPUs down-trained (healthy),
and GPU replays rising (issue 11 item 13)."""

from __future__ import annotations

import pytest

from probes.catalog import load_catalog
from probes.parsers import ParseError
from probes.pcie import PROBE, parse_sysfs
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

BASE = baseline("pcie")


def check(text: str, **ctx) -> list:
    return PROBE.check("gpu001", PROBE.parse(text), context(**ctx))


def smi_edit(text: str, bus: str, old: str, new: str) -> str:
    """Change one line inside GPU *bus*'s block of the nvidia-smi -q section."""
    smi = section_text(text, "smi_1")
    start = smi.index(f"GPU 00000000:{bus}:00.0")
    end = smi.find("\nGPU 0000", start + 1)
    block = smi[start:end if end > 0 else len(smi)]
    assert old in block, old
    return replace(text, smi_1=smi.replace(block, block.replace(old, new, 1)))


def set_util(text: str, bus: str, pct: int) -> str:
    smi = section_text(text, "smi_1")
    start = smi.index(f"GPU 00000000:{bus}:00.0")
    i = smi.index("Utilization", start)
    j = smi.index("%", i)
    line_start = smi.rindex(":", i, j) + 1
    return replace(text, smi_1=smi[:line_start] + f" {pct} " + smi[j:])


def set_gen(text: str, bus: str, gen: int) -> str:
    smi = section_text(text, "smi_1")
    start = smi.index(f"GPU 00000000:{bus}:00.0")
    i = smi.index("PCIe Generation", start)
    i = smi.index("Current", i)
    j = smi.index("\n", i)
    return replace(text, smi_1=smi[:i] + f"Current                   : {gen}" + smi[j:])


def test_script_is_posix_and_samples_replays_twice():
    script = PROBE.command({})
    assert sh_accepts(script).returncode == 0, sh_accepts(script).stderr
    assert "nvidia-smi -q" in script and "current_link_width" in script and "sleep 5" in script
    assert "sleep 2" in PROBE.command({"interval_s": 2})


def test_baseline_is_healthy_and_reports_catalog_facts():
    facts = PROBE.parse(BASE)
    assert set(load_catalog().probes["pcie"].facts) <= set(facts)
    assert len(facts["gpus"]) == 8 and len(facts["nics"]) == 8
    assert facts["links_degraded"] == 0 and facts["replays_delta"] == 0
    assert PROBE.check("gpu001", facts, context()) == []


def test_idle_gpus_down_trained_to_gen1_are_healthy():
    # every GPU idle (0%) at Gen1 of Gen5: power saving, not a fault
    text = BASE
    for bus in ("19", "3B", "4C", "5D", "9B", "BB", "CB", "DB"):
        text = set_gen(set_util(text, bus, 0), bus, 1)
    facts = PROBE.parse(text)
    assert facts["gpus"][0]["gen_current"] == 1 and facts["gpus"][0]["utilization_pct"] == 0
    assert PROBE.check("gpu001", facts, context()) == []


def test_a_busy_gpu_below_its_generation_is_degraded():
    findings = check(set_gen(BASE, "9B", 3))
    assert codes(findings) == ["pcie-link-degraded"]
    assert findings[0].evidence["links"] == {
        "GPU 0000:9b:00.0": {"width": "x16 of x16", "gen": "Gen3 of Gen5",
                             "utilization_pct": 99}}


def test_a_narrow_idle_gpu_link_is_a_warning_to_recheck_under_load():
    # nvidia-smi --help-query-gpu: pcie.link.width.current "may be reduced when the GPU is not
    # in use"; the real idle R580 RTX 5080 sits at x8 of x16. Named, not accused.
    text = smi_edit(set_util(BASE, "4C", 0), "4C", "Current                   : 16x",
                    "Current                   : 8x")
    findings = check(text)
    assert codes(findings) == ["pcie-gpu-link-narrow-idle"]
    assert findings[0].severity == "warning" and "x8 of x16" in findings[0].message


def test_a_narrow_busy_gpu_link_is_degraded():
    text = smi_edit(set_util(BASE, "4C", 97), "4C", "Current                   : 16x",
                    "Current                   : 8x")
    findings = check(text)
    assert codes(findings) == ["pcie-link-degraded"]
    assert "x8 of x16" in findings[0].message


def test_real_r580_idle_rtx5080_at_gen1_x8_is_not_accused():
    # fixtures/real: R580 prints "Utilization / GPU" (not "Gpu"); idle P8 at Gen1 x8 of Gen5 x16
    sample = real("nvidia-smi-q__1x-rtx5080-laptop-driver580-idle-p8-gen1-x8-of-x16-"
                  "repair-flags-head-excerpt")
    facts = PROBE.parse(replace(BASE, smi_1=sample, smi_2=None))
    gpu = next(g for g in facts["gpus"] if g["source"] == "nvidia-smi")
    assert (gpu["utilization_pct"], gpu["gen_current"], gpu["width_current"]) == (0, 1, 8)
    findings = PROBE.check("gpu001", facts, context())
    assert [(f.code, f.severity) for f in findings] == [("pcie-gpu-link-narrow-idle", "warning")]


@pytest.mark.parametrize(("line", "degraded"), [
    # NIC trained at x8 in a x16 slot
    ("nic mlx5_2 0000:4d:00.0 | 32.0 GT/s PCIe | 8 | 32.0 GT/s PCIe | 16 | 32.0 GT/s PCIe | 16",
     True),
    # NIC at Gen4 while it and its slot can do Gen5
    ("nic mlx5_2 0000:4d:00.0 | 16.0 GT/s PCIe | 16 | 32.0 GT/s PCIe | 16 | 32.0 GT/s PCIe | 16",
     True),
    # Gen5 NIC in a Gen4 slot: Gen4 is its maximum there
    ("nic mlx5_2 0000:4d:00.0 | 16.0 GT/s PCIe | 16 | 32.0 GT/s PCIe | 16 | 16.0 GT/s PCIe | 16",
     False),
    # an older kernel's spelling without "PCIe", and an unknown upstream port
    ("nic mlx5_2 0000:4d:00.0 | 8 GT/s | 16 | 8 GT/s | 16 |  | ", False),
])
def test_nic_links_against_the_device_and_its_slot(line, degraded):
    old = next(x for x in section_text(BASE, "sysfs").splitlines() if " mlx5_2 " in x)
    findings = check(edit(BASE, "sysfs", old, line))
    assert codes(findings) == (["pcie-link-degraded"] if degraded else [])


def test_replays_rising_faster_than_dcgm_expects():
    # GPU 5D replayed 12 TLPs in 5 s (144/min, DCGM expects < 8/min)
    later = section_text(BASE, "smi_2")
    block = later.index("GPU 00000000:5D:00.0")
    i = later.index("Replays Since Reset", block)
    j = later.index("\n", i)
    text = replace(BASE, smi_2=later[:i] + "Replays Since Reset               : 12" + later[j:])
    findings = check(text)
    assert codes(findings) == ["pcie-replays"]
    assert findings[0].evidence["replays"] == {"0000:5d:00.0": 12}


@pytest.mark.parametrize("replays", [1, 8])
def test_a_few_replays_in_a_short_sample_are_not_a_rate(replays):
    # 1 (or 8) replays in 5 s: no more than DCGM's allowance for a whole minute, so not judged
    # a rising counter (before: any replay in the 5 s sample read as 12/min and raised it)
    later = section_text(BASE, "smi_2")
    block = later.index("GPU 00000000:5D:00.0")
    i = later.index("Replays Since Reset", block)
    j = later.index("\n", i)
    text = replace(BASE, smi_2=later[:i] + f"Replays Since Reset               : {replays}"
                   + later[j:])
    assert check(text) == []


@pytest.mark.parametrize("sample", [
    "nvidia-smi-q__1x-titan-v-driver560-gen3-idle-gen1-clocks-event-reasons",
    "nvidia-smi-q__8x-rtx4090-driver535-gen4-link-idle-at-gen1-host-max-5-first-gpu-part",
])
def test_real_idle_gpus_at_gen1_are_not_accused(sample):
    # the real outputs of idle GPUs at Gen1 of Gen3/Gen4 as the probe's first sample
    text = replace(BASE, smi_1=real(sample), sysfs="", smi_2="")
    facts = PROBE.parse(text)
    assert facts["gpus"][0]["gen_current"] == 1 and facts["gpus"][0]["gen_max"] in (3, 4)
    assert PROBE.check("gpu001", facts, context()) == []


def test_without_nvidia_smi_gpu_width_is_still_judged_from_sysfs():
    old = next(x for x in section_text(BASE, "sysfs").splitlines() if x.startswith("gpu 0000:bb"))
    text = edit(replace(BASE, smi_1=None, smi_2=None), "sysfs", old,
                old.replace("| 32.0 GT/s PCIe | 16 | 32.0", "| 32.0 GT/s PCIe | 4 | 32.0", 1))
    facts = PROBE.parse(text)
    assert {g["source"] for g in facts["gpus"]} == {"sysfs"}
    # how busy the GPU is is not known without nvidia-smi: named for a re-check, not accused
    assert codes(PROBE.check("gpu001", facts, context())) == ["pcie-gpu-link-narrow-idle"]


def test_sysfs_speed_spellings():
    links = parse_sysfs("gpu 0000:19:00.0 0000:19:00.0 | 2.5 GT/s PCIe | 16 | 32.0 GT/s PCIe | "
                        "16 | Unknown speed | \n")
    assert links[0]["gen_current"] == 1 and links[0]["gen_max"] == 5
    assert links[0]["width_max"] == 16


def test_output_of_another_probe_is_a_parse_error():
    with pytest.raises(ParseError):
        PROBE.parse(baseline("gpu").replace("=== diag:section query", "=== diag:section q"))


def test_aer_counters_rise_only_between_two_reads_of_the_same_kept_counter() -> None:
    import subprocess

    from probes.base import script

    first = ("gpu 0000:9b:00.0 0000:9b:00.0 14 0 2\n"
             "gpu 0000:bb:00.0 0000:bb:00.0 9 - -\n"
             "nic mlx5_0 0000:1a:00.0 500 0 0\n")
    second = ("gpu 0000:9b:00.0 0000:9b:00.0 20 1 2\n"
              "gpu 0000:bb:00.0 0000:bb:00.0 9 - -\n"
              "nic mlx5_0 0000:1a:00.0 3 0 0\n")  # a reset device: its totals restarted
    text = script([("sysfs", "true"), ("aer_1", f"printf '{first}'"),
                   ("aer_2", f"printf '{second}'")])
    out = subprocess.run(["sh", "-c", text], capture_output=True, text=True, check=True).stdout
    aer = {d["bus_id"]: d for d in PROBE.parse(out)["aer"]}
    assert (aer["0000:9b:00.0"]["correctable_delta"], aer["0000:9b:00.0"]["fatal_delta"],
            aer["0000:9b:00.0"]["nonfatal_delta"]) == (6, 1, 0)
    # not kept ("-") is not zero: no rise can be read
    assert aer["0000:bb:00.0"]["fatal"] is None and aer["0000:bb:00.0"]["fatal_delta"] is None
    # a counter that went down was reset: no rise is read from it either
    assert aer["0000:1a:00.0"]["correctable_delta"] is None
    assert aer["0000:1a:00.0"]["kind"] == "nic" and aer["0000:1a:00.0"]["name"] == "mlx5_0"


def test_real_r580_busy_gpu_at_gen3_of_gen5_is_degraded():
    # R580 prints "Utilization / GPU": read, a busy GPU's slow link is judged (before, the
    # unread utilization made every R580 GPU idle and its generation never judged)
    sample = real("nvidia-smi-q__1x-rtx5080-laptop-driver580-idle-p8-gen1-x8-of-x16-"
                  "repair-flags-head-excerpt")
    busy = (sample.replace("GPU                                            : 0 %",
                           "GPU                                            : 98 %")
            .replace("Current                                : 1",
                     "Current                                : 3")
            .replace("Current                                : 8x",
                     "Current                                : 16x"))
    facts = PROBE.parse(replace(BASE, smi_1=busy, smi_2=None))
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["pcie-link-degraded"]
    assert "Gen3 of Gen5" in findings[0].message


def test_busy_gpu_behind_a_gen4_switch_port_is_at_its_maximum():
    # nvidia-smi's Max is the lower of Device Max and Host Max, and Host Max is "the root port
    # corresponding to this GPU" (nvidia-smi --help-query-gpu pcie.link.gen.hostmax): a Gen4
    # PCIe switch between a Gen5 root port and the GPU caps the link at Gen4; sysfs reads the
    # switch's downstream port (max_link_speed) and caps it
    text = smi_edit(set_util(BASE, "4C", 97), "4C", "Current                   : 5",
                    "Current                   : 4")
    old = next(x for x in section_text(BASE, "sysfs").splitlines() if x.startswith("gpu 0000:4c"))
    text = edit(text, "sysfs", old, "gpu 0000:4c:00.0 0000:4c:00.0 | 16.0 GT/s PCIe | 16 | "
                "32.0 GT/s PCIe | 16 | 16.0 GT/s PCIe | 16")
    facts = PROBE.parse(text)
    gpu = next(g for g in facts["gpus"] if g["bus_id"] == "0000:4c:00.0")
    assert (gpu["gen_current"], gpu["gen_max"]) == (4, 4)
    assert check(text) == []
    # the same port at Gen5: the busy GPU at Gen4 is degraded
    text5 = edit(text, "sysfs", "16 | 16.0 GT/s PCIe | 16", "16 | 32.0 GT/s PCIe | 16")
    assert codes(check(text5)) == ["pcie-link-degraded"]


def test_r3xx_replays_since_reset_spelling_is_read():
    # the R3xx drivers printed "Replays since reset" (no rollover counter yet)
    text = smi_edit(BASE, "4C", "Replays Since Reset               : 0",
                    "Replays since reset               : 3")
    gpu = next(g for g in PROBE.parse(text)["gpus"] if g["bus_id"] == "0000:4c:00.0")
    assert gpu["replays"] == 3
