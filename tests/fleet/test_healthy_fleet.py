"""A healthy fleet is accused by no runbook: `diag run RUNBOOK --auto --json` over 8
loopback hosts that run diag's real probe scripts (tests/fleet/healthyfleet.py), on a machine
the rest of the suite keeps busy.

What goes wrong here is diag's own artefacts becoming host faults: a name lookup timing out
under diag's own load read as "does not resolve", a busy machine's load average read as one
host's CPU saturation, a probe's time-out read as a failing host. Nothing may stand against a
host (no standing fault, no conclusion naming hosts or citing their findings, no error or
critical finding on a host), and no walk may conclude a cause.

CI walks every runbook once over 8 hosts; ``DIAG_HEALTHY_ROUNDS=20`` repeats each walk (what
the verdicts issue asks for). Wider fleets are bench/healthy.py's (64 and 512 hosts): on this
two-core machine 32 loopback hosts walked beside the rest of the suite starve each other, and
their scripts' own time limits (a `timeout 5 stat -f`, a `timeout 15 nvidia-smi`) then end
healthy commands — the loopback machine's artefact, which a 32-host walk here showed as
"mount hung" and "driver hung" (stop 36's closing note).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from assistant.cli import main
from tests.fleet import sshfleet
from tests.fleet.healthyfleet import (
    LOOPBACK_LIMITS,
    NO_TEST_PROCESSES,
    RUNBOOKS,
    accusations,
    healthy_fleet,
    summary,
    unread,
)

pytestmark = pytest.mark.ssh

ROUNDS = int(os.environ.get("DIAG_HEALTHY_ROUNDS", "1"))


def started(hosts: int, prefix: str) -> Iterator[sshfleet.SSHFleet]:
    reason = sshfleet.unavailable_reason()
    if reason:
        sshfleet.skip_or_fail(reason)
    with healthy_fleet(hosts, prefix=prefix) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def fleet8() -> Iterator[sshfleet.SSHFleet]:
    yield from started(8, "ok")


def walk_healthy(fleet: sshfleet.SSHFleet, runbook: str,
                 capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(ROUNDS):
        main(["run", runbook, "--inventory", str(fleet.inventory), "--auto", "--json",
              *LOOPBACK_LIMITS, *NO_TEST_PROCESSES])
        doc = json.loads(capsys.readouterr().out)
        assert set(doc["hosts"]) == set(fleet.healthy)
        # every host read: a walk that accused nobody because it read nobody proves nothing
        assert unread(doc) == {}, summary(runbook, doc)
        assert accusations(doc) == {}, summary(runbook, doc)
        assert doc["conclusion"] is None, summary(runbook, doc)
        assert doc["status"] == "waiting", summary(runbook, doc)


@pytest.mark.parametrize("runbook", RUNBOOKS)
def test_no_runbook_accuses_a_healthy_8_host_fleet(
        runbook: str, fleet8: sshfleet.SSHFleet, capsys: pytest.CaptureFixture[str]) -> None:
    walk_healthy(fleet8, runbook, capsys)


@pytest.mark.parametrize("runbook", ["checkpoint-stall", "hang"])
def test_a_limit_shorter_than_the_probes_own_accuses_nobody(
        runbook: str, fleet8: sshfleet.SSHFleet, capsys: pytest.CaptureFixture[str]) -> None:
    # --timeout 2 leaves the sweep's components 2 s of their usual 25: one asleep between its
    # two samples (nvlink's 2 s, the counters' 1 s) when the limit came had not hung. Before
    # the fix this walk named "gpu-driver-hung" (critical, drain) and "filesystem-hung-
    # everywhere" on healthy hosts. What the walk may say is that diag's time ran out: hosts
    # not measured, or (had even the logins not fitted) that diag could not reach them.
    main(["run", runbook, "--inventory", str(fleet8.inventory), "--auto", "--json",
          "--timeout", "2", "--deadline", "60", "--connect-timeout", "20", *NO_TEST_PROCESSES])
    doc = json.loads(capsys.readouterr().out)
    assert doc["faults"] == [], summary(runbook, doc)
    serious = {f["code"] for f in doc["findings"] if f["severity"] in ("error", "critical")}
    assert serious <= {"fleet-unreachable"}, summary(runbook, doc)
    conclusion = doc["conclusion"] or {}
    assert conclusion.get("id") in (None, "diag-cannot-reach"), summary(runbook, doc)
    assert not conclusion.get("hosts"), summary(runbook, doc)
    # and it says whose time ran out: every host that did not answer in full is "not measured"
    # or cut by the deadline, none is healthy by default
    cut = {h for f in doc["findings"] if f["code"] in ("not-measured", "fleet-unreachable")
           for h in f["hosts"]}
    assert set(unread(doc)) <= cut, summary(runbook, doc)
    assert unread(doc), "the 2 s limit cut nothing: this walk tested nothing"
