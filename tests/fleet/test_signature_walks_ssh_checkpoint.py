"""The signature fleets of test_signature_walks_ssh.py walked over real sshd from the second
runbook, checkpoint-stall (not the obvious runbook for most of these faults): every fault named
on its host with its action, no twin accused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fleet import sshfleet
from tests.fleet.test_signature_walks_ssh import FLEETS, walk_over_ssh
from tests.test_signature_walks import RUNBOOKS

pytestmark = pytest.mark.ssh


@pytest.mark.parametrize("index", range(len(FLEETS)))
def test_every_fault_is_named_over_ssh_from_checkpoint_stall(
        index: int, replay_fleet: tuple[sshfleet.SSHFleet, Path],
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    walk_over_ssh(index, RUNBOOKS[1], replay_fleet, tmp_path, capsys)
