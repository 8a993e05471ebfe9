"""Every fault example in fixtures/signatures/ raises its signature on the host that has it, and
its healthy twin raises nothing there, judged the way a walk judges: the probe's script output
replayed through the fleet provider (parse, log lines, checks, fault catalogue, fleet
comparison), one faulty host among four.

An example with ``hosts:`` is about hosts its output names itself, not the host that read it:
the Slurm nodes in the scheduler's sinfo/squeue/scontrol (a client-side probe, read once: h1
reads it, the other hosts get the probe's ``shared`` marker, as a walk's transport gives them),
or the nodes a rank log names. Its fault must raise the signature on exactly those hosts (``[]``
for a job-scope finding that names none), and its twin must not raise it at all. An example with
``fault_hosts: N`` is a fabric-wide fault that shows on several hosts at once: its fault output
runs on h1 and the next hosts, N in all.

The examples are the tools' own output formats (each signature's ``source:`` says where they
come from), written per family rather than per scenario: a test here failing means a signature
fires on a healthy-but-unusual node or misses the fault it names, wherever it would show.
"""

from __future__ import annotations

from typing import Any

import pytest

from probes.faults.catalogue import load_faults
from tests.signature_examples import examples, judge

ALL = examples()


@pytest.mark.parametrize(("family", "example"), ALL,
                         ids=[f"{fam}:{ex['signature']}" for fam, ex in ALL])
def test_fault_raises_its_signature_and_the_twin_does_not(family: str,
                                                          example: dict[str, Any]) -> None:
    judge(example, family)


# A fault that is a host state, not an output an example can edit: nvidia-smi hanging inside
# the GPU query (the host's time-out there). fixtures/scenarios/hang-gpu-driver-hung walks it
# over real sshd (tests/fleet/test_scenarios_over_ssh.py) and tests/test_hostfail.py judges it.
NOT_AN_OUTPUT = {"gpu-driver-hung"}


def test_every_catalogued_signature_has_an_example() -> None:
    # every signature, whether the catalogue evaluates it (a predicate, a log pattern) or a
    # probe's own check raises it, has a fault and a healthy twin here
    named = {ex["signature"] for _, ex in ALL}
    assert set(load_faults().signatures) - named == NOT_AN_OUTPUT
    assert len(ALL) == len(named)  # one example each: a second one belongs in the same entry
