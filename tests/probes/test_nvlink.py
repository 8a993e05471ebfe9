"""The nvlink component: link state and error counters sampled twice (evidence sweep).

Real samples: the 12-link A100 status of leptonai/gpud and the H100 error counters of
stas00/ml-engineering (fixtures/real/nvidia-smi-nvlink__*). The NVLink 5 counter names are those
of NVML's NVML_FI_DEV_NVLINK_COUNT_* fields as nvidia-smi R570 prints them (no public sample).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from probes.faults import load_faults
from probes.faults.apply import judge
from probes.nvlink import PROBE, SAMPLE_INTERVAL_S
from probes.parsers import ParseError
from tests.probes.probe_outputs import (
    baseline,
    codes,
    context,
    real,
    replace,
    section_text,
    sh_accepts,
)

BASE = baseline("nvlink")
ERRORS = section_text(BASE, "errors_1")


def parse(text: str) -> dict:
    return PROBE.parse(text)


def check(text: str) -> list:
    return PROBE.check("gpu001", parse(text), context())


def link(facts: dict, gpu: int, number: int) -> dict:
    return next(e for e in facts["links"] if e["gpu"] == gpu and e["link"] == number)


def bump(text: str, gpu: int, number: int, counter: str, value: int) -> str:
    """The -e output with one counter of one link set to *value*."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(f"GPU {gpu}:"))
    for i in range(start + 1, len(lines)):
        if lines[i].strip().startswith(f"Link {number}: {counter}:"):
            lines[i] = f"\t Link {number}: {counter}: {value}"
            return "\n".join(lines)
    raise AssertionError(f"no {counter} for GPU {gpu} link {number}")


def test_script_is_posix_bounded_and_samples_twice():
    script = PROBE.command({})
    assert sh_accepts(script).returncode == 0, sh_accepts(script).stderr
    if shutil.which("dash"):
        assert subprocess.run(["dash", "-n", "-c", script]).returncode == 0
    assert script.count("nvidia-smi nvlink -e") == 2 and "nvidia-smi nvlink -s" in script
    assert f"sleep {SAMPLE_INTERVAL_S}" in script and "timeout 5" in script
    assert "head -n" in script


def test_script_runs_here_without_nvidia_smi():
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    out = subprocess.run(["sh", "-c", PROBE.command({})], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0
    facts = parse(out.stdout)
    assert facts["missing"] == ["gpus", "status", "errors_1", "errors_2"]
    assert facts["nvlink_present"] is None and facts["links"] == []
    (finding,) = PROBE.check("gpu001", facts, context())
    assert finding.code == "not-measured" and "not installed" in finding.message


def test_baseline_is_healthy_and_history_is_not_a_delta():
    facts = parse(BASE)
    assert (facts["gpu_count"], facts["links_total"], facts["links_active"],
            facts["links_inactive"]) == (8, 144, 144, 0)
    assert facts["nvlink_present"] is True and facts["gpus_all_inactive"] == []
    assert facts["sample_interval_s"] == SAMPLE_INTERVAL_S
    assert (facts["replay_delta"], facts["recovery_delta"], facts["crc_flit_delta"]) == (0, 0, 0)
    assert facts["crc_data_delta"] is None  # not printed by this driver: unknown, not 0
    old = link(facts, 3, 7)  # non-zero totals counted before the job, flat during the sample
    assert (old["replay"], old["crc_flit"], old["replay_delta"], old["crc_rate_per_s"]) == (
        3, 12, 0, 0.0)
    assert old["bus_id"] == "00000000:5D:00.0" and old["name"] == "GPU3 link 7"
    assert old["speed_gb_s"] == old["speed_max_gb_s"] == 26.562
    assert check(BASE) == []


def test_rising_counters_and_a_reset_between_samples():
    second = bump(bump(ERRORS, 2, 5, "Replay Errors", 4), 2, 5, "CRC Errors", 600)
    facts = parse(replace(BASE, errors_2=second))
    hot = link(facts, 2, 5)
    assert (hot["replay_delta"], hot["crc_flit_delta"], hot["crc_rate_per_s"]) == (4, 600, 300.0)
    assert facts["replay_delta"] == 4
    # GPU 3 link 7 counted 3 replays; "nvidia-smi nvlink -re" before the second sample: 1 new
    reset = bump(ERRORS, 3, 7, "Replay Errors", 1)
    assert link(parse(replace(BASE, errors_2=reset)), 3, 7)["replay_delta"] == 1


def test_real_samples_status_and_error_counters():
    # the real 8x A100 status (12 links at 25 GB/s) and the real H100 -e excerpt (links 0, 1,
    # 17, the author's "[...]" lines ignored)
    errors = real("nvidia-smi-nvlink__errorcounters-h100-hbm3-18-links-all-zero-author-elided"
                  "-excerpt")
    text = replace(BASE, status=real("nvidia-smi-nvlink__status-8x-a100-sxm4-80gb-12-links"),
                   errors_1=errors, errors_2=errors)
    facts = parse(text)
    assert (facts["links_total"], facts["links_active"]) == (96, 96)
    assert link(facts, 0, 0)["speed_gb_s"] == 25.0
    assert (link(facts, 0, 1)["replay"], link(facts, 0, 1)["replay_delta"]) == (0, 0)
    assert link(facts, 0, 5)["replay"] is None  # elided by the author: not measured
    assert link(facts, 1, 0)["crc_flit"] is None
    older = real("nvidia-smi-nvlink__status-a100-sxm4-80gb-tab-indented-older-driver-excerpt")
    assert parse(replace(BASE, status=older))["links_total"] == 24


def test_pcie_node_has_no_nvlink_and_that_is_no_fault():
    not_supported = "".join(
        f"GPU {i}: NVIDIA H100 PCIe (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)\n"
        "\t NVML: Unable to retrieve NVLink information: Not Supported\n" for i in range(2))
    for text in (not_supported, ""):  # some drivers print nothing at all
        facts = parse(replace(BASE, status=text, errors_1=text, errors_2=text))
        assert facts["nvlink_present"] is False and facts["links"] == []
        assert facts["links_total"] == 0 and check(replace(BASE, status=text, errors_1=text,
                                                           errors_2=text)) == []
    gpu_lines_only = "GPU 0: NVIDIA A10 (UUID: GPU-0)\nGPU 1: NVIDIA A10 (UUID: GPU-1)\n"
    facts = parse(replace(BASE, status=gpu_lines_only, errors_1="", errors_2=""))
    assert facts["nvlink_present"] is False and facts["gpu_count"] == 2


def test_gpu_with_all_links_inactive_counts_as_many_links_down_as_its_peers():
    status = section_text(BASE, "status")
    start = status.index("GPU 6:")
    end = status.index("GPU 7:")
    header = status[start:status.index("\n", start) + 1]
    down = header + "\t NVML: Unable to retrieve NVLink information as all links are inActive\n"
    facts = parse(replace(BASE, status=status[:start] + down + status[end:]))
    assert facts["gpus_all_inactive"] == [6]
    isolated = [e for e in facts["links"] if e["gpu"] == 6]
    assert len(isolated) == 18 and all(e["all_links_inactive"] and e["active"] is False
                                       for e in isolated)
    assert (facts["links_active"], facts["links_inactive"]) == (126, 18)


def test_old_and_nvlink5_counter_names():
    # older drivers split the CRC counter; NVLink 5 (R570 on) prints NVML's COUNT_* set
    old = ("GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-0)\n\t Link 0: Replay Errors: 1\n"
           "\t Link 0: Recovery Errors: 0\n\t Link 0: CRC FLIT Errors: 7\n"
           "\t Link 0: CRC Data Errors: 2\n")
    nv5 = ("GPU 0: NVIDIA B200 (UUID: GPU-0)\n\t Link 0: Rx Errors: 0\n"
           "\t Link 0: Local link integrity Errors: 0\n\t Link 0: Link recovery failed events: 1\n"
           "\t Link 0: Effective Errors: 3\n\t Link 0: Symbol Errors: 140\n")
    status = "GPU 0: X (UUID: GPU-0)\n\t Link 0: 25 GB/s\n"
    entry = parse(replace(BASE, status=status, errors_1=old, errors_2=old))["links"][0]
    assert (entry["crc_flit"], entry["crc_data"], entry["crc_delta"]) == (7, 2, 0)
    entry = parse(replace(BASE, status=status, errors_1=nv5, errors_2=nv5))["links"][0]
    assert (entry["effective_errors"], entry["symbol_errors"], entry["recovery_failed"],
            entry["replay"]) == (3, 140, 1, None)


def test_failures_are_not_measured_never_zero():
    failed = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 9)
    facts = parse(replace(BASE, status=failed, errors_1=failed, errors_2=failed))
    assert facts["nvlink_present"] is None and facts["replay_delta"] is None
    assert "couldn't communicate" in facts["errors"]["status"]
    assert codes(PROBE.check("gpu001", facts, context())) == ["not-measured", "not-measured"]
    # a garbled status section is an error of that section, not of the whole output
    facts = parse(replace(BASE, status="\x00\x01 garbage \ufffd\n"))
    assert "status" in facts["errors"] and facts["nvlink_present"] is None
    # the counters missing while the status was read: the state is judged, the counters not
    facts = parse(replace(BASE, errors_2=None))
    assert facts["nvlink_present"] is True and facts["sample_interval_s"] is None
    assert link(facts, 0, 0)["replay_delta"] is None
    assert codes(PROBE.check("gpu001", facts, context())) == ["not-measured"]
    with pytest.raises(ParseError):
        parse("GPU 0: NVIDIA H100 80GB HBM3\n\t Link 0: 26.562 GB/s\n")  # not this script's


def _judge(text: str) -> list[str]:
    ctx = context()
    return codes(judge("nvlink", {"gpu001": parse(text)}, ctx.thresholds))


def test_catalogue_names_rising_counters_and_spares_history():
    if "nvlink-replay-rising" not in load_faults().signatures:
        pytest.skip("the nvlink family is not merged into probes/faults yet")
    assert _judge(BASE) == []
    rising = replace(BASE, errors_2=bump(ERRORS, 2, 5, "Replay Errors", 4))
    assert _judge(rising) == ["nvlink-replay-rising"]


def _pcie_status(active: list[int], name: str = "NVIDIA A100 80GB PCIe") -> str:
    out = ""
    for i, up in enumerate(active):
        out += f"GPU {i}: {name} (UUID: GPU-0000000{i}-0719-2b9a-f2e1-2f02c8d1d5c8)\n"
        out += "".join(f"\t Link {n}: " + ("25 GB/s" if n < up else "<inactive>") + "\n"
                       for n in range(12))
    return out


def test_unbridged_pcie_cards_beside_a_bridged_pair_are_not_inactive_links():
    # NVIDIA/NVSentinel PR #1481: a PCIe card without a bridge reports every link down. Two
    # bridged A100 PCIe cards and two without a bridge: nothing is down.
    facts = parse(replace(BASE, status=_pcie_status([12, 12, 0, 0])))
    gpu2 = link(facts, 2, 0)
    assert (gpu2["addin_card"], gpu2["gpu_links_active"], gpu2["active"]) == (True, 0, False)
    assert _judge(replace(BASE, status=_pcie_status([12, 12, 0, 0]))) == []
    # a bridge making contact on some links only is still a fault of the bridged pair
    assert _judge(replace(BASE, status=_pcie_status([8, 8, 0, 0]))) == ["nvlink-link-inactive"]
    # and on SXM parts an all-down GPU beside working ones stays a fault
    sxm = _pcie_status([12, 12, 0, 0], name="NVIDIA A100-SXM4-80GB")
    assert link(parse(replace(BASE, status=sxm)), 2, 0)["addin_card"] is False
    assert _judge(replace(BASE, status=sxm)) == ["nvlink-link-inactive"]


def test_unbridged_pcie_card_with_the_nvml_all_inactive_line_is_not_isolated():
    status = _pcie_status([12, 12, 0, 0]).split("GPU 2:")[0] + (
        "GPU 2: NVIDIA H100 PCIe (UUID: GPU-00000002-0719-2b9a-f2e1-2f02c8d1d5c8)\n"
        "\t NVML: Unable to retrieve NVLink information as all links are inActive\n")
    assert _judge(replace(BASE, status=status)) == []
    sxm = status.replace("NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3")
    assert _judge(replace(BASE, status=sxm)) == ["nvlink-gpu-isolated"]


def test_topology_does_not_count_the_links_of_unbridged_pcie_cards():
    # the topology probe reads nvlink --status too: A100 PCIe cards without bridges have no
    # inactive link to report (NVSentinel PR #1481), an SXM board with every link down does
    from probes.topology import PROBE as TOPOLOGY

    def topology_codes(status: str) -> list[str]:
        facts = TOPOLOGY.parse(replace(baseline("topology"), nvlink=status))
        return codes(TOPOLOGY.check("gpu001", facts, context()))

    assert topology_codes(_pcie_status([0, 0, 0, 0])) == []
    assert topology_codes(_pcie_status([12, 12, 0, 0])) == []
    assert topology_codes(_pcie_status([8, 8, 0, 0])) == ["nvlink-inactive"]
    assert topology_codes(_pcie_status([0, 0, 0, 0], name="NVIDIA A100-SXM4-80GB")) == [
        "nvlink-inactive"]
