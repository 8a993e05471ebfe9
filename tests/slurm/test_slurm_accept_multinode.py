"""Acceptance L3 through the real Slurm of the test suite: two nodes held in a MAINT
reservation (not drained: Slurm 22.05 starts no job on a drained node, even inside a
reservation — the srun pends on ReqNodeNotAvail), ``all_reduce_perf`` launched across them with
``srun``, the nodes' IB error counters read through ``srun`` on each node before and after.

The stand-in ``all_reduce_perf`` prints a real 2-node recording (rank 0 only, as nccl-tests
does) and, like a link that accumulates symbol errors under load, bumps gpu002's counter: the
pair's bandwidth passes, and gpu002 alone fails on the counter that rose.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from assistant.fleet.local import LocalTransport
from assistant.runbook.model import CONFIRMED_ACTIVE
from assistant.runbook.provider import FleetProvider
from tests.acceptance import standins
from tests.slurm import slurmcluster

pytestmark = pytest.mark.slurm

PAIR = ["gpu001", "gpu002"]


def _sysfs(root: Path, node: str, symbol_errors: int) -> Path:
    counters = root / node / "mlx5_0" / "ports" / "1" / "counters"
    counters.mkdir(parents=True)
    (counters / "symbol_error").write_text(f"{symbol_errors}\n")
    (counters / "link_downed").write_text("0\n")
    return counters / "symbol_error"


def test_l3_pair_runs_across_two_slurm_nodes_and_names_the_node_whose_counter_rose(
        cluster: slurmcluster.SlurmCluster, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs = tmp_path / "sysfs"
    _sysfs(sysfs, "gpu001", 0)
    bumped = _sysfs(sysfs, "gpu002", 7)
    recording = (standins.REAL / standins.NCCL_PAIR).read_text()
    standins.write_bin(tmp_path / "bin", {"all_reduce_perf": "\n".join([
        '[ "${SLURM_PROCID:-0}" = 0 ] || exit 0',
        f"echo 12 > {shlex.quote(str(bumped))}",
        f"printf '%s' {shlex.quote(recording)}",
    ])})
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    cluster.run(["scontrol", "create", "reservation", "ReservationName=accept",
                 "StartTime=now", "Duration=60", "Nodes=gpu[001-002]", "Users=root",
                 "Flags=maint,ignore_jobs"], check=True)

    provider = FleetProvider(LocalTransport(), deadline=120.0)
    params = {CONFIRMED_ACTIVE: True, "launcher": "srun", "srun_args": "--reservation=accept",
              "gpus_per_node": 1, "fabric": "gcp-a3-mega", "limit_s": 90,
              # each node's own counters: the script puts the node it samples where {node} stands
              "ib_sysfs": f"{sysfs}/{{node}}"}
    outcome = provider.run_probe("nccl-multinode", PAIR, params, lambda event: None)

    facts = outcome.hosts["gpu001"].facts
    assert outcome.hosts["gpu001"].state == "ok", outcome.hosts["gpu001"].reason
    assert [r["id"] for r in facts["runs"]] == ["pair-1"]
    assert facts["runs"][0]["run"]["completed"] and facts["runs"][0]["run"]["wrong"] == 0
    assert facts["counters"]["pair-1"]["rose"] == {"gpu001": {},
                                                   "gpu002": {"mlx5_0/1 symbol_error": 5}}
    by_host = {h: {f["metric"]: f["verdict"] for f in r.facts["figures"]}
               for h, r in outcome.hosts.items()}
    assert by_host == {"gpu001": {"busbw": "pass", "wrong": "pass", "counters_rose": "pass"},
                       "gpu002": {"busbw": "pass", "wrong": "pass", "counters_rose": "fail"}}
    rose = [f for f in outcome.findings if f.code == "counters-rose"]
    assert [f.hosts for f in rose] == [("gpu002",)]
    # both nodes' slurmd launched the run's step: it really went across the two nodes
    for name in PAIR:
        log = (cluster.dir / "log" / f"slurmd-{name}.log").read_text()
        assert "launch task StepId=" in log, name
