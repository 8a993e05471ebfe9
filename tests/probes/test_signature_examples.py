"""Every fault example in fixtures/signatures/ raises its signature on the host that has it, and
its healthy twin raises nothing there, judged the way a walk judges: the probe's script output
replayed through the fleet provider (parse, log lines, checks, fault catalogue, fleet
comparison), one faulty host among four.

The examples are the tools' own output formats (each signature's ``source:`` says where they
come from), written per family rather than per scenario: a test here failing means a signature
fires on a healthy-but-unusual node or misses the fault it names, wherever it would show.
"""

from __future__ import annotations

from typing import Any

import pytest

from assistant.fleet.replay import ReplayTransport
from assistant.fleet.scenario import Scenario, patch_sections, scenarios_dir
from assistant.runbook.provider import FleetProvider
from probes.faults.catalogue import load_faults
from tests.signature_examples import EXAMPLES, component, examples, patches

BASELINE = scenarios_dir() / "_baseline"
HOSTS = ["h1", "h2", "h3", "h4"]
ALL = examples()


def _codes_on_h1(component: str, mine: str, others: str) -> tuple[str, set[str]]:
    scenario = Scenario("signature-example", EXAMPLES, "", "", "", list(HOSTS))
    scenario.outputs = {component: {"h1": mine, **{h: others for h in HOSTS[1:]}}}
    provider = FleetProvider(ReplayTransport(scenario, delay_s=0))
    outcome = provider.run_probe(component, HOSTS, {}, lambda event: None)
    return (outcome.hosts["h1"].state,
            {f.code for f in outcome.findings if "h1" in f.hosts})


@pytest.mark.parametrize(("family", "example"), ALL,
                         ids=[f"{fam}:{ex['signature']}" for fam, ex in ALL])
def test_fault_raises_its_signature_and_the_twin_does_not(family: str,
                                                          example: dict[str, Any]) -> None:
    sig = example["signature"]
    assert sig in load_faults().signatures, f"{family}: no signature {sig}"
    comp = component(example)
    baseline = (BASELINE / f"{comp}.txt").read_text(encoding="utf-8")

    fault = patch_sections(baseline, patches(example["fault"]))
    state, codes = _codes_on_h1(comp, fault, baseline)
    assert state == "ok" and sig in codes, (state, sorted(codes))

    twin = patch_sections(baseline, patches(example["twin"]))
    others = twin if example.get("others") == "twin" else baseline
    state, codes = _codes_on_h1(comp, twin, others)
    assert state == "ok", state  # the twin is read, not a parse error or "not measured"
    assert sig not in codes, sorted(codes)


def test_every_catalogued_rule_of_these_families_has_an_example() -> None:
    # Signatures raised by a probe's own check are tested with that probe; every rule the
    # catalogue itself evaluates (a predicate or a log pattern) has a fault and a twin here.
    catalogue = load_faults()
    named = {ex["signature"] for _, ex in ALL}
    families = {catalogue.signatures[s].family for s in named}
    rules = {s.id for s in catalogue.signatures.values()
             if s.family in families and s.raised_by is None}
    assert rules - named == set()
    assert len(ALL) >= 120
