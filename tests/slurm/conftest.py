"""Fixtures for the Slurm tests: one real local Slurm cluster shared by the whole session.

Bringing the cluster up takes well under a second once the packages are installed, but its
first job waits for a scheduling pass; sharing one cluster keeps the Slurm tests well under a
minute. Each test that uses it starts from a clean state (no jobs, no reservations, every node
resumed and idle) and reaches it through ``SLURM_CONF`` in the environment, exactly as an
operator's diag would.

Where Slurm cannot start (not root, packages missing) the tests skip — unless
``DIAG_REQUIRE_SLURM`` is set (CI sets it), where that is a failure.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.slurm import slurmcluster


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[slurmcluster.SlurmCluster]:
    reason = slurmcluster.unavailable_reason()
    if reason:
        slurmcluster.skip_or_fail(reason)
    cluster = slurmcluster.SlurmCluster()
    try:
        cluster.start()
    except RuntimeError as exc:
        slurmcluster.skip_or_fail(f"the local Slurm cluster did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture()
def cluster(slurm_cluster: slurmcluster.SlurmCluster,
            monkeypatch: pytest.MonkeyPatch) -> slurmcluster.SlurmCluster:
    """The shared cluster, clean, with SLURM_CONF pointing at it for in-process diag calls."""
    slurm_cluster.reset()
    for key in [k for k in slurm_cluster.env if k.startswith("SLURM_")]:
        monkeypatch.setenv(key, slurm_cluster.env[key])
    return slurm_cluster
