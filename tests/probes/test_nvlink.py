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


def _pcie_status(active: list[int], name: str = "NVIDIA A100 80GB PCIe", links: int = 12) -> str:
    out = ""
    for i, up in enumerate(active):
        out += f"GPU {i}: {name} (UUID: GPU-0000000{i}-0719-2b9a-f2e1-2f02c8d1d5c8)\n"
        out += "".join(f"\t Link {n}: " + ("25 GB/s" if n < up else "<inactive>") + "\n"
                       for n in range(links))
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
    # bridged H100 NVL pairs use 12 of their 18 links by design (azurehpc-health-checks #162)
    nvl = {"name": "NVIDIA H100 NVL", "links": 18}
    assert topology_codes(_pcie_status([12, 12, 12, 12], **nvl)) == []
    assert topology_codes(_pcie_status([12, 12, 8, 8], **nvl)) == ["nvlink-inactive"]
    assert topology_codes(_pcie_status([0, 0, 0, 0], name="NVIDIA A100-SXM4-80GB")) == [
        "nvlink-inactive"]


# --- red-team pass: NVML errors, unmeasured counters, NVLink 5 counters DCGM fails -----------

def _nv5_errors(gpus: int, bumps: dict[tuple[int, int, str], int] | None = None) -> str:
    """nvidia-smi nvlink -e of B200 GPUs as driver 595 prints it (counter names of NVML's
    NVML_FI_DEV_NVLINK_COUNT_* set, pre-FEC "Raw Errors Lane" lines included), all zero but
    *bumps* ({(gpu, link, counter): value})."""
    names = ["Malformed packet Errors", "Buffer overrun Errors", "Rx Errors", "Rx remote Errors",
             "Rx General Errors", "Local link integrity Errors", "Tx discards",
             "Link recovery successful events", "Link recovery failed events",
             "Total link recovery events", "Effective Errors", "Symbol Errors"]
    out = ""
    for g in range(gpus):
        out += f"GPU {g}: NVIDIA B200 (UUID: GPU-0000000{g}-0719-2b9a-f2e1-2f02c8d1d5c8)\n"
        for n in range(18):
            for name in names:
                out += f"\t Link {n}: {name}: {(bumps or {}).get((g, n, name), 0)}\n"
            out += (f"\t Link {n}: Raw Errors Lane 0: {82 + n}\n"
                    f"\t Link {n}: Effective BER: 15e-255\n")
    return out


def _nv5_status(gpus: int) -> str:
    return "".join(f"GPU {g}: NVIDIA B200 (UUID: GPU-0000000{g}-0719-2b9a-f2e1-2f02c8d1d5c8)\n"
                   + "".join(f"\t Link {n}: 53.125 GB/s\n" for n in range(18))
                   for g in range(gpus))


def test_nvlink5_counters_dcgm_fails_on_are_judged():
    # DCGM MonitorNVLink5Fields fails any increase of symbol, malformed, dropped (overrun), Rx,
    # Rx remote, Rx general, integrity and effective errors; MonitorNVLinkErrorFields warns on
    # successful recoveries and fails failed ones (Blackwell)
    first = _nv5_errors(2, {(1, 4, "Symbol Errors"): 7, (1, 4, "Link recovery successful events"):
                            2, (1, 4, "Total link recovery events"): 2})
    base = replace(BASE, status=_nv5_status(2), errors_1=first, errors_2=first)
    assert _judge(base) == []  # non-zero totals, flat: history
    for counter in ("Symbol Errors", "Malformed packet Errors", "Buffer overrun Errors",
                    "Rx remote Errors", "Rx General Errors"):
        second = _nv5_errors(2, {(1, 4, "Symbol Errors"): 7, (1, 4, counter): 9,
                                 (1, 4, "Link recovery successful events"): 2,
                                 (1, 4, "Total link recovery events"): 2})
        assert _judge(replace(base, errors_2=second)) == ["nvlink-errors-after-fec-rising"], counter
    recovered = _nv5_errors(2, {(1, 4, "Symbol Errors"): 7,
                                (1, 4, "Link recovery successful events"): 3,
                                (1, 4, "Total link recovery events"): 3})
    assert _judge(replace(base, errors_2=recovered)) == ["nvlink-recovery-succeeded-rising"]
    failed = _nv5_errors(2, {(1, 4, "Symbol Errors"): 7,
                             (1, 4, "Link recovery successful events"): 2,
                             (1, 4, "Link recovery failed events"): 1,
                             (1, 4, "Total link recovery events"): 3})
    assert _judge(replace(base, errors_2=failed)) == ["nvlink-errors-after-fec-rising"]
    # pre-FEC lines are dropped on the host (and ignored if they get through)
    assert "Raw Errors" in PROBE.command({})


def test_nvml_error_other_than_not_supported_is_not_measured_not_pcie():
    # "NVML: Unable to retrieve NVLink information: <nvmlErrorString>": only "Not Supported" means
    # a board without NVLink; "Unknown Error", "GPU requires reset" say nothing about the links
    for why in ("Unknown Error", "GPU requires reset", "GPU is lost"):
        text = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08d}-0000-0000-0000-0000000"
                       f"00000)\n\t NVML: Unable to retrieve NVLink information: {why}\n"
                       for i in range(8))
        facts = parse(replace(BASE, status=text, errors_1=text, errors_2=text))
        assert facts["nvlink_present"] is None, why
        assert [g["gpu"] for g in facts["gpus_unreadable"]] == list(range(8))
        found = PROBE.check("gpu001", facts, context())
        assert set(codes(found)) == {"not-measured"} and why in found[0].message
    # one GPU of eight in a reset state: its links are not "inactive", it is not measured
    status = section_text(BASE, "status")
    start, end = status.index("GPU 3:"), status.index("GPU 4:")
    header = status[start:status.index("\n", start) + 1]
    one = status[:start] + header + (
        "\t NVML: Unable to retrieve NVLink information: GPU requires reset\n") + status[end:]
    facts = parse(replace(BASE, status=one))
    assert facts["nvlink_present"] is True and facts["gpus_unreadable"] == [
        {"gpu": 3, "why": "GPU requires reset"}]
    assert _judge(replace(BASE, status=one)) == []
    assert "not-measured" in codes(PROBE.check("gpu001", facts, context()))
    # a GPU NVML cannot open at all
    lost = status[:start] + ("Unable to determine the device handle for GPU 00000000:5D:00.0: "
                             "Unknown Error\n") + status[end:]
    facts = parse(replace(BASE, status=lost))
    assert facts["gpus_unreadable"] == [{"gpu": "00000000:5D:00.0", "why": "Unknown Error"}]
    assert "not-measured" in codes(PROBE.check("gpu001", facts, context()))


def test_active_links_without_any_known_counter_are_not_measured():
    # the -e output cut at the line budget, or counters renamed by a driver: never "no errors"
    renamed = ERRORS.replace("Replay Errors", "Replay Events").replace(
        "Recovery Errors", "Recovery Events").replace("CRC Errors", "CRC Events")
    facts = parse(replace(BASE, errors_1=renamed, errors_2=renamed))
    assert facts["links_counters_unmeasured"] == 144
    assert codes(PROBE.check("gpu001", facts, context())) == ["not-measured"]
    cut = ERRORS[:ERRORS.index("GPU 6:")]
    facts = parse(replace(BASE, errors_1=cut, errors_2=cut))
    assert facts["links_counters_unmeasured"] == 36
    assert parse(BASE)["links_counters_unmeasured"] == 0


def test_links_of_a_mig_enabled_gpu_reported_down_are_not_faults():
    # DCGM DcgmHealthWatch.cpp MonitorNVLinkStatus: "NVML reports links to MIG enabled GPUs as
    # down" (bug 200682374): treated as disabled when the GPU is in MIG mode
    gpus = "index, pci.bus_id, mig.mode.current\n" + "".join(
        f"{i}, 00000000:{0x19 + i:02X}:00.0, {'Enabled' if i == 2 else 'Disabled'}\n"
        for i in range(4))
    sxm = _pcie_status([12, 12, 0, 12], name="NVIDIA A100-SXM4-80GB")
    facts = parse(replace(BASE, gpus=gpus, status=sxm))
    assert (link(facts, 2, 0)["mig_enabled"], link(facts, 0, 0)["mig_enabled"]) == (True, False)
    assert _judge(replace(BASE, gpus=gpus, status=sxm)) == []
    isolated = sxm.split("GPU 2:")[0] + (
        "GPU 2: NVIDIA A100-SXM4-80GB (UUID: GPU-00000002-0719-2b9a-f2e1-2f02c8d1d5c8)\n"
        "\t NVML: Unable to retrieve NVLink information as all links are inActive\n"
        "GPU 3:" + sxm.split("GPU 3:")[1])
    assert _judge(replace(BASE, gpus=gpus, status=isolated)) == []
    # the same GPU with MIG disabled (or a driver that cannot say) is a fault
    no_mig = gpus.replace("Enabled", "Disabled")
    assert _judge(replace(BASE, gpus=no_mig, status=sxm)) == ["nvlink-link-inactive"]
    assert _judge(replace(BASE, status=isolated)) == ["nvlink-gpu-isolated"]
    assert link(parse(replace(BASE, status=sxm)), 2, 0)["mig_enabled"] is None
    assert "mig.mode.current" in PROBE.command({})


def test_crc_rate_uses_the_time_between_the_samples_not_the_sleep():
    # nvidia-smi on 8 GPUs without persistence mode takes seconds: 300 CRC errors between samples
    # taken 6 s apart are 50/s (a warning), not 150/s over the 2 s sleep (a storm)
    second = bump(ERRORS, 2, 5, "CRC Errors", 300)
    timed = replace(BASE, errors_1="diag-time 1765100000.250000000\n" + ERRORS,
                    errors_2="diag-time 1765100006.250000000\n" + second)
    facts = parse(timed)
    assert facts["sample_interval_s"] == 6.0 and link(facts, 2, 5)["crc_rate_per_s"] == 50.0
    assert _judge(timed) == ["nvlink-crc-rising"]
    # no usable time (date without %N): the sleep, as before
    untimed = replace(timed, errors_1="diag-time 1765100000.%N\n" + ERRORS,
                      errors_2="diag-time 1765100006.%N\n" + second)
    assert link(parse(untimed), 2, 5)["crc_rate_per_s"] == 150.0
    assert _judge(untimed) == ["nvlink-crc-storm"]
    # the time line is not output of nvidia-smi: a PCIe node's empty -e stays "no NVLink"
    empty = replace(BASE, status="", errors_1="diag-time 1765100000.25\n",
                    errors_2="diag-time 1765100003.25\n")
    assert parse(empty)["nvlink_present"] is False and check(empty) == []
    assert "diag-time" in PROBE.command({})


def test_unbridged_a30_cards_are_add_in_cards():
    # "NVIDIA A30" is a PCIe card (no "PCIe" in its name) with an optional two-card NVLink bridge
    status = "".join(line + "\n" for line in _pcie_status([4, 4, 0, 0], name="NVIDIA A30")
                     .splitlines() if not any(f"Link {n}:" in line for n in range(4, 12)))
    assert link(parse(replace(BASE, status=status)), 2, 0)["addin_card"] is True
    assert _judge(replace(BASE, status=status)) == []


def test_crc_counter_names_in_either_word_order_and_the_singular():
    # dcgmi nvlink -e prints "CRC FLIT Error" / "CRC Data Error"; "Flit CRC" / "Data CRC" orders
    status = "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-0)\n\t Link 0: 25.781 GB/s\n"
    for flit, data in (("Flit CRC Errors", "Data CRC Errors"),
                       ("CRC FLIT Error", "CRC Data Error")):
        first = f"GPU 0: X (UUID: GPU-0)\n\t Link 0: {flit}: 7\n\t Link 0: {data}: 2\n"
        second = first.replace(": 7", ": 9")
        entry = parse(replace(BASE, status=status, errors_1=first, errors_2=second))["links"][0]
        assert (entry["crc_flit"], entry["crc_data"], entry["crc_delta"]) == (9, 2, 2), flit


def test_error_counters_nvml_cannot_read_are_not_measured_with_nvml_s_reason():
    # links up in -s, but -e answered by NVML with an error (a VM, a GPU being reset)
    text = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})\n"
                   "\t NVML: Unable to retrieve NVLink information: Not Supported\n"
                   for i in range(8))
    facts = parse(replace(BASE, errors_1=text, errors_2=text))
    assert facts["nvlink_present"] is True and facts["links_counters_unmeasured"] == 144
    (finding,) = PROBE.check("gpu001", facts, context())
    assert finding.code == "not-measured" and "Not Supported" in finding.message
    assert _judge(replace(BASE, errors_1=text, errors_2=text)) == []


def test_bridged_h100_nvl_uses_12_of_its_18_links_by_design():
    # Azure/azurehpc-health-checks issue 162 (NCv5, H100 NVL): "only support 12 out of the 18
    # available links ... The inactive links are by design", printed "Link 4: Inactive"
    down = (4, 5, 10, 11, 16, 17)
    status = "".join(
        f"GPU {g}: NVIDIA H100 NVL (UUID: GPU-0000000{g}-0719-2b9a-f2e1-2f02c8d1d5c8)\n"
        + "".join(f"         Link {n}: " + ("Inactive" if n in down else "26.562 GB/s") + "\n"
                  for n in range(18)) for g in range(2))
    facts = parse(replace(BASE, status=status))
    assert (facts["links_active"], facts["links_inactive"]) == (24, 12)
    assert link(facts, 0, 4)["gpu_links_expected"] == 12
    assert _judge(replace(BASE, status=status)) == []
    # a bridge missing (8 of the 12) is still a fault of the pair
    short = status.replace("Link 3: 26.562 GB/s", "Link 3: Inactive").replace(
        "Link 2: 26.562 GB/s", "Link 2: Inactive").replace(
        "Link 1: 26.562 GB/s", "Link 1: Inactive").replace(
        "Link 0: 26.562 GB/s", "Link 0: Inactive")
    assert _judge(replace(BASE, status=short)) == ["nvlink-link-inactive"]
