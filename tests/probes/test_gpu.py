"""The gpu probe: its script, its parse of real and edited outputs, and its checks."""

from __future__ import annotations

import json

import pytest

from probes.catalog import load_catalog
from probes.gpu import PROBE
from probes.parsers import ParseError
from tests.probes.probe_outputs import (
    baseline,
    by_code,
    codes,
    context,
    edit,
    real,
    replace,
    section_text,
    sh_accepts,
)

BASE = baseline("gpu")
NOW = 1209631.42  # the baseline's /proc/uptime
XID79 = (f"[{NOW - 200:.6f}] NVRM: Xid (PCI:0000:9b:00): 79, pid=3918221, name=python3, "
         "GPU has fallen off the bus.")
SMI_FAILED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
              "Make sure that the latest NVIDIA driver is installed and running.")


def with_kernel_lines(*lines: str) -> str:
    """The baseline with lines appended to its kernel log section."""
    text = section_text(BASE, "kernel_log")
    return replace(BASE, kernel_log=text + "".join(line + "\n" for line in lines))


def query_rows(text: str) -> list[str]:
    return section_text(text, "query").splitlines()


def check(text: str, **ctx) -> list:
    return PROBE.check("gpu001", PROBE.parse(text), context(**ctx))


def test_command_is_one_posix_script():
    # The script passes `sh -n`, asks both throttle-reason spellings and uses the default window.
    script = PROBE.command({})
    assert sh_accepts(script).returncode == 0, sh_accepts(script).stderr
    assert "clocks_throttle_reasons.active" in script and "clocks_event_reasons.active" in script
    assert '--since "-120min"' in script and "window_minutes 120" in script


def test_command_honours_the_window_param():
    # A runbook's window_minutes reaches journalctl --since and the printed window.
    script = PROBE.command({"window_minutes": 240})
    assert '--since "-240min"' in script and "window_minutes 240" in script


def test_baseline_facts():
    # The healthy 8xH100 baseline parses into the catalog's facts; the week-old XID 13 is ignored.
    facts = PROBE.parse(BASE)
    assert facts["gpu_count"] == 8
    assert facts["utilization_avg_pct"] == 98.1
    assert facts["utilization_min_pct"] == 97
    assert facts["memory_used_pct"] == 87.4
    assert facts["temperature_max_c"] == 63
    assert facts["power_draw_w"] == 607.6
    assert facts["sm_clock_mhz"] == 1980
    assert facts["throttle_reasons"] == []
    assert facts["ecc_uncorrected"] == 0
    assert facts["remapped_rows_pending"] is False
    assert facts["remapped_rows_failure"] is False
    assert facts["xid_codes"] == []
    assert facts["pci_gpu_count"] == 8
    assert facts["kernel_log_source"] == "dmesg"
    assert [x["code"] for x in facts["xids"]] == [13, 13]
    assert facts["xids"][0]["age_min"] > 3000
    assert facts["gpus"][4]["bus_id"] == "00000000:9B:00.0"
    json.dumps(facts)


def test_baseline_reports_every_catalog_fact():
    # Every fact the catalog lists for gpu is a key of the parsed facts.
    facts = PROBE.parse(BASE)
    assert set(load_catalog().probes["gpu"].facts) <= set(facts)


def test_baseline_raises_nothing():
    # Healthy node: no per-host finding, and no fleet finding among identical peers.
    facts = PROBE.parse(BASE)
    assert PROBE.check("gpu001", facts, context()) == []
    fleet = {f"gpu00{i}": facts for i in range(1, 6)}
    assert PROBE.check_fleet(fleet, context()) == []


def test_xid79_in_window_drains_and_reports_fallen_off_bus():
    # A fresh XID 79: xid-drain and gpu-fallen-off-bus, naming GPU4 by its bus id.
    facts = PROBE.parse(with_kernel_lines(XID79))
    assert facts["xid_codes"] == [79]
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["gpu-fallen-off-bus", "xid-drain"]
    assert by_code(findings, "xid-drain")[0].evidence["gpus"] == ["GPU4 (0000:9b:00)"]


def test_real_xid_48_63_94_lines_map_to_their_catalog_actions():
    # The real DBE / row-remap / contained-ECC lines, re-stamped as recent. NVIDIA's catalog:
    # 48 WORKFLOW_XID_48 (a GPU reset applies the row remap), 63 IGNORE (info), 94 RESTART_APP.
    lines = real("dmesg-xid__xid48-63-94-dbe-row-remap-contained").replace(
        "[430954.", f"[{NOW - 60:.0f}.").splitlines()
    findings = check(with_kernel_lines(*lines))
    assert codes(findings) == ["xid-application", "xid-other", "xid-reset"]
    reset = by_code(findings, "xid-reset")[0]
    assert reset.evidence["xids"] == [48]
    assert reset.evidence["actions"]["48"]["immediate"] == "WORKFLOW_XID_48"
    assert "remap fails" in reset.evidence["actions"]["48"]["action"]
    assert "uncorrectable double bit error" in reset.evidence["lines"]["48"]
    other = by_code(findings, "xid-other")[0]
    assert other.evidence["xids"] == [63] and other.severity == "info"
    app = by_code(findings, "xid-application")[0]
    assert app.evidence["actions"]["94"]["immediate"] == "RESTART_APP"
    assert app.evidence["actions"]["94"]["investigatory"] == "IGNORE (sympathetic)"


def test_real_xid_lines_from_before_the_window_do_not_count():
    # The same real lines as printed (uptime 430954 s, days before the baseline's now): nothing.
    lines = real("dmesg-xid__xid48-63-94-dbe-row-remap-contained").splitlines()
    facts = PROBE.parse(with_kernel_lines(*lines))
    assert facts["xid_codes"] == []
    assert PROBE.check("gpu001", facts, context()) == []


def test_a_wider_window_from_the_params_brings_old_xids_back():
    # window_minutes 5000 in the params reaches the week-old XID 13: xid-application.
    assert codes(check(BASE, params={"window_minutes": 5000})) == ["xid-application"]


def test_a_narrower_window_threshold_applies_at_check_time():
    # A user threshold of 2 minutes drops an XID 79 that is 3 minutes old.
    assert check(with_kernel_lines(XID79), thresholds={"xid_window_minutes": 2}) == []


def test_real_fallen_off_bus_lines_without_an_xid():
    # The real "has fallen off the bus" lines (no XID), re-stamped as recent.
    lines = real("dmesg-xid__gpu-fallen-off-bus-old-laptop-driver").replace(
        "[   49.", f"[{NOW - 30:.0f}.").splitlines()
    findings = check(with_kernel_lines(*lines))
    assert codes(findings) == ["gpu-fallen-off-bus"]
    assert findings[0].evidence["pci"] == ["0000:01:00"]


def test_journalctl_monotonic_lines_are_read():
    # journalctl -k -o short-monotonic lines (with host name) carry the same uptime stamp.
    text = replace(BASE, kernel_log=(
        "source journalctl\n"
        f"[{NOW - 90:.6f}] gpu001 kernel: NVRM: Xid (PCI:0000:3b:00): 94, pid=77120, "
        "name=python3, Contained: SM (0x1). RST: No, D-RST: No\n"))
    facts = PROBE.parse(text)
    assert facts["kernel_log_source"] == "journalctl" and facts["xid_codes"] == [94]
    assert codes(PROBE.check("gpu001", facts, context())) == ["xid-application"]


@pytest.mark.parametrize("log", [
    # journalctl without permission prints a hint and no kernel line.
    "source journalctl\nHint: You are currently not seeing messages from other users and the "
    "system.\n",
    # Neither dmesg nor journalctl could be read.
    ("source none\ndmesg: read kernel buffer failed: Operation not permitted\n", 1),
])
def test_unreadable_kernel_log_is_not_measured(log):
    findings = check(replace(BASE, kernel_log=log))
    assert codes(findings) == ["not-measured"]
    assert findings[0].evidence["what"] == "XIDs in the kernel log"


def test_uncorrectable_ecc_on_one_gpu():
    # Volatile uncorrected ECC 2 on GPU3.
    rows = query_rows(BASE)
    text = edit(BASE, "query", rows[4], rows[4].replace("0x0000000000000000, 0,",
                                                        "0x0000000000000000, 2,"))
    findings = check(text)
    assert codes(findings) == ["ecc-uncorrectable"]
    assert findings[0].evidence["counts"] == {"GPU3": 2}


def test_real_remapped_rows_pending_sample():
    # The real A10 `nvidia-smi -q` with Pending: Yes as the remap section of a 1-GPU node.
    query = ("index, name, pci.bus_id, utilization.gpu [%], memory.used [MiB], "
             "memory.total [MiB], temperature.gpu, power.draw [W], clocks.current.sm [MHz], "
             "clocks_event_reasons.active, ecc.errors.uncorrected.volatile.total, "
             "retired_pages.pending\n"
             "0, NVIDIA A10, 00000000:07:00.0, 0 %, 4 MiB, 23028 MiB, 33, 15.86 W, 210 MHz, "
             "0x0000000000000001, 0, [N/A]\n")
    text = replace(BASE, query=query,
                   remap=real("nvidia-smi-q__1x-a10-driver535-remapped-rows-pending"),
                   pci="07:00.0 0302: 10de:2236 (rev a1)\n")
    facts = PROBE.parse(text)
    assert facts["remapped_rows_pending"] is True and facts["remapped_rows_failure"] is False
    assert facts["throttle_reasons"] == ["gpu_idle"]
    assert codes(PROBE.check("gpu001", facts, context())) == ["row-remap-pending"]


def test_row_remap_failure():
    # "Remapping Failure Occurred: Yes" on the first GPU.
    text = edit(BASE, "remap", "Remapping Failure Occurred        : No",
                "Remapping Failure Occurred        : Yes")
    facts = PROBE.parse(text)
    assert facts["remapped_rows_failure"] is True
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["row-remap-failure"]
    assert findings[0].evidence["gpus"] == ["GPU0"]


def test_gpu_gone_from_the_driver_but_on_the_pci_bus():
    # nvidia-smi lists 7 GPUs and says GPU4 is lost; lspci still counts 8.
    rows = query_rows(BASE)
    lost = "Unable to determine the device handle for GPU0000:9B:00.0: GPU is lost. Reboot the " \
           "system to recover this GPU"
    text = replace(BASE, query=("\n".join([lost, rows[0], *rows[1:5], *rows[6:]]) + "\n", 15))
    facts = PROBE.parse(text)
    assert facts["gpu_count"] == 7 and facts["gpu_lost"] == ["0000:9b:00"]
    assert codes(PROBE.check("gpu001", facts, context())) == ["gpu-fallen-off-bus", "gpu-missing"]


def test_fewer_gpus_than_expected_per_node():
    # 7 GPUs and no lspci, with expected_gpus_per_node 8.
    rows = query_rows(BASE)
    text = replace(BASE, query="\n".join(rows[:-1]) + "\n", pci=None)
    findings = check(text, thresholds={"expected_gpus_per_node": 8})
    assert codes(findings) == ["gpu-missing"]
    assert findings[0].evidence["expected"] == 8


def test_fewer_gpus_than_the_fleet_majority():
    # One host of four sees 7 GPUs (no lspci to tell): the fleet check names it.
    rows = query_rows(BASE)
    short = PROBE.parse(replace(BASE, query="\n".join(rows[:-1]) + "\n", pci=None))
    healthy = PROBE.parse(BASE)
    fleet = {"gpu001": healthy, "gpu002": healthy, "gpu003": short, "gpu004": healthy}
    findings = PROBE.check_fleet(fleet, context())
    assert codes(findings) == ["gpu-missing"] and findings[0].hosts == ("gpu003",)


def test_a_smaller_node_of_another_model_is_not_short_of_gpus():
    # A 4x L40S node walked with 8x H100 nodes (no expected count): compared with its own model
    # only, while an H100 node that sees 7 is still named.
    rows = query_rows(BASE)
    l40s = [f"{i}, NVIDIA L40S, 00000000:{b}:00.0, 98 %, 38517 MiB, 46068 MiB, 57, 301.27 W, "
            "350.00 W, 350.00 W, 2490 MHz, 2520 MHz, 0x0000000000000000, 0, [N/A]"
            for i, b in enumerate(("17", "31", "B1", "CA"))]
    small = PROBE.parse(replace(BASE, query="\n".join([rows[0], *l40s]) + "\n",
                                pci="".join(f"{b}:00.0 0302: 10de:26b9 (rev a1)\n"
                                            for b in ("17", "31", "b1", "ca")), remap=None))
    healthy = PROBE.parse(BASE)
    fleet = {"gpu001": healthy, "gpu002": healthy, "gpu003": small, "gpu004": healthy}
    assert PROBE.check("gpu003", small, context()) == []
    assert PROBE.check_fleet(fleet, context()) == []
    fleet["gpu005"] = PROBE.parse(replace(BASE, query="\n".join(rows[:-1]) + "\n", pci=None))
    findings = PROBE.check_fleet(fleet, context())
    assert codes(findings) == ["gpu-missing"] and findings[0].hosts == ("gpu005",)


def test_a_host_that_sees_no_gpu_is_held_to_the_commonest_model():
    # nvidia-smi finds no device and lspci is absent: no model, compared with the 8x H100 nodes.
    none = PROBE.parse(replace(BASE, query=("No devices were found\n", 6),
                               remap=("No devices were found\n", 6), pci=None))
    healthy = PROBE.parse(BASE)
    fleet = {"gpu001": healthy, "gpu002": healthy, "gpu003": none, "gpu004": healthy}
    findings = PROBE.check_fleet(fleet, context())
    assert codes(findings) == ["gpu-missing"] and findings[0].hosts == ("gpu003",)


def test_nvidia_smi_cannot_talk_to_the_driver():
    # The driver is not loaded: nothing measured, and the 8 GPUs on the bus count as missing.
    text = replace(BASE, query=(SMI_FAILED, 9), remap=(SMI_FAILED, 9))
    facts = PROBE.parse(text)
    assert facts["gpu_count"] is None
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["gpu-missing", "not-measured"]


def test_no_devices_found():
    # "No devices were found" is zero GPUs, not an unknown count.
    text = replace(BASE, query=("No devices were found\n", 6), remap=("No devices were found\n", 6))
    facts = PROBE.parse(text)
    assert facts["gpu_count"] == 0
    assert "gpu-missing" in codes(PROBE.check("gpu001", facts, context()))


def test_nvidia_smi_missing_is_not_measured():
    # No nvidia-smi and no lspci on the host: missing sections, one not-measured, no crash.
    text = replace(BASE, query=None, remap=None, pci=None)
    facts = PROBE.parse(text)
    assert facts["missing"] == ["query", "remap", "pci"]
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["not-measured"]
    assert "not installed" in findings[0].message


def test_old_driver_refuses_one_spelling_then_answers_the_other():
    # The first query fails with "not a valid field"; the retry's CSV follows it.
    rows = query_rows(BASE)
    rows[0] = rows[0].replace("clocks_throttle_reasons", "clocks_event_reasons")
    text = replace(BASE, query='Field "clocks_throttle_reasons.active" is not a valid field to '
                   "query.\n\n" + "\n".join(rows) + "\n")
    facts = PROBE.parse(text)
    assert facts["gpu_count"] == 8 and facts["throttle_reasons"] == []


@pytest.mark.parametrize(("mask", "expected"), [
    ("0x0000000000000040", ["gpu-throttle-thermal"]),  # HW thermal slowdown
    ("0x0000000000000020", ["gpu-throttle-thermal"]),  # SW thermal slowdown
    ("0x0000000000000008", ["gpu-throttle-thermal"]),  # HW slowdown alone: read as thermal
    ("0x0000000000000004", []),                        # SW power cap at the default limit
    ("0x0000000000000088", ["gpu-throttle-power"]),    # HW slowdown with power brake
    ("0x0000000000000080", ["gpu-throttle-power"]),    # HW power brake alone
    ("0x0000000000000001", []),                        # idle is no throttle
])
def test_throttle_reasons(mask, expected):
    rows = query_rows(BASE)
    text = edit(BASE, "query", rows[3], rows[3].replace("0x0000000000000000", mask))
    findings = check(text)
    assert codes(findings) == expected
    if expected:
        assert list(findings[0].evidence["gpus"]) == ["GPU2"]


def test_hot_gpu_at_full_clocks_is_running_hot_not_throttled():
    # 91 C on GPU1, no thermal slowdown, 1980 of 1980 MHz: gpu-running-hot (info), no drain.
    rows = query_rows(BASE)
    text = edit(BASE, "query", rows[2], rows[2].replace("81559 MiB, 58,", "81559 MiB, 91,"))
    findings = check(text)
    assert codes(findings) == ["gpu-running-hot"] and findings[0].severity == "info"
    assert findings[0].evidence["gpus"]["GPU1"] == {
        "temperature_c": 91, "sm_clock_mhz": 1980, "sm_clock_max_mhz": 1980}


def with_rows(text: str, change) -> str:
    """The query section with ``change(row) -> row`` applied to every GPU row."""
    for row in query_rows(text)[1:]:
        text = edit(text, "query", row, change(row))
    return text


def at_power_cap(row: str, limit: str = "700.00 W", clock: str = "1755 MHz") -> str:
    parts = row.split(", ")
    parts[8], parts[10], parts[12] = limit, clock, "0x0000000000000004"
    return ", ".join(parts)


def test_sw_power_cap_at_the_default_limit_is_normal_under_load():
    # Every GPU busy at the SW power cap with enforced == default 700 W: nothing to report.
    facts = PROBE.parse(with_rows(BASE, at_power_cap))
    assert facts["throttle_reasons"] == ["sw_power_cap"]
    assert facts["power_limit_w"] == 700 and facts["power_default_limit_w"] == 700
    assert PROBE.check("gpu001", facts, context()) == []
    fleet = {f"gpu00{i}": facts for i in range(1, 6)}
    assert PROBE.check_fleet(fleet, context()) == []


def test_a_limit_lowered_below_the_default_is_power_throttling():
    # Someone set 500 W on a 700 W board and the cap bites: gpu-throttle-power, per GPU.
    text = with_rows(BASE, lambda r: at_power_cap(r, limit="500.00 W", clock="1410 MHz"))
    findings = check(text)
    assert codes(findings) == ["gpu-throttle-power"]
    assert findings[0].evidence["cause"] == "limit-below-default"
    assert findings[0].evidence["gpus"]["GPU0"] == {"enforced_w": 500.0, "default_w": 700.0}


def test_a_limit_below_the_fleet_and_clocks_below_the_fleet_are_found_across_hosts():
    # A custom default on one host (limit 600 W as its default, so the host check is quiet)
    # is below the fleet's 700 W; another host at the cap clocks 25% below the fleet.
    normal = PROBE.parse(with_rows(BASE, at_power_cap))
    low_limit = PROBE.parse(with_rows(BASE, lambda r: at_power_cap(r, "600.00 W").replace(
        "600.00 W, 700.00 W", "600.00 W, 600.00 W")))
    slow = PROBE.parse(with_rows(BASE, lambda r: at_power_cap(r, clock="1305 MHz")))
    fleet = {"gpu001": normal, "gpu002": normal, "gpu003": normal, "gpu004": low_limit,
             "gpu005": slow}
    assert PROBE.check("gpu004", low_limit, context()) == []
    findings = PROBE.check_fleet(fleet, context())
    by_cause = {f.evidence["cause"]: f.hosts for f in findings if f.code == "gpu-throttle-power"}
    assert by_cause == {"limit-below-fleet": ("gpu004",), "clocks-below-fleet": ("gpu005",)}


def test_clocks_are_compared_with_hosts_of_the_same_gpu_model_only():
    # An A100 node at its 400 W cap clocks 1395 MHz, far below the H100 hosts' 1980 MHz: that
    # is its model, not a throttle. Among A100 hosts, the one at 1095 MHz is slow.
    def a100(clock: str):
        return lambda r: at_power_cap(r, "400.00 W", clock).replace(
            "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB").replace(
            "700.00 W, 1", "400.00 W, 1").replace("1980 MHz, 0x", "1410 MHz, 0x")
    h100 = PROBE.parse(BASE)
    fast, slow = PROBE.parse(with_rows(BASE, a100("1395 MHz"))), \
        PROBE.parse(with_rows(BASE, a100("1095 MHz")))
    assert fast["power_default_limit_w"] == 400 and fast["sm_clock_mhz"] == 1395
    mixed = {"gpu001": h100, "gpu002": h100, "gpu003": h100, "gpu004": fast}
    assert PROBE.check_fleet(mixed, context()) == []
    a100s = {**mixed, "gpu005": fast, "gpu006": fast, "gpu007": slow}
    findings = [f for f in PROBE.check_fleet(a100s, context()) if f.code == "gpu-throttle-power"]
    assert [(f.evidence["cause"], f.hosts) for f in findings] == \
        [("clocks-below-fleet", ("gpu007",))]
    assert findings[0].evidence["fleet_median_mhz"] == 1395


AZURE_BUSES = ["00000001:00:00.0", "00000002:00:00.0", "00000003:00:00.0", "00000004:00:00.0",
               "0000000B:00:00.0", "0000000C:00:00.0", "0000000D:00:00.0", "0000000E:00:00.0"]


def azure_domains(text: str) -> str:
    """The baseline with its GPUs in one PCI domain each, all on bus 00 (Azure ND A100 v4 /
    ND H100 v5 VMs: Azure/azurehpc experimental/gpu_optimizations/readme.md)."""
    buses = ["19", "3B", "4C", "5D", "9B", "BB", "CB", "DB"]
    for old, new in zip(buses, AZURE_BUSES, strict=True):
        text = text.replace(f"00000000:{old}:00.0", new)
        text = text.replace(f"PCI:0000:{old.lower()}:00", f"PCI:{new[4:8].lower()}:00:00")
    return text


def test_gpus_in_separate_pci_domains_keep_their_own_remap_state():
    # All eight GPUs are on bus 00 of their own domain: the remap flags and the XID labels
    # must follow the domain, not the bus (the bus alone names every GPU at once).
    text = azure_domains(BASE)
    remap = section_text(text, "remap")
    block = remap.index("GPU 00000003:00:00.0")
    pending = remap[:block] + remap[block:].replace("Pending                           : No",
                                                    "Pending                           : Yes", 1)
    facts = PROBE.parse(replace(text, remap=pending))
    assert [g["remapped_rows_pending"] for g in facts["gpus"]] == \
        [False, False, True, False, False, False, False, False]
    [pending_finding] = by_code(PROBE.check("gpu001", facts, context()), "row-remap-pending")
    assert pending_finding.evidence["gpus"] == ["GPU2"]
    # XID 79 of the GPU in domain 000B (index 4) names GPU4, not GPU0 (also on bus 00)
    facts = PROBE.parse(azure_domains(with_kernel_lines(XID79)))
    [drain] = by_code(PROBE.check("gpu001", facts, context()), "xid-drain")
    assert drain.evidence["gpus"] == ["GPU4 (000b:00:00)"]


def test_old_query_without_limit_columns_judges_no_power_cap():
    # Outputs recorded before the limit columns: limits unknown, SW power cap not accused.
    rows = query_rows(BASE)
    old = "\n".join(", ".join(p for i, p in enumerate(r.split(", ")) if i not in (8, 9, 11))
                    for r in rows)
    facts = PROBE.parse(with_rows(replace(BASE, query=old + "\n"), lambda r: r.replace(
        "0x0000000000000000", "0x0000000000000004")))
    assert facts["power_limit_w"] is None and facts["throttle_reasons"] == ["sw_power_cap"]
    assert PROBE.check("gpu001", facts, context()) == []


def test_low_utilization_while_a_job_holds_the_gpus():
    # Memory held by the job but the GPUs at 5%: gpu-low-utilization.
    text = BASE
    for row in query_rows(BASE)[1:]:
        util = row.split(", ")[3]
        text = edit(text, "query", row, row.replace(f", {util},", ", 5 %,"))
    assert codes(check(text)) == ["gpu-low-utilization"]


def test_idle_node_is_not_low_utilization():
    # No job (1 MiB used, as in the real idle nvidia-smi table): 0% is no finding.
    text = BASE
    for row in query_rows(BASE)[1:]:
        parts = row.split(", ")
        text = edit(text, "query", row, row.replace(f", {parts[3]}, {parts[4]},", ", 0 %, 1 MiB,"))
    assert check(text) == []


def test_utilization_outlier_in_the_fleet():
    # Five hosts near 98%, one at 45%: gpu-util-outlier names only that one.
    slow = BASE
    for row in query_rows(BASE)[1:]:
        util = row.split(", ")[3]
        slow = edit(slow, "query", row, row.replace(f", {util},", ", 45 %,"))
    healthy, odd = PROBE.parse(BASE), PROBE.parse(slow)
    fleet = {f"gpu00{i}": healthy for i in range(1, 6)} | {"gpu006": odd}
    findings = PROBE.check_fleet(fleet, context())
    assert codes(findings) == ["gpu-util-outlier"] and findings[0].hosts == ("gpu006",)


def test_findings_stay_within_the_catalog():
    # A node with everything wrong raises only gpu's catalog codes (and not-measured).
    rows = query_rows(BASE)
    text = with_kernel_lines(XID79, f"[{NOW - 5:.3f}] NVRM: Xid (PCI:0000:19:00): 13, pid=1, "
                             "name=x, Graphics Exception")
    text = edit(text, "query", rows[1], rows[1].replace("0x0000000000000000, 0,",
                                                        "0x00000000000000c8, 3,"))
    allowed = set(load_catalog().probes["gpu"].codes) | {"not-measured"}
    assert set(codes(check(text))) <= allowed


@pytest.mark.parametrize("text", [
    "",                                                     # nothing at all
    "Tue Jan 20 10:18:26 2025\n| NVIDIA-SMI 550.90.07 |\n",  # a foreign tool's output
    "=== diag:section kernel\n5.15.0\n=== diag:rc kernel 0\n",  # another probe's sections
])
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        PROBE.parse(text)


def test_garbled_query_section_is_a_parse_error():
    # A query section that exited 0 but holds no CSV is garbled, not "no GPUs".
    with pytest.raises(ParseError):
        PROBE.parse(replace(BASE, query="\x00\x01 garbage\n"))


# --- XIDs by NVIDIA's catalog (probes/xid_catalog.yaml) -----------------------------------

def xid_line(code: int, text: str, age_s: float = 120, pci: str = "0000:4c:00") -> str:
    return f"[{NOW - age_s:.6f}] NVRM: Xid (PCI:{pci}): {code}, {text}"


@pytest.mark.parametrize(("code", "finding", "bucket"), [
    (46, "xid-reset", "RESET_GPU"),          # GPU stopped processing
    (109, "xid-reset", "RESET_GPU"),         # context switch timeout
    (136, "xid-reset", "RESET_GPU"),         # link training failed
    (140, "xid-reset", "RESET_GPU"),         # ECC unrecovered error
    (143, "xid-reset", "RESET_GPU"),         # GPU initialization error
    (155, "xid-reset", "RESET_GPU"),         # NVLink SW defined error
    (156, "xid-reset", "RESET_GPU"),         # resource retirement event
    (157, "xid-other", "IGNORE"),            # resource retirement failure: IGNORE, then support
    (158, "xid-reset", "RESET_GPU"),         # GPU fatal timeout
    (48, "xid-reset", "WORKFLOW_XID_48"),    # a reset applies the row remap
    (95, "xid-reset", "RESET_GPU"),          # uncontained: reset
    (94, "xid-application", "RESTART_APP"),  # contained: restart the application
    (79, "xid-drain", "RESTART_BM"),         # off the bus: reboot
    (64, "xid-reset", "RESET_GPU"),          # remap failure: reset now, support after
])
def test_catalog_codes_that_used_to_fall_through(code, finding, bucket):
    # Codes the old hard-coded lists left in xid-other now carry the catalog's bucket.
    findings = [f for f in check(with_kernel_lines(xid_line(code, "pid=1, name=python3, x")))
                if f.code.startswith("xid-")]
    assert codes(findings) == [finding]
    assert findings[0].evidence["actions"][str(code)]["immediate"] == bucket
    assert findings[0].evidence["actions"][str(code)]["in_catalog"] is True


def test_real_xid109_lines_are_a_gpu_reset_with_the_catalog_investigation():
    # The five real XID 109 lines (no stamps: age unknown, so they count) give one xid-reset
    # finding saying to reset the GPU now and to contact support if it recurs.
    lines = real("dmesg-xid__xid109-ctx-switch-timeout-x5-rtx4090-no-timestamps").splitlines()
    findings = check(with_kernel_lines(*lines))
    reset = by_code(findings, "xid-reset")
    assert len(reset) == 1 and reset[0].evidence["count"] == 5
    assert "RESET_GPU" in reset[0].message and "CONTACT_SUPPORT" in reset[0].message
    assert "CTX SWITCH TIMEOUT" in reset[0].evidence["lines"]["109"]


def test_real_xid154_names_the_recovery_action_it_requires():
    # XID 154 "to 0x2 (OS Reboot)" is a reboot (drain); "to 0x1 (PF FLR)" a GPU reset.
    reboot = real("dmesg-xid__xid79-fallen-off-bus-then-xid154-recovery-os-reboot-geforce-gaming")
    flr = real("dmesg-xid__xid51-bad-tsg-then-xid154-recovery-pf-flr-reset-required")
    stamp = f"[{NOW - 60:.6f}] "
    on_reboot = check(with_kernel_lines(*(stamp + ln for ln in reboot.splitlines())))
    assert 154 in by_code(on_reboot, "xid-drain")[0].evidence["xids"]
    on_flr = check(with_kernel_lines(*(stamp + ln for ln in flr.splitlines())))
    assert by_code(on_flr, "xid-reset")[0].evidence["xids"] == [154]
    assert by_code(on_flr, "xid-drain")[0].evidence["xids"] == [51]  # unused code: support


def test_an_xid_the_catalog_does_not_know_is_still_a_finding_with_its_line():
    line = xid_line(201, "pid=4, name=python3, Something new happened (0xdead)")
    findings = check(with_kernel_lines(line))
    other = by_code(findings, "xid-other")
    assert len(other) == 1 and other[0].severity == "warning"
    assert other[0].evidence["unknown"] == [201]
    assert "not in NVIDIA's Xid catalog" in other[0].message
    assert "Something new happened (0xdead)" in other[0].message


def test_a_site_override_moves_a_code_to_another_bucket():
    # xid_overrides {13: CONTACT_SUPPORT}: the week-old XID 13 (wide window) now drains.
    findings = check(BASE, params={"window_minutes": 5000},
                     thresholds={"xid_overrides": {"13": "CONTACT_SUPPORT"}})
    assert codes(findings) == ["xid-drain"]
    assert findings[0].evidence["actions"]["13"]["overridden"] is True


def test_every_catalog_code_has_its_buckets_and_the_catalog_is_complete():
    # 172 codes as NVIDIA lists them; every bucket names a finding and an action.
    from probes import xid
    data = xid.catalog()
    assert sorted(data["codes"]) == list(range(1, 173))
    for code in data["codes"]:
        action = xid.classify(code)
        assert action.known and action.finding.startswith("xid-") and action.action


def test_a_bad_override_in_a_thresholds_file_is_refused(tmp_path):
    from probes.base import ThresholdsError, load_thresholds
    path = tmp_path / "t.yaml"
    path.write_text("xid_overrides: {13: REBOOT_PLEASE}\n")
    with pytest.raises(ThresholdsError, match=r"t.yaml:1: xid_overrides: 13: 'REBOOT_PLEASE'"):
        load_thresholds(path)
    path.write_text("xid_overrides: {13: CONTACT_SUPPORT}\n")
    assert load_thresholds(path)["xid_overrides"] == {"13": "CONTACT_SUPPORT"}
