"""``common``: a host whose value of a fact is what most hosts of the walk share. An Active
RoCE port without a RoCE v2 IPv4 GID is one host's fault (roce-no-v2-ipv4-gid) unless the same
ports lack it on most hosts: then it is the fleet's design (a RoCE v1 or IPv6 fabric, a port
cabled but carrying no IP on every node), and NCCL is not pointed at it."""

from __future__ import annotations

from typing import Any

import pytest

from probes.base import load_thresholds
from probes.faults.apply import judge
from probes.faults.predicate import check_predicate

CODE = "roce-no-v2-ipv4-gid"


def _host(*without: str) -> dict[str, Any]:
    ports = [{"key": key, "device": key.split("/")[0], "port": 1, "link_layer": "Ethernet",
              "state": "Active", "roce_v2_gid": key not in without}
             for key in ("mlx5_0/1", "mlx5_1/1")]
    return {"ports": ports, "roce_ports_without_v2_gid_keys": sorted(without)}


def _accused(fleet: dict[str, dict[str, Any]]) -> list[str]:
    found = judge("rdma", fleet, load_thresholds())
    return sorted(h for f in found if f.code == CODE for h in f.hosts)


def test_ports_every_host_lacks_it_on_are_the_fleets_design() -> None:
    assert _accused({f"h{i}": _host("mlx5_1/1") for i in range(1, 5)}) == []


def test_the_one_host_that_lacks_it_where_the_others_have_it_is_named() -> None:
    fleet = {f"h{i}": _host() for i in range(1, 5)}
    fleet["h5"] = _host("mlx5_0/1")
    assert _accused(fleet) == ["h5"]
    # also beside the fleet's own spare port: h5 lacks one more than the rest
    fleet = {f"h{i}": _host("mlx5_1/1") for i in range(1, 5)}
    fleet["h5"] = _host("mlx5_0/1", "mlx5_1/1")
    assert _accused(fleet) == ["h5"]


@pytest.mark.parametrize("hosts", [1, 2])
def test_without_a_fleet_to_compare_with_a_host_is_judged_on_its_own(hosts: int) -> None:
    # fewer than three hosts report: no majority, so nothing is excused
    fleet = {f"h{i}": _host("mlx5_1/1") for i in range(1, hosts + 1)}
    assert _accused(fleet) == sorted(fleet)


def test_common_is_a_host_level_condition_an_entrys_rule_may_ask() -> None:
    assert check_predicate({"items": "ports", "all": [
        {"key": "state", "op": "eq", "value": "Active"},
        {"not": {"common": "roce_ports_without_v2_gid_keys"}}]}) == []
    assert check_predicate({"common": 3}) == ["common names a host fact (a string)"]
    assert check_predicate({"common": "k", "op": "eq"}) == ["'op' does not go with common"]
    # a drift per entry stays refused
    assert check_predicate({"items": "ports", "drift": "k"})
