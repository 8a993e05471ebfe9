"""RDMA retransmit counters of other drivers than mlx5 (probes/rdma_counters.py): mlx4's and
bnxt_re's names are read as the same events; a port whose driver publishes none (irdma, EFA,
a soft device) is "not measured", never healthy and never a fault."""

from __future__ import annotations

import re

from probes.network import PROBE
from probes.rdma_counters import GREP_ERE
from tests.probes.probe_outputs import baseline, codes, context, replace, section_text

BASE = baseline("network")

IRDMA = "CA 'irdma0'\n\tCA type: \n" + """\tNumber of ports: 1
\tFirmware version: 1.57
\tHardware version: 2
\tNode GUID: 0x6a05cafffe0b1c20
\tSystem image GUID: 0x6a05cafffe0b1c20
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 100
\t\tBase lid: 1
\t\tLMC: 0
\t\tSM lid: 0
\t\tCapability mask: 0x00050000
\t\tPort GUID: 0x6a05cafffe0b1c20
\t\tLink layer: Ethernet
"""


def _not_measured(findings: list) -> list[str]:
    return [f.evidence["what"] for f in findings if f.code == "not-measured"]


def test_the_grep_keeps_mlx4_and_bnxt_re_retransmit_files():
    for name in ("sq_num_to", "sq_num_oos", "rq_num_oos", "to_retransmits",
                 "seq_err_naks_rcvd", "oos_drop_count", "local_ack_timeout_err"):
        assert re.search(GREP_ERE, f"/sys/class/infiniband/x/ports/1/hw_counters/{name}:1")


def test_the_baseline_rails_are_measured():
    facts = PROBE.parse(BASE)
    assert facts["retransmit_unmeasured"] == []
    assert not [w for w in _not_measured(PROBE.check("gpu001", facts, context()))
                if "retransmit" in w]


def test_an_irdma_port_without_retransmit_counters_is_not_measured_not_healthy():
    text = replace(BASE, ibstat=section_text(BASE, "ibstat") + IRDMA)
    facts = PROBE.parse(text)
    assert facts["retransmit_unmeasured"] == ["irdma0/1"]
    findings = PROBE.check("gpu001", facts, context())
    assert "rdma-retransmits" not in codes(findings)
    hit = [f for f in findings if f.code == "not-measured" and "retransmit" in f.evidence["what"]]
    assert len(hit) == 1 and "irdma0/1" in hit[0].evidence["why"]
    assert hit[0].severity not in ("error", "critical")


def test_unreadable_hw_counters_leave_every_active_rail_not_measured():
    text = replace(BASE, hw_1="", hw_2="")
    facts = PROBE.parse(text)
    assert len(facts["retransmit_unmeasured"]) == 8 and facts["retransmit_delta"] is None
    findings = PROBE.check("gpu001", facts, context())
    assert "rdma-retransmits" not in codes(findings)
    assert any(w == "RDMA retransmits of 8 Active port(s)" for w in _not_measured(findings))


def _efa_devinfo(count: int) -> str:
    # ibv_devinfo -v of an EFA device as the script greps it (efa_verbs.c efa_query_port:
    # always PORT_ACTIVE, LinkUp, 4X EDR; devinfo.c prints link_layer "Unspecified")
    return "".join(
        f"hca_id:\tefa_{i}\n\tsys_image_guid:\t\t\t0000:0000:0000:0000\n"
        f"\tvendor_part_id:\t\t\t61344\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
        f"\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t25.0 Gbps (32)\n"
        f"\t\t\tphys_state:\t\tLINK_UP (5)\n\t\t\tlink_layer:\t\tUnspecified\n"
        for i in range(count))


def _efa_hw(count: int, value: int) -> str:
    names = ("tx_bytes", "rx_bytes", "rx_drops", "rdma_read_resp_bytes", "retrans_pkts",
             "retrans_timeout_events")
    return "".join(f"/sys/class/infiniband/efa_{i}/ports/1/hw_counters/{n}:{value}\n"
                   for i in range(count) for n in names)


def test_an_efa_host_has_no_iba_error_counters_and_no_comparable_retransmits():
    # EFA has no PMA (no ports/1/counters) and an SRD transport: its symbol errors and RC
    # retransmits are not measured, never zero; its own counters stay in port_counters
    text = replace(BASE, ibstat=None, devinfo=_efa_devinfo(2), netdev="", ifflags="",
                   ib_1=_efa_hw(2, 10), ib_2=_efa_hw(2, 25), hw_1="", hw_2="")
    facts = PROBE.parse(text)
    assert facts["ports_active"] == 2 and facts["symbol_error_delta"] is None
    assert facts["retransmit_unmeasured"] == ["efa_0/1", "efa_1/1"]
    counters = {p["key"]: p["ib_delta"] for p in facts["port_counters"]}
    assert counters["efa_0/1"]["retrans_pkts"] == 15
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["not-measured", "not-measured"]
    assert any("EFA" in f.evidence["why"] for f in findings)


def test_a_bare_bnxt_re_listing_is_an_hw_counters_listing():
    # "name:value" lines from inside a bnxt_re hw_counters directory (hw_counters.c names):
    # read as counters, not refused as "no known hw_counters name"
    from probes.parsers import parse
    text = "rx_pkts:120\nto_retransmits:3\nseq_err_naks_rcvd:0\noos_drop_count:0\n"
    assert parse("ib-hw-counters", text)["ports"][0]["counters"]["to_retransmits"] == 3


def test_the_azure_vf_is_read_as_the_slave_of_the_netvsc_nic():
    # Azure docs' ip link of an accelerated-networking VM: the VF "SLAVE ... master eth0"
    from probes.rdma_gid import _masters
    links = ("2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP mode "
             "DEFAULT group default qlen 1000\\    link/ether 00:0d:3a:00:bd:77\n"
             "3: enP1328s1: <BROADCAST,MULTICAST,SLAVE,UP,LOWER_UP> mtu 1500 qdisc mq master "
             "eth0 state UP mode DEFAULT group default qlen 1000\\    link/ether "
             "00:0d:3a:00:bd:77\n")
    assert _masters(links) == {"eth0": None, "enP1328s1": "eth0"}


def test_nccl_s_link_local_rule_is_the_fe80_64_prefix():
    # NCCL net_ib.cc linkLocalGid: s6_addr32[0] == fe800000 and s6_addr32[1] == 0
    from probes.rdma_gid import _link_local
    assert _link_local("fe80:0000:0000:0000:5c25:73ff:fe00:0000")
    assert not _link_local("0000:0000:0000:0000:0000:ffff:0a01:000b")
    assert not _link_local("fe80:0000:0000:0001:5c25:73ff:fe00:0000")
