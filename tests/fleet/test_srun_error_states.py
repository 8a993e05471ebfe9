"""What srun's error says about the node (assistant/fleet/slurm.py _srun_state): a node that did
not answer is ``unreachable`` (host-unreachable: it may be down); Slurm refusing the step, or srun
not reaching slurmctld at all, is ``auth-failed`` (host-access-failed: diag's or the cluster's
side, never the node's fault, never healthy). Messages are Slurm's own (src/common/
slurm_errno.c, src/srun/launch.c "Unable to create step for job %u: %m", src/api/step_launch.c
"Task launch for %ps failed on node %s: %m")."""

from __future__ import annotations

import pytest

from assistant.fleet.slurm import _srun_error, _srun_state


@pytest.mark.parametrize(("stderr", "state"), [
    # slurmctld down or overloaded: the same for every node, not the node's fault
    ("srun: error: Unable to create step for job 12: Socket timed out on send/recv operation\n",
     "auth-failed"),
    ("srun: error: Unable to contact slurm controller (connect failure)\n", "auth-failed"),
    # recorded on Slurm 22.05.8 (tests/slurm/slurmcluster.py) with slurmctld SIGSTOPped, after
    # MessageTimeout=5 s: the node (gpu003) was fine
    ("srun: error: Unable to confirm allocation for job 1: Socket timed out on send/recv "
     "operation\nsrun: Check SLURM_JOB_ID environment variable. Expired or invalid job 1\n",
     "auth-failed"),
    ("srun: error: slurm_receive_msg: Zero Bytes were transmitted or received\n"
     "srun: error: Unable to create step for job 12: Zero Bytes were transmitted or received\n",
     "auth-failed"),
    # the node's own slurmd did not answer the launch: the node (recorded on 22.05.8 with
    # gpu003's slurmd SIGKILLed: "Communication connection failure", after 6 s)
    ("srun: error: Task launch for StepId=12.3 failed on node gpu003: Socket timed out on "
     "send/recv operation\nsrun: error: Application launch failed: Socket timed out on send/recv"
     " operation\n", "unreachable"),
    ("srun: error: Task launch for StepId=12.3 failed on node gpu003: Communication connection "
     "failure\n", "unreachable"),
    # refusals stay refusals
    ("srun: error: Unable to create step for job 12: Invalid job id specified\n", "auth-failed"),
])
def test_srun_errors(stderr: str, state: str) -> None:
    assert _srun_state(_srun_error(stderr, 1)) == state
