"""Test-wide isolation and the test tiers.

No test writes to the operator's real incident store. Every test is in a tier by what it needs:
``ssh`` (real sshd processes on loopback), ``slurm`` (a real local Slurm), ``tui`` (the Textual
app under Pilot), ``store`` (DuckDB files); the rest are pure. ``-m "not ssh and not slurm"`` is
the fast loop. Tiers come from the directory (tui, store), from an explicit ``pytestmark``, and
from the fixtures that start a service, so a test cannot use one and escape its tier.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

DIRECTORY_TIERS = {"tui": "tui", "store": "store"}
SERVICE_FIXTURES = {"fleet": "ssh", "ssh": "ssh", "replay_fleet": "ssh",
                    "slurm_cluster": "slurm"}


@pytest.fixture(autouse=True)
def _private_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAG_DB", str(tmp_path / "diag.duckdb"))
    monkeypatch.delenv("DIAG_JOIN_WINDOW", raising=False)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The content-keyed cache (validated runbooks, parsed KB) in a directory of the run's
    own, never the operator's ~/.cache; shared by the run's tests (entries are keyed by
    content, so one test's files never answer for another's)."""
    before = os.environ.get("DIAG_CACHE_DIR")
    os.environ["DIAG_CACHE_DIR"] = str(tmp_path_factory.mktemp("diag-cache"))
    yield
    if before is None:
        os.environ.pop("DIAG_CACHE_DIR", None)
    else:
        os.environ["DIAG_CACHE_DIR"] = before


# Tests that each take tens of seconds to minutes (whole walks over sshd fleets, a 2-minute
# `diag watch`, the real Slurm cluster): started first, so that with pytest-xdist they run
# beside the many short tests instead of alone at the end. Order only; nothing is skipped.
# (Dealing them to the front of every worker's block was tried: the suite took 650-680 s
# instead of ~700 s, but three loopback fleets walking at once beside the tests that plant
# stand-in training processes on this machine made those processes every loopback host's.)
SLOW_FIRST = ("tests/fleet/test_signature_walks_ssh.py",
              "tests/fleet/test_signature_walks_ssh_checkpoint.py",
              "tests/fleet/test_healthy_fleet.py",
              "tests/acceptance/test_watch.py", "tests/tui/test_tui_tmux.py",
              "tests/test_signature_walks.py", "tests/fleet/test_fleet_host_text.py",
              "tests/fleet/test_fleet_dead_hosts.py", "tests/fleet/test_job_sweep_ssh.py",
              "tests/fleet/test_step_signatures_ssh.py",
              "tests/fleet/test_scenarios_over_ssh.py",
              "tests/fleet/test_planted_faults_e2e.py", "tests/acceptance/",
              "tests/slurm/", "tests/test_scenarios.py", "tests/fleet/test_fleet_run_e2e.py",
              "tests/store/test_store_concurrency.py", "tests/store/test_store_journal.py")


def _slow_rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return next((i for i, prefix in enumerate(SLOW_FIRST) if path.startswith(prefix)),
                len(SLOW_FIRST))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_slow_rank)  # stable: each file's tests keep their order
    for item in items:
        tier = DIRECTORY_TIERS.get(item.path.parent.name)
        if tier:
            item.add_marker(tier)
        for fixture in SERVICE_FIXTURES.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(SERVICE_FIXTURES[fixture])
