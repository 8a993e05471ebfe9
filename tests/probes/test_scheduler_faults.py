"""The scheduler family of the fault catalogue against the scheduler probe's facts: every
signature raises on its fault example and not on its healthy twin, the baseline raises none,
and the per-node facts the signatures read are there."""

from __future__ import annotations

import pytest

from probes.faults.apply import judge
from probes.faults.catalogue import load_faults
from probes.faults.predicate import Env, matching
from probes.scheduler import parse
from tests.probes.probe_outputs import baseline, real, replace
from tests.probes.scheduler_examples import EXAMPLES, nodes

BASE = baseline("scheduler")
FAMILY = {s.id for s in load_faults().signatures.values() if s.family == "scheduler"}
PREDICATES = {s.id for s in load_faults().signatures.values()
              if s.family == "scheduler" and s.when is not None}


def raised(nodes_text: str) -> dict[str, list[str]]:
    """Signature id -> the nodes (entries of ``nodes``) its predicate matches.

    Read with the predicate itself rather than the applier's finding: the applier credits the
    host whose facts matched (here the reader, gpu001) and names items by other keys than
    ``node`` (see the merge note: a client-side probe's items should credit their node).
    """
    facts = parse(replace(BASE, nodes=nodes_text))
    out = {}
    for sig in load_faults().signatures.values():
        if sig.family == "scheduler" and sig.when is not None:
            hits = matching(sig.when, facts, Env())
            if hits:
                out[sig.id] = sorted(h["node"] for h in hits)
    return out


def test_every_predicate_signature_has_an_example():
    assert set(EXAMPLES) == PREDICATES and len(PREDICATES) >= 8


def test_baseline_raises_no_scheduler_signature():
    facts = parse(BASE)
    assert [f.code for f in judge("scheduler", {"gpu001": facts}, {}) if f.code in FAMILY] == []


@pytest.mark.parametrize("signature", sorted(EXAMPLES))
def test_fault_raises_and_twin_does_not(signature):
    fault, twin = EXAMPLES[signature]
    assert raised(nodes(fault)).get(signature) == ["gpu003"]
    assert signature not in raised(nodes(twin))


def test_nodes_carry_state_reason_and_who():
    # the per-node facts the signatures read (added for the catalogue)
    facts = parse(replace(BASE, nodes=nodes(EXAMPLES["slurm-kill-task-failed"][0])))
    [gpu003] = [n for n in facts["nodes"] if n["node"] == "gpu003"]
    assert {k: gpu003[k] for k in (
        "state", "base_state", "not_responding", "reason", "since", "by", "hardware_fault",
        "drain")} == {"state": "idle+drain", "base_state": "idle", "not_responding": False,
                      "reason": "Kill task failed", "since": "2026-11-30T08:57:47",
                      "by": "root", "hardware_fault": None, "drain": True}
    healthy = next(n for n in facts["nodes"] if n["node"] == "gpu001")
    assert healthy["reason"] is None and healthy["since"] is None


def test_not_responding_spelled_as_a_flag():
    # StateComplete spells it as a flag, StateLong/%T as the '*' suffix
    assert raised(nodes("down+not_responding|gpu:h100:8|gpu:h100:0(IDX:N/A)|0/0/8/8|"
                        "2026-11-30T08:57:47|root(0)|Not responding")) \
        == {"slurm-node-not-responding": ["gpu003"]}


def test_recorded_queue_samples():
    # real sinfo outputs recorded on a Slurm 22.05 cluster (fixtures/real/SOURCES.md)
    down_drained = raised(real("sinfo__4-node-h100-one-down-one-drained-idle"))
    assert down_drained == {"slurm-node-not-responding": ["gpu002"],
                            "slurm-kill-task-failed": ["gpu003"]}
    # an NHC-style health check naming a missing GPU is a hardware drain, not slurm-nhc-drain
    # (no "NHC:" prefix and a hardware fault named): no scheduler-family signature of its own
    assert raised(real("sinfo__4-node-h100-two-drained-by-healthcheck-gpus-scattered")) == {}


def test_an_operators_note_raises_no_signature():
    # free text an admin wrote: nodes-drained names it, the family stays silent
    assert raised(nodes("idle+drain|gpu:h100:8|gpu:h100:0(IDX:N/A)|0/0/8/8|"
                        "2026-11-30T08:57:47|jdoe(1001)|rack 12 PDU swap tuesday")) == {}
