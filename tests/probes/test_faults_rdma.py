"""The ib-ports and roce fault families beyond their examples: the two files load on their own
and name known thresholds, every fact a predicate reads is one the probes produce, healthy
InfiniBand and RoCE hosts raise nothing, and the examples of fixtures/signatures/rdma.yaml and
counters.yaml edit sections their component's output has.

Each predicate signature's fault and healthy twin are judged with every other family's
examples, through the replay provider, by tests/probes/test_signature_examples.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probes.base import default_thresholds, get_probe
from probes.faults.apply import judge
from probes.faults.catalogue import FaultCatalogue, read_files
from probes.faults.predicate import check_predicate, drift_keys
from tests import yamlc
from tests.probes.probe_outputs import baseline
from tests.probes.rdma_roce import network_roce, rdma_roce
from tests.signature_examples import component, examples

FAULTS = Path(__file__).resolve().parents[2] / "probes" / "faults"
FILES = ("ib-ports.yaml", "roce.yaml")
THRESHOLDS = default_thresholds()
# A healthy RoCE host, for each probe these families read.
HEALTHY_ROCE = {"rdma": rdma_roce, "network": lambda: network_roce(1)}
EXAMPLES = [ex for family, ex in examples() if family in ("rdma", "counters")]


def catalogue() -> FaultCatalogue:
    return read_files((name, yamlc.load((FAULTS / name).read_text(encoding="utf-8")))
                      for name in FILES)


CAT = catalogue()
PREDICATES = sorted(s.id for s in CAT.signatures.values() if s.when is not None)


def findings(probe: str, texts: dict[str, str]) -> list[Any]:
    parse = get_probe(probe).parse
    return judge(probe, {host: parse(text) for host, text in texts.items()}, THRESHOLDS, CAT)


def test_families_load_and_name_known_thresholds() -> None:
    assert set(CAT.families) == {"ib-ports", "roce"}
    for sig in CAT.signatures.values():
        if sig.when is not None:
            assert check_predicate(sig.when, THRESHOLDS) == [], sig.id
        assert sig.source.strip() and sig.twin.strip(), sig.id


def _keys(cond: Any) -> list[str]:
    if isinstance(cond, dict):
        out = [str(cond[k]) for k in ("key", "drift", "items") if k in cond]
        for sub in ("all", "any"):
            for c in cond.get(sub) or ():
                out += _keys(c)
        if "not" in cond:
            out += _keys(cond["not"])
        return out
    return []


@pytest.mark.parametrize("sig_id", PREDICATES)
def test_every_fact_a_signature_reads_exists(sig_id: str) -> None:
    # each key is a fact of the probe (host level, an entry of the list named by items, or a
    # counter map of port_counters whose counter names are free): the examples prove the
    # branch they fire, this every branch of an any
    sig = CAT.signatures[sig_id]
    assert sig.when is not None
    facts = get_probe(sig.probe).parse(HEALTHY_ROCE[sig.probe]())
    items = sig.when.get("items")
    entry = facts[items][0] if items else {}
    for key in _keys(sig.when):
        if key == items:
            continue
        head = key.split(".")[0]
        assert head in entry or head in facts, f"{sig_id}: no fact {key}"


@pytest.mark.parametrize("probe", ["network", "rdma"])
def test_healthy_hosts_raise_nothing(probe: str) -> None:
    # the InfiniBand baseline node and a healthy RoCE node, alone and as a fleet of four
    for text in (baseline(probe), HEALTHY_ROCE[probe]()):
        assert findings(probe, {f"gpu00{i}": text for i in range(1, 5)}) == []


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["signature"] for e in EXAMPLES])
def test_examples_edit_sections_of_their_component(example: dict[str, Any]) -> None:
    # a misspelt section would be added to the output and never read
    base = baseline(component(example))
    for side in ("fault", "twin"):
        assert example[side], (example["signature"], side)
        for name in example[side]:
            assert f"=== diag:section {name}\n" in base or f"=== diag:missing {name}\n" in base, \
                (example["signature"], side, name)


def test_only_drifts_take_their_twin_for_the_fleet() -> None:
    # fleet: twin (the other hosts run the twin in the fault step too) is for a drift from a
    # norm the InfiniBand baseline lacks, whose twin is the whole fleet alike
    marked = [ex for ex in EXAMPLES if "fleet" in ex]
    assert marked
    for ex in marked:
        sig = CAT.signatures[ex["signature"]]
        assert ex["fleet"] == "twin" and ex.get("others") == "twin", sig.id
        assert sig.when is not None and drift_keys(sig.when), sig.id
