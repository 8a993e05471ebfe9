"""Every fault example in fixtures/signatures/ raises its signature on the host that has it, and
its healthy twin raises nothing there, judged the way a walk judges: the probe's script output
replayed through the fleet provider (parse, log lines, checks, fault catalogue, fleet
comparison), one faulty host among four.

The examples are the tools' own output formats (each signature's ``source:`` says where they
come from), written per family rather than per scenario: a test here failing means a signature
fires on a healthy-but-unusual node or misses the fault it names, wherever it would show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from assistant.fleet.replay import ReplayTransport
from assistant.fleet.scenario import Scenario, patch_sections, scenarios_dir
from assistant.runbook.provider import FleetProvider
from probes.base import split_sections
from probes.faults.catalogue import load_faults

EXAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "signatures"
BASELINE = scenarios_dir() / "_baseline"
HOSTS = ["h1", "h2", "h3", "h4"]
# Lines added to a stream rather than a section replaced: (component, section).
STREAMS = {"kernel-stream": ("kernel", "kernel"), "job-stream": ("logs", "lines")}
# The logs component's lines section names the file each line came from (rank 0's stderr).
_JOB_FILE = "--- file 2 matched 1 named 0 shared 0\n"


def _examples() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for example in yaml.safe_load(path.read_text(encoding="utf-8")):
            out.append((path.stem, example))
    return out


ALL = _examples()


def _component(example: dict[str, Any]) -> str:
    if example.get("probe"):
        return str(example["probe"])
    for stream, (component, _) in STREAMS.items():
        if stream in (example.get("fault") or {}):
            return component
    return load_faults().signatures[example["signature"]].probe


def _patches(edits: dict[str, Any]) -> dict[str, tuple[str, int] | None]:
    patches: dict[str, tuple[str, int] | None] = {}
    for name, value in (edits or {}).items():
        if name in STREAMS:
            component, section = STREAMS[name]
            before = split_sections((BASELINE / f"{component}.txt").read_text())[section].text
            value = (before if component == "kernel" else _JOB_FILE) + value
            name = section
        if value is None:
            patches[name] = None
        elif isinstance(value, dict):
            patches[name] = (str(value.get("text", "")), int(value.get("rc", 0)))
        else:
            patches[name] = (str(value), 0)
    return patches


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
    component = _component(example)
    baseline = (BASELINE / f"{component}.txt").read_text(encoding="utf-8")

    fault = patch_sections(baseline, _patches(example["fault"]))
    state, codes = _codes_on_h1(component, fault, baseline)
    assert state == "ok" and sig in codes, (state, sorted(codes))

    twin = patch_sections(baseline, _patches(example["twin"]))
    others = twin if example.get("others") == "twin" else baseline
    state, codes = _codes_on_h1(component, twin, others)
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
