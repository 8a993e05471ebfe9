"""The network probe's link flap history (kernel log, link_downed totals) and its RDMA
hw_counters (retransmits, congestion): issue 11 items 11 and 12."""

from __future__ import annotations

import pytest

from probes.network import PROBE
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

BASE = baseline("network")
NOW = 1209631.42  # the baseline's /proc/uptime


def check(text: str, **ctx) -> list:
    return PROBE.check("gpu001", PROBE.parse(text), context(**ctx))


def with_log(*lines: str, text: str = BASE) -> str:
    return replace(text, link_log="source dmesg\n" + "".join(line + "\n" for line in lines))


def ib_line(ago_s: float, state: str, pci: str = "0000:5e:00.0", port: int = 1) -> str:
    return f"[{NOW - ago_s:.6f}] mlx5_core {pci}: Port: {port} Link {state}"


def set_hw(text: str, section: str, ca: str, name: str, value: int) -> str:
    path = f"/sys/class/infiniband/{ca}/ports/1/hw_counters/{name}:"
    line = next(x for x in section_text(text, section).splitlines() if x.startswith(path))
    return edit(text, section, line + "\n", f"{path}{value}\n")


def set_total(text: str, ca: str, name: str, value: int) -> str:
    for section in ("ib_1", "ib_2"):
        path = f"/sys/class/infiniband/{ca}/ports/1/counters/{name}:"
        line = next(x for x in section_text(text, section).splitlines() if x.startswith(path))
        text = edit(text, section, line + "\n", f"{path}{value}\n")
    return text


def test_script_reads_the_history_and_the_hw_counters():
    script = PROBE.command({})
    assert sh_accepts(script).returncode == 0, sh_accepts(script).stderr
    assert "hw_counters/*" in script and "local_ack_timeout_err" in script
    assert "dmesg" in script and '--since "-6h"' in script and "link_window_hours 6" in script
    assert '--since "-24h"' in PROBE.command({"link_window_hours": 24})


def test_baseline_history_is_quiet():
    facts = PROBE.parse(BASE)
    assert facts["link_log_readable"] is True and facts["link_flap_events"] == 0
    # one link_downed on mlx5_2 since the counters were reset (a boot, long ago): no finding
    assert facts["link_downed_total"] == 1 and facts["retransmit_delta"] == 0
    assert facts["retransmit_rate_per_s"] == 0 and facts["hw_counter_deltas"] == {}
    assert PROBE.check("gpu001", facts, context()) == []


def test_a_port_that_flapped_and_came_back_is_found():
    # mlx5_3 (0000:5e:00.0) went down twice 2-3 h ago and is Active again: counters flat
    # now, the kernel log remembers. Two events: a warning; the port's state is reported.
    text = with_log(ib_line(10900, "DOWN"), ib_line(10880, "ACTIVE"),
                    ib_line(7300, "DOWN"), ib_line(7290, "INIT"), ib_line(7285, "ACTIVE"))
    findings = check(text)
    assert codes(findings) == ["ib-link-flapped"]
    assert findings[0].severity == "warning"
    assert findings[0].evidence["ports"] == {"mlx5_3/1": 2}
    assert "Active now" in findings[0].message


def test_flapping_at_the_threshold_is_an_error():
    lines = [ib_line(3600 - 60 * i, "DOWN") for i in range(3)]
    assert check(with_log(*lines))[0].severity == "error"


@pytest.mark.parametrize("lines", [
    # boot: every port trains down and up in the first minute after the node starts
    [f"[    {9 + i}.120000] mlx5_core {pci}: Port: 1 Link DOWN" for i, pci in
     enumerate(["0000:1a:00.0", "0000:3c:00.0", "0000:5e:00.0"])],
    # older than the 6 h window
    [ib_line(8 * 3600, "DOWN"), ib_line(8 * 3600 - 20, "ACTIVE")],
    # the management NIC, not a fabric port
    [f"[{NOW - 600:.6f}] igb 0000:02:00.0 eno1: Link down"],
])
def test_boot_old_and_non_fabric_link_events_are_not_flaps(lines):
    assert check(with_log(*lines)) == []


def test_real_boot_sample_lines_are_boot_settle_not_flaps():
    # the real ConnectX-6 boot log (down at 5 s, up at 21 s) on a fabric netdev: boot, quiet
    lines = real("dmesg-link__cx6-ocp3-200g-grep-mlx5-core-boot-pcie-gen3-limited-link-down-"
                 "then-up").replace("enp1s0np0", "ibp94s0").splitlines()
    assert check(with_log(*lines)) == []


def test_real_netdev_lines_restamped_as_recent_count_on_their_rdma_port():
    # the real workstation lines, mapped to a fabric netdev and 40 minutes old
    line = real("dmesg-link__workstation-dmesg-tail-mlx5-dual-port-link-down-ixgbe-up-usb-"
                "noise").splitlines()[1]
    line = line.replace("[18865.848172]", f"[{NOW - 2400:.6f}]").replace(
        "enp1s0f0np0", "ibp204s0")
    findings = check(with_log(line))
    assert codes(findings) == ["ib-link-flapped"]
    assert findings[0].evidence["ports"] == {"mlx5_6/1": 1}


def test_unreadable_kernel_log_is_not_measured():
    text = replace(BASE, link_log=("source none\ndmesg: read kernel buffer failed: Operation "
                                   "not permitted\n", 1))
    findings = check(text)
    assert codes(findings) == ["not-measured"]
    assert "link down/up history" in findings[0].message


def test_link_downed_total_far_above_the_fleet_is_history_not_a_drain():
    # gpu005's mlx5_3 counted 4 link_downed since the counters were reset, its peers none
    # there (1 on mlx5_2 everywhere, as in the baseline). Its kernel log shows no link down in
    # the window: the flap cannot be dated (last month's, never cleared?), so it is reported
    # as history (info) with what to check, and ib-link-flapped (which drains) is not raised.
    flapped = PROBE.parse(set_total(BASE, "mlx5_3", "link_downed", 4))
    assert flapped["link_downed_total"] == 5
    assert PROBE.check("gpu005", flapped, context()) == []  # no rise during the sample
    fleet = {f"gpu00{i}": PROBE.parse(BASE) for i in range(1, 5)} | {"gpu005": flapped}
    findings = PROBE.check_fleet(fleet, context())
    assert [(f.code, f.hosts, f.severity) for f in findings] == [
        ("ib-link-downed-history", ("gpu005",), "info")]
    assert findings[0].evidence["per_port"]["gpu005"]["mlx5_3/1"] == {
        "link_downed": 4, "link_error_recovery": 0}
    assert "dmesg -T" in findings[0].message


def test_link_downed_total_with_a_dated_flap_is_not_reported_twice():
    # the kernel log dates gpu005's flap: ib-link-flapped per host, no history finding too
    text = with_log(ib_line(7300, "DOWN"), ib_line(7285, "ACTIVE"),
                    text=set_total(BASE, "mlx5_3", "link_downed", 4))
    fleet = {f"gpu00{i}": PROBE.parse(BASE) for i in range(1, 5)} | {"gpu005": PROBE.parse(text)}
    assert PROBE.check_fleet(fleet, context()) == []
    assert codes(PROBE.check("gpu005", fleet["gpu005"], context())) == ["ib-link-flapped"]


def test_equal_link_downed_totals_across_the_fleet_are_normal():
    # every host counted one link_downed per port at its last boot: nobody stands out
    text = BASE
    for i in range(8):
        text = set_total(text, f"mlx5_{i}", "link_downed", 1)
    fleet = {f"gpu00{i}": PROBE.parse(text) for i in range(1, 6)}
    assert PROBE.check_fleet(fleet, context()) == []


# --- hw_counters: retransmits and congestion -----------------------------------------------

def test_ack_timeouts_are_retransmits_with_a_rate():
    text = set_hw(BASE, "hw_2", "mlx5_2", "local_ack_timeout_err", 3)
    facts = PROBE.parse(text)
    assert facts["ack_timeout_delta"] == 3 and facts["retransmit_rate_per_s"] == 1.0
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["rdma-retransmits"]
    assert findings[0].evidence["ports"] == {"mlx5_2/1": {"local_ack_timeout_err": 3}}
    assert findings[0].severity == "error"


def test_rnr_retries_exhausted_are_the_peers_application_not_fabric_retransmits():
    # RNR NAK: the responder had no receive buffer posted (its rank exited or stalled); the
    # path lost nothing, so no fabric ticket is opened on this host (IBA "Receiver Not Ready")
    text = set_hw(BASE, "hw_2", "mlx5_2", "rnr_nak_retry_err", 7)
    facts = PROBE.parse(text)
    assert facts["rnr_retry_delta"] == 7 and facts["retransmit_delta"] == 0
    assert "rdma-retransmits" not in codes(PROBE.check("gpu001", facts, context()))


@pytest.mark.parametrize(("delta", "expected"), [(40, []), (600, ["rdma-retransmits"])])
def test_sequence_errors_count_above_their_threshold(delta, expected):
    text = set_hw(BASE, "hw_2", "mlx5_5", "packet_seq_err", delta)
    assert codes(check(text)) == expected


def test_out_of_order_packets_far_above_the_peers_are_retransmits():
    # adaptive routing gives every host some out_of_sequence; one host far above the rest
    def ooo(n: int) -> str:
        return set_hw(set_hw(BASE, "hw_1", "mlx5_1", "out_of_sequence", 1000),
                      "hw_2", "mlx5_1", "out_of_sequence", 1000 + n)
    fleet = {f"gpu00{i}": PROBE.parse(ooo(30 + i)) for i in range(1, 6)}
    fleet["gpu006"] = PROBE.parse(ooo(9000))
    assert all(PROBE.check(h, f, context()) == [] for h, f in fleet.items())
    findings = PROBE.check_fleet(fleet, context())
    assert [(f.code, f.hosts) for f in findings] == [("rdma-retransmits", ("gpu006",))]


def test_roce_cnps_far_above_the_peers_are_congestion_and_equal_ones_are_not():
    from tests.probes.probe_outputs import ROOT
    roce = (ROOT / "fixtures/scenarios/low-bandwidth-pfc-storm/outputs/network-roce.txt"
            ).read_text()
    normal = PROBE.parse(roce)
    assert normal["cnp_delta"] > 0  # heavy traffic: DCQCN at work everywhere
    busy = set_hw(roce, "hw_2", "mlx5_4", "np_cnp_sent", 9_000_000)
    fleet = {f"gpu00{i}": normal for i in range(1, 6)}
    assert [f for f in PROBE.check_fleet(fleet, context()) if f.code == "roce-congestion"] == []
    fleet["gpu006"] = PROBE.parse(busy)
    findings = [f for f in PROBE.check_fleet(fleet, context()) if f.code == "roce-congestion"]
    assert [f.hosts for f in findings] == [("gpu006",)]
