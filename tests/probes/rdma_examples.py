"""A fault and a healthy twin for every predicate signature of probes/faults/ib-ports.yaml and
roce.yaml, as whole probe outputs built from the baseline and the RoCE hosts of rdma_roce.

``EXAMPLES`` is what test_faults_rdma.py judges; ``as_sections`` turns an example into the
sections that differ from the component's baseline (fixtures/scenarios/_baseline/PROBE.txt),
the shape scenarios are made from. ``others: twin`` marks a drift signature: the other hosts of
the fleet run the twin's output (three at least, so the fleet has a majority).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.probes.probe_outputs import baseline, edit, section_text, sections_of
from tests.probes.rdma_roce import ethtool_counters, network_roce, qos_text, rdma_roce

NET = baseline("network")


def _ib_bump(name: str, by: int, ca: str = "mlx5_4", hw: bool = False) -> str:
    """The baseline network output with one IB counter of *ca* risen by *by* in ib_2."""
    where = "hw_counters" if hw else "counters"
    path = f"/sys/class/infiniband/{ca}/ports/1/{where}/{name}:"
    line = next(x for x in section_text(NET, "ib_2").splitlines() if x.startswith(path))
    return edit(NET, "ib_2", line + "\n", f"{path}{int(line.rsplit(':', 1)[1]) + by}\n")


def _ib_total(name: str, value: int, ca: str = "mlx5_4", hw: bool = False) -> str:
    """The baseline with one IB counter at *value* in both samples (a total, no rise)."""
    where = "hw_counters" if hw else "counters"
    path = f"/sys/class/infiniband/{ca}/ports/1/{where}/{name}:"
    text = NET
    for section in ("ib_1", "ib_2"):
        line = next(x for x in section_text(text, section).splitlines() if x.startswith(path))
        text = edit(text, section, line + "\n", f"{path}{value}\n")
    return text


def _eth(name: str, total: int, rise: int) -> tuple[str, str]:
    """A one-port RoCE network output where *name* rises by *rise*, and its twin at *total*."""
    start = {0: {name: total}}
    fault = network_roce(1, before=start, after={0: {name: total + rise}})
    twin = network_roce(1, before=start, after=start)
    return fault, twin


def _build() -> list[dict[str, Any]]:
    ex: list[dict[str, Any]] = []

    def add(signature: str, probe: str, fault: str, twin: str, others: bool = False) -> None:
        ex.append({"signature": signature, "probe": probe, "fault": fault, "twin": twin,
                   "others": "twin" if others else None})

    # ib-ports: IBA counters and hw_counters rising on one NDR port of the baseline node
    add("ib-switch-relay-errors", "network", _ib_bump("port_rcv_switch_relay_errors", 4000),
        _ib_total("port_rcv_switch_relay_errors", 1))
    add("ib-constraint-errors", "network", _ib_bump("port_rcv_constraint_errors", 650),
        _ib_total("port_rcv_constraint_errors", 650))
    add("ib-vl15-dropped", "network", _ib_bump("VL15_dropped", 300), _ib_total("VL15_dropped", 12))
    add("rdma-cqe-errors", "network", _ib_bump("req_cqe_error", 8, hw=True),
        _ib_bump("req_cqe_flush_error", 512, hw=True))
    add("rdma-remote-access-errors", "network", _ib_bump("req_remote_access_errors", 3, hw=True),
        _ib_total("req_remote_access_errors", 3, hw=True))
    add("rdma-local-length-errors", "network", _ib_bump("resp_local_length_error", 2, hw=True),
        _ib_total("resp_local_length_error", 2, hw=True))
    add("ib-active-mtu-drift", "rdma",
        edit(baseline("rdma"), "devinfo", "active_mtu:\t\t4096 (5)", "active_mtu:\t\t2048 (4)", 8),
        baseline("rdma"), others=True)

    # roce: physical-port counters (ethtool -S) of one RoCE port
    for sig, name, total, rise in (
            ("roce-mtu-mismatch-peer", "rx_oversize_pkts_phy", 17, 2400),
            ("roce-fcs-errors", "rx_crc_errors_phy", 3, 41),
            ("roce-symbol-errors", "rx_pcs_symbol_err_phy", 0, 18),
            ("roce-link-down-events", "link_down_events_phy", 1, 1),
            ("roce-module-fault", "module_high_temp", 0, 1),
            ("roce-tx-discards", "tx_discards_phy", 120, 25000),
            ("nic-pci-signal-integrity", "tx_pci_signal_integrity", 34, 9),
            ("nic-pci-buffer-overflow", "outbound_pci_buffer_overflow", 0, 5120)):
        fault, twin = _eth(name, total, rise)
        add(sig, "network", fault, twin)
    add("roce-icrc-errors", "network",
        network_roce(1, ib_after={0: {"rx_icrc_encapsulated": 77}}), network_roce(1))

    # roce: link-layer settings of the rdma probe
    add("roce-active-mtu-below-4096", "rdma", rdma_roce(netdev_mtu=1500, active_mtu=1024),
        rdma_roce(only={1: {"state": "1: DOWN", "active_mtu": 1024}}))
    add("roce-active-mtu-drift", "rdma", rdma_roce(netdev_mtu=3000, active_mtu=2048),
        rdma_roce(), others=True)
    add("roce-netdev-mtu-drift", "rdma", rdma_roce(netdev_mtu=4200), rdma_roce(), others=True)
    add("roce-no-v2-ipv4-gid", "rdma", rdma_roce(only={1: {"gids": (0, 1)}}),
        rdma_roce(only={1: {"gids": (0, 1, 2, 3)}}))
    add("roce-gid-index-drift", "rdma", rdma_roce(gids=(0, 1, 2, 3, 4, 5), ipv4_from=4),
        rdma_roce(), others=True)
    add("roce-pfc-not-on-roce-priority", "rdma",
        rdma_roce(qos=qos_text(pfc="0   0   0   1   0   0   0   0"), tc="Global tclass=0"),
        rdma_roce())
    add("roce-trust-pcp-with-pfc", "rdma", rdma_roce(qos=qos_text(trust="pcp"), tc=None),
        rdma_roce(qos=qos_text(trust="pcp"), tc=None, vlan=100))
    add("roce-pfc-drift", "rdma", rdma_roce(qos=qos_text(pfc="0   0   0   1   1   0   0   0")),
        rdma_roce(), others=True)
    add("roce-trust-drift", "rdma", rdma_roce(qos=qos_text(trust="pcp"), tc=None),
        rdma_roce(tc=None), others=True)
    add("roce-ecn-off-on-roce-priority", "rdma", rdma_roce(ecn_np="11101111"),
        rdma_roce(ecn_np="01111111", ecn_rp="01111111"))
    add("roce-ecn-drift", "rdma", rdma_roce(ecn_rp="00000000"), rdma_roce(), others=True)
    add("roce-global-pause-drift", "rdma", rdma_roce(pause=("on", "on")), rdma_roce(),
        others=True)
    add("roce-traffic-class-drift", "rdma", rdma_roce(tc="Global tclass=96"), rdma_roce(),
        others=True)
    return ex


EXAMPLES: list[dict[str, Any]] = _build()


def as_sections(text: str, probe: str) -> dict[str, str]:
    """The sections of *text* that differ from *probe*'s baseline output (text only)."""
    base = sections_of(baseline(probe))
    mine = sections_of(text)
    out = {}
    for name, spec in mine.items():
        if base.get(name) != spec:
            out[name] = spec[0] if isinstance(spec, tuple) else ("" if spec is None else spec)
    return out


HEALTHY_ROCE: dict[str, Callable[[], str]] = {
    "rdma": rdma_roce,
    "network": lambda: network_roce(1),
}


def real_counter_names() -> set[str]:
    """The ethtool counter names of the real mlx5 sample (what eth_delta keys look like)."""
    return set(ethtool_counters())
