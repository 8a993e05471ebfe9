"""The placement probe: no command; leaf/rack/rail from the inventory; job-spans-leaves."""

from __future__ import annotations

from probes.base import get_probe
from probes.placement import command, parse
from tests.probes.probe_outputs import codes, context

PROBE = get_probe("placement")

ATTRS = {
    "gpu001": {"leaf": "leaf-a1", "rack": "r01", "rail": "0", "site": "dc2"},
    "gpu002": {"leaf": "leaf-a1", "rack": "r01", "rail": "0"},
    "gpu003": {"leaf": "leaf-a1", "rack": "r02", "rail": "0"},
    "gpu004": {"leaf": "leaf-b7", "rack": "r19", "rail": "0"},
}


def fleet(attrs, hosts=None):
    """As the provider does for a command-less probe: facts = ctx.attrs[host]."""
    hosts = hosts or list(attrs)
    return PROBE.check_fleet({h: dict(attrs.get(h, {})) for h in hosts}, context(attrs=attrs))


def test_runs_nothing():
    # command is None so the provider contacts no host; parse has nothing to read
    assert command({}) is None and command({"peers": ["gpu001"]}) is None
    assert parse("") == {}
    assert PROBE.check("gpu001", ATTRS["gpu001"], context(attrs=ATTRS)) == []


def test_one_leaf_raises_nothing():
    # three hosts under one leaf switch
    assert fleet(ATTRS, ["gpu001", "gpu002", "gpu003"]) == []


def test_job_spans_two_leaves():
    # one host sits under another leaf: the evidence lists the hosts per leaf
    [f] = fleet(ATTRS)
    assert f.code == "job-spans-leaves" and f.severity == "warning"
    assert f.hosts == ("gpu001", "gpu002", "gpu003", "gpu004")
    assert f.evidence["hosts_per_leaf"] == {"leaf-a1": 3, "leaf-b7": 1}
    assert f.evidence["leaves"]["leaf-b7"] == ["gpu004"]
    assert f.evidence["placement"]["gpu004"] == {"leaf": "leaf-b7", "rack": "r19", "rail": "0"}
    assert f.evidence["racks"] == ["r01", "r02", "r19"]


def test_facts_missing_fall_back_to_attrs():
    # a provider that hands empty facts: ctx.attrs still gives the placement
    ctx = context(attrs=ATTRS)
    [f] = PROBE.check_fleet({h: {} for h in ATTRS}, ctx)
    assert f.code == "job-spans-leaves"


def test_numeric_attributes_become_strings():
    # an inventory with leaf numbers (YAML ints) still groups and stays JSON-able
    attrs = {"n1": {"leaf": 3}, "n2": {"leaf": 3}, "n3": {"leaf": 4}}
    [f] = fleet(attrs)
    assert f.evidence["hosts_per_leaf"] == {"3": 2, "4": 1}


def test_no_leaf_in_inventory_is_not_measured():
    # hosts without a leaf attribute: said, never a silent pass
    attrs = {"gpu001": {"rack": "r01"}, "gpu002": {}}
    findings = fleet(attrs)
    assert codes(findings) == ["not-measured"]
    assert findings[0].hosts == ("gpu001", "gpu002")


def test_partly_known_placement():
    # two leaves known, one host unknown: both findings
    attrs = {**ATTRS, "gpu005": {"rack": "r20"}}
    assert codes(fleet(attrs)) == ["job-spans-leaves", "not-measured"]
