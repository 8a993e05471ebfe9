"""The ib-ports and roce fault families: well formed, every fact they read exists, and each
predicate signature fires on its fault example and stays quiet on its healthy twin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from probes.base import default_thresholds, get_probe
from probes.faults.apply import judge
from probes.faults.catalogue import FaultCatalogue, read_files
from probes.faults.predicate import check_predicate
from tests.probes.probe_outputs import baseline
from tests.probes.rdma_examples import EXAMPLES, HEALTHY_ROCE, as_sections

FAULTS = Path(__file__).resolve().parents[2] / "probes" / "faults"
FILES = ("ib-ports.yaml", "roce.yaml")
# The thresholds these families name, as proposed in the merge note (probes/thresholds.yaml
# wins once they are merged there).
PROPOSED = {"ib_switch_relay_errors_delta": 100, "ib_constraint_errors_delta": 100,
            "ib_vl15_dropped_delta": 100, "roce_tx_discards_delta": 1000}
THRESHOLDS = {**PROPOSED, **default_thresholds()}


def catalogue() -> FaultCatalogue:
    return read_files((name, yaml.safe_load((FAULTS / name).read_text(encoding="utf-8")))
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
    # counter map of port_counters whose counter names are free)
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


def test_every_predicate_signature_has_an_example() -> None:
    assert sorted({e["signature"] for e in EXAMPLES}) == PREDICATES


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["signature"] for e in EXAMPLES])
def test_fault_fires_and_twin_is_quiet(example: dict[str, Any]) -> None:
    probe, sig = example["probe"], example["signature"]
    others = {f"gpu00{i}": example["twin"] for i in range(2, 5)} if example["others"] else {}
    fault = findings(probe, {"gpu001": example["fault"], **others})
    assert [f.hosts for f in fault if f.code == sig] == [("gpu001",)], \
        [(f.code, f.hosts) for f in fault]
    twin = findings(probe, {"gpu001": example["twin"], **others})
    assert twin == [], [(f.code, f.message) for f in twin]


@pytest.mark.parametrize("probe", ["network", "rdma"])
def test_healthy_hosts_raise_nothing(probe: str) -> None:
    # the InfiniBand baseline node and a healthy RoCE node, alone and as a fleet of four
    for text in (baseline(probe), HEALTHY_ROCE[probe]()):
        assert findings(probe, {f"gpu00{i}": text for i in range(1, 5)}) == []


def test_examples_name_sections_of_their_component() -> None:
    for example in EXAMPLES:
        base = baseline(example["probe"])
        for side in ("fault", "twin"):
            sections = as_sections(example[side], example["probe"])
            assert sections or side == "twin", (example["signature"], side)  # twin: baseline
            assert all(f"=== diag:section {name}" in base or f"=== diag:missing {name}" in base
                       for name in sections), (example["signature"], side)
