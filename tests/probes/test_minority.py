"""fleet_minority: the one rule behind every "differs from / below the fleet majority" finding."""

from __future__ import annotations

from probes.base import fleet_minority


def test_drift_names_every_host_off_the_most_common_value() -> None:
    odd = fleet_minority({"a": "535", "b": "535", "c": "550", "d": "545"})
    assert odd is not None and odd.majority == "535" and odd.hosts == {"c": "550", "d": "545"}
    assert odd.differs("driver") == ("driver differs on 2 host(s): 550 on c, 545 on d "
                                     "(majority 535 on 2)")
    assert fleet_minority({"a": "535", "b": "535"}) is None  # no drift, no finding


def test_below_needs_a_strict_majority_and_names_only_hosts_under_it() -> None:
    short = fleet_minority({"a": 8, "b": 8, "c": 8, "d": 7, "e": 9}, below=True)
    assert short is not None and short.hosts == {"d": 7}  # e has more: not a fault
    assert short.below("see fewer GPUs than") == (
        "1 host(s) see fewer GPUs than the fleet's 8: d (7)")
    assert fleet_minority({"a": 8, "b": 8, "c": 7, "d": 7}, below=True) is None  # a tie: no norm
    rates = fleet_minority({"a": 400.0, "b": 400.0, "c": 200.0}, below=True)
    assert rates is not None
    assert rates.below("run their ports below", "g", " Gb/s") == (
        "1 host(s) run their ports below the fleet's 400 Gb/s: c (200)")


def test_spared_hosts_are_never_named() -> None:
    assert fleet_minority({"a": 8, "b": 8, "c": 7}, below=True, spare={"c"}) is None
    assert fleet_minority({"a": "x", "b": "x", "c": "y"}, spare=["c"]) is None
