"""The signature fleets of test_signature_walks_ssh.py walked over real sshd from the second
runbook, checkpoint-stall (not the obvious runbook for most of these faults): every fault named
on its host with its action, no twin accused. These walks shard the hosts over two worker
processes (``--workers 2``), so every catalogued example is also judged the sharded way: per-host
work in the shards, the fleet's comparisons over all of them in the walk's process."""

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
    doc = walk_over_ssh(index, RUNBOOKS[1], replay_fleet, tmp_path, capsys, workers=2)
    # every host answered through its shard's worker, the fleet's findings came back whole
    assert len(doc["hosts"]) == len(FLEETS[index]["hosts"])
