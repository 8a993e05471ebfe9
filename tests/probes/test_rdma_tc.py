"""The RoCE port's default traffic class as MLNX_OFED prints it (mlx5_ib qos.c traffic_class_show):
"Global tclass=N" when a global class is set (it overrides every QP's class), then a line per
per-address rule ("src_ip=A,dst_ip=B/L,tclass=N"), which applies only where no global class is
set. A rule's class (or the digits of its addresses) is not the port's default class.
"""

from __future__ import annotations

import pytest

from probes.base import default_thresholds, get_probe
from probes.faults.apply import judge
from tests.probes.rdma_roce import rdma_roce

# the script keeps two lines of the file, joined by spaces
GLOBAL_AND_RULE = "Global tclass=106 src_ip=10.1.0.11,dst_ip=10.2.0.0/16,tclass=0"
RULE_ONLY = "dst_ip=10.2.0.0/16,tclass=106"


def _tcs(text: str) -> set[object]:
    return {p["tc"] for p in get_probe("rdma").parse(text)["ports"]}


@pytest.mark.parametrize("tc, expect", [
    ("Global tclass=106", 106), ("106", 106), (GLOBAL_AND_RULE, 106), ("tclass=-1", None),
    ("", None), (RULE_ONLY, None),
    # cat's own error, kept by the script's 2>&1: not a class (the old parser took the port
    # number 1 of the path for one)
    ("cat: /sys/class/infiniband/mlx5_0/tc/1/traffic_class: Permission denied", None),
    ("src_ip6=2001:0db8:0000:0000:0000:0000:0000:0011,dst_ip6=2001:0db8:0000:0000:0000:0000:"
     "0000:0012,tclass=96", None),
])
def test_the_default_traffic_class_is_the_global_one(tc: str, expect: object) -> None:
    assert _tcs(rdma_roce(tc=tc)) == {expect}


def test_a_per_address_rule_beside_the_global_class_accuses_nobody() -> None:
    # global 106 (DSCP 26 -> priority 3, PFC on 3): a rule giving class 0 to one subnet is not
    # the class RoCE runs on, since the global one overrides it
    hosts = {h: rdma_roce(tc=GLOBAL_AND_RULE if h == "gpu001" else "Global tclass=106")
             for h in ("gpu001", "gpu002", "gpu003", "gpu004")}
    parse = get_probe("rdma").parse
    found = judge("rdma", {h: parse(t) for h, t in hosts.items()}, default_thresholds())
    assert [(f.code, f.hosts) for f in found if f.code.startswith("roce-")] == []
