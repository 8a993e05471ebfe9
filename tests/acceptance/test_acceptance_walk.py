"""The acceptance walk over real sshd on loopback, with tool stand-ins printing real recordings.

Eight nodes: six pass L1 and L2, one fails L1 (dcgmi: a thermal violation on GPU 0), one fails
L2 (all_reduce busbw of 180 GB/s, below the A100 floor of 228). Each failing node stops at its
level with the test named; only the six are offered RESUME, and only once confirmed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from assistant.runbook import events as ev
from assistant.runbook.engine import Walk
from assistant.runbook.library import get_runbook
from assistant.runbook.provider import FleetProvider
from tests.acceptance import standins
from tests.fleet import sshfleet

pytestmark = pytest.mark.ssh

NODES = [f"gpu{i:03d}" for i in range(1, 9)]
DCGM_BAD, NCCL_BAD = "gpu003", "gpu006"
PASSING = [n for n in NODES if n not in (DCGM_BAD, NCCL_BAD)]
ANSWERS = {"want-l0": "no", "want-l1": "yes", "want-l2": "yes", "want-l3": "no",
           "want-l4": "no"}


def _tools(name: str) -> dict[str, str]:
    if name == DCGM_BAD:
        return standins.node(dcgmi=standins.DCGMI_FAIL)
    if name == NCCL_BAD:
        return standins.node(nccl=standins.NCCL_LOW)
    return standins.node()


@pytest.fixture(scope="module")
def fleet() -> Iterator[sshfleet.SSHFleet]:
    reason = sshfleet.unavailable_reason()
    if reason:
        sshfleet.skip_or_fail(reason)
    with sshfleet.SSHFleet(NODES, tools={n: _tools(n) for n in NODES}) as started:
        yield started


def _walk(fleet: sshfleet.SSHFleet, confirm: Any, events: list[ev.Event],
          ran: list[tuple[str, tuple[str, ...]]]) -> Walk:
    transport = fleet.transport()
    # The stand-in nodes have no InfiniBand to loop back on: declared so, as a site declares
    # an NVLink-only bench (ib-loopback then has nothing to test; tests/probes cover it).
    provider = FleetProvider(transport, attrs={n: {"gpu_model": "A100"} for n in NODES},
                             params={"ib-loopback": {"rdma": False}}, deadline=120.0)

    def run_action(command: str, hosts: tuple[str, ...]) -> str:
        ran.append((command, hosts))
        return "recorded"

    return Walk(get_runbook("acceptance"), tuple(NODES), provider, answers=ANSWERS,
                listeners=[events.append], confirm=confirm, run_action=run_action)


def test_failing_nodes_stop_at_their_level_and_the_rest_are_offered_resume(
        fleet: sshfleet.SSHFleet) -> None:
    events: list[ev.Event] = []
    ran: list[tuple[str, tuple[str, ...]]] = []
    asked: list[tuple[str, tuple[str, ...]]] = []

    def confirm(node: Any, hosts: tuple[str, ...]) -> bool:
        asked.append((node.id, hosts))
        return True

    walk = _walk(fleet, confirm, events, ran)
    assert walk.run() == "concluded", walk.path()
    assert walk.path() == ["want-l0", "want-l1", "l1-gpu", "want-l2", "l2-node", "want-l3",
                           "want-l4", "offer-resume", "acceptance-done"]
    # one confirmation per level that loads the nodes, and one for the resume
    assert [a[0] for a in asked] == ["l1-gpu", "l2-node", "offer-resume"]
    assert asked[0][1] == tuple(NODES)
    assert DCGM_BAD not in asked[1][1] and NCCL_BAD in asked[1][1]
    failing = {f.code: f.hosts for f in walk.findings() if f.severity in ("error", "critical")}
    assert failing.get("dcgm-diag-failed") == (DCGM_BAD,), failing
    low = [f for f in walk.findings() if NCCL_BAD in f.hosts and f.probe == "nccl-node"]
    assert low and all(f.hosts == (NCCL_BAD,) for f in low), walk.findings()
    assert "below the floor 228 GB/s" in low[0].message, low[0].message
    assert {h for f in walk.findings() if f.severity in ("error", "critical")
            for h in f.hosts} == {DCGM_BAD, NCCL_BAD}
    # the resume: the six that passed, confirmed, and recorded in the walk's audit trail
    assert ran == [("scontrol update NodeName=$HOST State=RESUME", tuple(PASSING))]
    decided = [e for e in events if isinstance(e, ev.ActionDecided)]
    assert [e.node for e in decided] == ["l1-gpu", "l2-node", "offer-resume"]
    assert all(e.confirmed for e in decided)
    figures = [e for e in events if isinstance(e, ev.FiguresReady)]
    assert {e.host for e in figures if e.probe == "dcgm-diag"} == set(NODES)
    assert {e.host for e in figures if e.probe == "nccl-node"} == set(NODES) - {DCGM_BAD}


def test_an_unconfirmed_level_runs_nothing_and_resumes_no_node(
        fleet: sshfleet.SSHFleet) -> None:
    events: list[ev.Event] = []
    ran: list[tuple[str, tuple[str, ...]]] = []
    walk = _walk(fleet, lambda node, hosts: False, events, ran)
    assert walk.run() == "concluded"
    assert walk.path()[-1] == "acceptance-stopped"
    assert not ran
    assert not [e for e in events if isinstance(e, ev.ProbeStarted)]
