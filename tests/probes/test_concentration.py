"""leaf-concentration: findings that all sit under one switch point at the switch."""

from __future__ import annotations

from probes.base import finding
from probes.placement import concentration

HOSTS = [f"gpu00{i}" for i in range(1, 9)]
ATTRS = {h: {"leaf": "leaf-01" if i < 4 else "leaf-02", "rack": f"r{i // 2}"}
         for i, h in enumerate(HOSTS)}


def test_findings_under_one_leaf_name_the_leaf() -> None:
    # Pause storms on two of leaf-02's hosts, none elsewhere: the leaf is the suspect.
    found = concentration([finding("pfc-pause-high", ["gpu005", "gpu006"], "pauses")], HOSTS,
                          ATTRS)
    assert [f.code for f in found] == ["leaf-concentration"]
    assert found[0].evidence["place"] == "leaf-02" and found[0].evidence["key"] == "leaf"
    assert found[0].hosts == ("gpu005", "gpu006")


def test_findings_across_leaves_or_on_one_host_say_nothing() -> None:
    # Spread over both leaves, or a single host: no concentration.
    spread = finding("pfc-pause-high", ["gpu001", "gpu006"], "pauses")
    single = finding("ib-port-down", ["gpu003"], "down")
    assert concentration([spread, single], HOSTS, ATTRS) == []


def test_a_job_under_one_leaf_cannot_concentrate() -> None:
    # Every host on one leaf: "all under that leaf" is no signal.
    attrs = {h: {"leaf": "leaf-01"} for h in HOSTS}
    assert concentration([finding("pfc-pause-high", HOSTS[:3], "x")], HOSTS, attrs) == []


def test_bookkeeping_codes_are_not_evidence() -> None:
    # not-measured on two hosts of one leaf says nothing about the switch.
    found = concentration([finding("not-measured", ["gpu005", "gpu006"], "no tool")], HOSTS,
                          ATTRS)
    assert found == []
