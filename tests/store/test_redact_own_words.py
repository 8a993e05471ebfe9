"""diag's own words are not secrets: the evidence and facts diag writes use no name the
redactor treats as key-ish, so the store keeps them (a finding's catalogue id under
"signature" came back as [REDACTED] from every stored catalogued finding)."""

from __future__ import annotations

from assistant.store.redact import redact_data
from probes import stacks
from probes.faults.apply import _evidence
from probes.faults.catalogue import load_faults
from tests.probes.test_stacks import WAIT, output


def test_every_catalogued_findings_evidence_is_stored_as_written() -> None:
    for sig in load_faults().signatures.values():
        evidence = _evidence(sig)
        assert redact_data(evidence) == evidence, sig.id


def test_the_stacks_facts_are_stored_as_written() -> None:
    # each rank's stack carries the key it is grouped by (the innermost frames)
    facts = stacks.parse(output({0: WAIT, 1: WAIT}))
    assert facts["stacks"] and redact_data(facts) == facts
