"""The network probe's generic counter facts: every IB counter and every ethtool counter of
every fabric port, as the rise during the sample and the value at its end (port_counters)."""

from __future__ import annotations

from probes.network import PROBE
from probes.network_facts import command
from tests.probes.probe_outputs import ROOT, baseline, edit, real, replace, sections_of
from tests.probes.rdma_roce import ETHTOOL_SAMPLE, ethtool_text, kept_ethtool, network_roce

BASE = baseline("network")


def entry(facts: dict, key: str) -> dict:
    return next(e for e in facts["port_counters"] if e["key"] == key)


def test_baseline_every_ib_counter_of_every_port():
    # 21 IBA counters + 26 hw_counters per NDR port (the hw sample's six merged in)
    facts = PROBE.parse(BASE)
    assert [e["key"] for e in facts["port_counters"]] == [f"mlx5_{i}/1" for i in range(8)]
    port = entry(facts, "mlx5_0/1")
    assert (port["device"], port["port"], port["netdev"], port["link_layer"], port["state"]) == (
        "mlx5_0", 1, "ibp26s0", "InfiniBand", "Active")
    assert len(port["ib_total"]) == 47 and set(port["ib_delta"]) == set(port["ib_total"])
    assert port["ib_total"]["VL15_dropped"] == 0 and port["ib_delta"]["symbol_error"] == 0
    assert port["ib_delta"]["port_rcv_data"] == 14900094241  # data moved during the sample
    assert port["ib_delta"]["local_ack_timeout_err"] == 0  # from the hw sample
    assert port["eth_delta"] is None and port["eth_total"] is None  # InfiniBand: no netdev stats
    assert entry(facts, "mlx5_5/1")["ib_total"]["symbol_error"] == 3  # a total, no rise


def test_any_counter_rise_is_named_by_its_file():
    # a counter no check reads: port_rcv_switch_relay_errors +250 on mlx5_6
    path = "/sys/class/infiniband/mlx5_6/ports/1/counters/port_rcv_switch_relay_errors:"
    text = edit(BASE, "ib_2", f"{path}0\n", f"{path}250\n")
    port = entry(PROBE.parse(text), "mlx5_6/1")
    assert port["ib_delta"]["port_rcv_switch_relay_errors"] == 250
    assert port["ib_total"]["port_rcv_switch_relay_errors"] == 250


def test_hw_sample_counters_merge_into_the_port():
    path = "/sys/class/infiniband/mlx5_2/ports/1/hw_counters/local_ack_timeout_err:"
    text = edit(BASE, "hw_2", f"{path}0\n", f"{path}4\n")
    assert entry(PROBE.parse(text), "mlx5_2/1")["ib_delta"]["local_ack_timeout_err"] == 4


def test_counter_reset_between_samples_counts_from_zero():
    path = "/sys/class/infiniband/mlx5_5/ports/1/counters/symbol_error:"
    text = edit(BASE, "ib_2", f"{path}3\n", f"{path}1\n")
    assert entry(PROBE.parse(text), "mlx5_5/1")["ib_delta"]["symbol_error"] == 1


def test_unsampled_counters_are_unknown_not_zero():
    facts = PROBE.parse(replace(BASE, ib_2=None, hw_2=None))
    assert all(e["ib_delta"] is None and e["ib_total"] is None for e in facts["port_counters"])


def test_roce_port_every_ethtool_counter():
    # the real ethq mlx5 counters on a RoCE port: aggregate counters kept, per-ring ones not
    facts = PROBE.parse(network_roce(1, after={0: {"rx_oversize_pkts_phy": 9}}))
    port = entry(facts, "mlx5_0/1")
    assert port["link_layer"] == "Ethernet" and port["netdev"] == "enp26s0np0"
    assert port["eth_delta"]["rx_oversize_pkts_phy"] == 9  # absent (0) before: rose from 0
    assert port["eth_delta"]["rx_packets_phy"] == 1_000_000
    assert port["eth_total"]["tx_pci_signal_integrity"] == 34  # the real sample's, flat
    assert port["eth_delta"]["tx_pci_signal_integrity"] == 0
    assert not any(name.startswith(("rx0_", "tx0_", "ch0_")) for name in port["eth_total"])
    assert port["eth_total"]["rx_discards_phy"] == 0  # kept at 0: the checks sum it
    assert "rx_lro_packets" not in port["eth_total"]  # 0, left out by the script


def test_a_counter_gone_back_to_zero_was_reset():
    facts = PROBE.parse(network_roce(1, before={0: {"rx_crc_errors_phy": 40}}))
    port = entry(facts, "mlx5_0/1")
    assert port["eth_delta"]["rx_crc_errors_phy"] == 0
    assert port["eth_total"]["rx_crc_errors_phy"] == 0


def test_ethtool_missing_leaves_the_netdev_counters_unknown():
    facts = PROBE.parse(replace(network_roce(1), eth_1=None, eth_2=None))
    port = entry(facts, "mlx5_0/1")
    assert port["eth_delta"] is None and port["ib_delta"] is not None


def test_script_filter_on_the_real_mlx5_listing():
    # the script's own grep | awk over the real 751-line ethq listing: 64 lines survive
    kept = kept_ethtool(real(ETHTOOL_SAMPLE))
    names = [line.split(":")[0].strip() for line in kept.splitlines()]
    assert len(names) == 64 and "rx0_packets" not in names and "rx_packets" in names
    assert "tx_pause_ctrl_phy" in names and "module_unplug" not in names
    assert kept_ethtool(ethtool_text({"rx0_bytes": 5, "[0]: rx_ucast_packets": 7})) == \
        "NIC statistics:\n"


def test_script_samples_every_counter_file_once():
    script = command({})
    assert script.count("/sys/class/infiniband/*/ports/*/hw_counters/*") == 4  # ib and hw, x2
    section = script.split("=== diag:section ib_1")[1].split("=== diag:rc ib_1")[0]
    assert "grep -vE '/hw_counters/(local_ack_timeout_err|" in section and "head -n" in section


def test_old_outputs_with_the_filtered_ib_sample_still_parse():
    # a recorded scenario output from before the generic sample (a dozen counters per port)
    old = (ROOT / "fixtures/scenarios/hang-healthy-unused-eth-ports/outputs/"
           "network-unused-eth-ports-down.txt").read_text()
    facts = PROBE.parse(old)
    ib = [e for e in facts["port_counters"] if e["link_layer"] == "InfiniBand"]
    assert len(ib) == 8 and all("symbol_error" in e["ib_total"] for e in ib)
    assert "VL15_dropped" not in ib[0]["ib_total"]  # not sampled then: unknown, not 0
    down = [e for e in facts["port_counters"] if e["state"] == "Down"]
    assert down and all(not e["ib_total"] and e["eth_delta"] is None for e in down)


def _without_port(text: str, key: str) -> str:
    prefix = f"/sys/class/infiniband/{key.replace('/', '/ports/')}/"
    for name in ("ib_1", "ib_2"):
        body = sections_of(text)[name]
        body = body[0] if isinstance(body, tuple) else body
        kept = "".join(line for line in str(body).splitlines(True) if prefix not in line)
        text = replace(text, **{name: kept})
    return text


def test_active_port_without_counters_is_not_measured():
    # the listing cut at its line bound (many SR-IOV functions) before mlx5_7: its errors are
    # not measured, which the checks say instead of passing it as clean
    from probes.base import Context, default_thresholds
    from probes.network_checks import check

    facts = PROBE.parse(_without_port(BASE, "mlx5_7/1"))
    assert facts["ports_unsampled"] == ["mlx5_7/1"]
    found = check("h1", facts, Context(thresholds=default_thresholds()))
    assert any(f.code == "not-measured" and "mlx5_7/1" in f.message for f in found)
    assert PROBE.parse(BASE)["ports_unsampled"] == []


def test_counters_of_a_device_without_pma_are_left_out():
    # kernel sysfs.c show_pma_counter: "N/A (no PMA)" on a device without process_mad; the
    # other ports' counters are still read (it used to make the whole probe a parse error)
    na = "".join(f"/sys/class/infiniband/rxe0/ports/1/counters/{n}:N/A (no PMA)\n"
                 for n in ("VL15_dropped", "link_downed", "symbol_error"))
    text = BASE
    for name in ("ib_1", "ib_2"):
        body = sections_of(text)[name]
        text = replace(text, **{name: str(body[0] if isinstance(body, tuple) else body) + na})
    facts = PROBE.parse(text)
    assert "rxe0/1" not in {e["key"] for e in facts["port_counters"]}
    assert facts["symbol_error_delta"] == 0
