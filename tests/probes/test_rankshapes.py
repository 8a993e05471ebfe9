"""Rank logs as operators collect them: every launcher / collector shape, 64 and 512 ranks.

The log sets come from bench/ranks.py's ``shaped_job`` (the generator the benchmark uses):
kubectl logs --timestamps per pod, a central journald export, an RFC 3164 syslog file,
torchrun --tee per-node files (default and custom role), srun --label, Open MPI --tag-output,
MPICH/Intel MPI rank prefixes, PyTorch without NCCL_DEBUG, and Megatron tensor/data-parallel
groups. Each must name the straggler's rank and node, and say how sure it is.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import ranks as gen
from probes import ranks
from probes.base import get_probe
from probes.rankprogress import grammar, hosts, verdict
from probes.ranks import findings
from tests.probes.probe_outputs import codes, context

PROBE = get_probe("ranks")


def concat(files: dict[str, str]) -> str:
    return "".join(f"==> /logs/{name} <==\n{body}\n" for name, body in files.items())


def first(result: dict) -> tuple:
    s = result["stragglers"][0]
    return s["rank"], s["host"]


@pytest.mark.parametrize("world", [64, 512])
@pytest.mark.parametrize("shape", gen.SHAPES)
def test_every_shape_names_the_stragglers_rank_and_host(shape: str, world: int) -> None:
    files, host = gen.shaped_job(shape, world)
    r = verdict.analyse_text(concat(files))
    straggler = gen.straggler_of(world)
    assert r["verdict"] == "straggler"
    assert first(r) == (straggler, host)
    found = findings(r)
    assert codes(found) == ["straggler-rank"] and found[0].hosts == (host,)
    assert found[0].message.startswith(f"rank {straggler} on {host}")
    entry = r["stragglers"][0]
    if shape in ("syslog", "torchrun-tee", "torchrun-role", "no-nccl-debug"):
        # no NCCL_DEBUG: no world size, the straggler silent -> a gap, and said so
        assert entry["confidence"] == "likely" and r["world_size"] is None
        assert entry["host_from"] == "node of the ranks around it"
        assert "likely, not certain" in found[0].message
        assert f"missing between {straggler - 1} and {straggler + 1}" in entry["reason"]
    else:
        assert entry["confidence"] == "high" and entry["host_from"] == "logs"


@pytest.mark.parametrize("world", [64, 512])
def test_megatron_names_the_stuck_rank_then_the_groups_it_blocks(world: int) -> None:
    # the straggler never issued tensor-parallel work 49387: its 7 TP peers wait there, and the
    # data-parallel groups holding those peers wait in their all-reduce 12005
    files, host = gen.shaped_job("megatron", world)
    r = verdict.analyse_text(concat(files))
    s = gen.straggler_of(world)
    tp, dp = 100 + s // 8, 200 + s % 8
    stuck = [e for e in r["stragglers"] if e["role"] == "stuck"]
    assert {e["rank"] for e in stuck} == {s}
    blocks = {g["pg"]: g for g in stuck[0]["blocks"]}
    assert set(blocks) == {str(tp), str(dp)}
    assert blocks[str(tp)]["desc"] == "TENSOR_MODEL_PARALLEL_GROUP"
    assert blocks[str(tp)]["waiting"] == 7 and blocks[str(dp)]["waiting"] == world // 8 - 1
    through = stuck[0]["blocks_through"]
    assert sorted(int(g["pg"]) for g in through) == [200 + k for k in range(8) if k != s % 8]
    peers = [r for r in range(s - s % 8, s - s % 8 + 8) if r != s]
    assert sorted({v for g in through for v in g["via"]}) == peers
    blocked = [e for e in r["stragglers"] if e["role"] == "blocked"]
    assert {e["rank"] for e in blocked} == set(peers)
    assert all(e["blocked_by"] == s for e in blocked)
    found = findings(r)[0]
    assert found.hosts == (host,)  # the peers' node is the same, but only the stuck rank counts
    assert "TENSOR_MODEL_PARALLEL_GROUP" in found.message
    assert "7 DATA_PARALLEL_GROUP groups" in found.message
    assert f"through rank(s) {peers[0]}-" in found.message


def test_healthy_twin_in_every_shape_accuses_nobody() -> None:
    # the same collections of a job that did not hang: noise, init lines, no timeouts
    for shape in gen.SHAPES:
        files, _ = gen.shaped_job(shape, 64)
        healthy = {name: "\n".join(ln for ln in body.splitlines()
                                   if "Watchdog" not in ln and "failure detected" not in ln)
                   for name, body in files.items()}
        r = verdict.analyse_text(concat(healthy))
        assert r["stragglers"] == [] and findings(r) == [], shape


def test_many_silent_ranks_are_missing_logs_not_stragglers() -> None:
    # 5 of 64 rank numbers missing (not one): logs not collected, nobody accused
    files, _ = gen.shaped_job("no-nccl-debug", 64)
    text = "\n".join(ln for ln in concat(files).splitlines()
                     if not any(f"[rank{r}]:" in ln for r in (3, 17, 29, 44, 50)))
    r = verdict.analyse_text(text)
    assert r["stragglers"] == [] and r["verdict"] == "all-waiting"


def test_a_silent_rank_at_a_node_boundary_keeps_its_host_unknown() -> None:
    # rank 40 is the first of gpu006: its neighbours 39 (gpu005) and 41 (gpu006) disagree
    files, _ = gen.shaped_job("no-nccl-debug", 64, straggler=40)
    r = verdict.analyse_text(concat(files))
    assert first(r) == (40, None) and r["stragglers"][0]["confidence"] == "likely"
    assert "rank_hosts" in findings(r)[0].message


def test_a_silent_last_rank_is_not_guessed() -> None:
    # the highest rank silent and no world size: nothing says it exists, nobody is accused
    files, _ = gen.shaped_job("no-nccl-debug", 64, straggler=63)
    r = verdict.analyse_text(concat(files))
    assert r["stragglers"] == [] and r["verdict"] == "all-waiting"


@pytest.mark.parametrize(("line", "expect"), [
    # kubectl logs --timestamps
    ("2025-01-20T18:44:12.715298746Z [rank37]:[E1206 ProcessGroupNCCL.cpp:632] [Rank 37] "
     "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE)",
     {"tagged_rank": 37, "logged_on": None}),
    # journalctl -o short / short-precise / short-iso, RFC 3164 with a priority, RFC 5424
    ("Jan 20 18:44:12 gpu005 python3[48230]: [Rank 37] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE)", {"logged_on": "gpu005"}),
    ("Jan  2 18:44:12.123456 gpu005 torchrun[1]: [Rank 37] Watchdog caught collective operation"
     " timeout: WorkNCCL(SeqNum=9)", {"logged_on": "gpu005"}),
    ("2025-01-20T18:44:12+0000 gpu005.cluster python3[48230]: [rank37]:[Rank 37] Watchdog "
     "caught collective operation timeout: WorkNCCL(SeqNum=9)",
     {"logged_on": "gpu005.cluster", "tagged_rank": 37}),
    ("<14>Jan 20 18:44:12 gpu005 python3[48230]: [Rank 37] Watchdog caught collective "
     "operation timeout: WorkNCCL(SeqNum=9)", {"logged_on": "gpu005"}),
    ("<14>1 2025-01-20T18:44:12.7Z gpu005 python3 48230 - - [Rank 37] Watchdog caught "
     "collective operation timeout: WorkNCCL(SeqNum=9)", {"logged_on": "gpu005"}),
    # torchrun --tee: role + local rank; MPICH -prepend-rank / Intel MPI -l; srun --label padded
    ("[default5]:[Rank 37] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)",
     {"local_rank": 5, "tagged_rank": None}),
    ("[trainer5]:[Rank 37] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)",
     {"local_rank": 5}),
    ("[37] [Rank 37] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)",
     {"tagged_rank": 37}),
    ("  37: [Rank 37] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)",
     {"task": 37}),
    # a journald line of an srun task: both prefixes, outermost first
    ("Jan 20 18:44:12 gpu005 srun[9]: 37: [rank37]:[Rank 37] Watchdog caught collective "
     "operation timeout: WorkNCCL(SeqNum=9)", {"logged_on": "gpu005", "task": 37,
                                              "tagged_rank": 37}),
    # NCCL's host:pid:tid under kubectl's stamp
    ("2025-01-20T18:44:12.1Z trainjob-worker-5:48230:48230 [5] NCCL INFO comm 0x1 rank 37 "
     "nranks 64 cudaDev 5 - Init COMPLETE", {"host": "trainjob-worker-5", "comm_rank": 37}),
])
def test_collector_and_launcher_prefixes(line: str, expect: dict) -> None:
    event = grammar.parse_line(line)
    assert event is not None
    assert {k: getattr(event, k) for k in expect} == expect


@pytest.mark.parametrize(("path", "host"), [
    ("/logs/gpu005.log", "gpu005"), ("/logs/gpu005.cluster.local.out", "gpu005.cluster.local"),
    ("/logs/gpu005/stderr.log", "gpu005"), ("/logs/node-12.log.gz", "node-12"),
    ("/logs/slurm-4242.out", None), ("/logs/rank37.log", None), ("/logs/train.log", None),
    ("/var/log/messages", None), ("/tmp/attempt_0/3/stderr.log", None), ("/logs/job_12.log", None),
])
def test_host_from_a_log_name(path: str, host: str | None) -> None:
    assert hosts.host_from_name(path) == host


def test_host_from_a_log_name_with_an_inventory() -> None:
    # srun -o train-%N.out: the inventory knows gpu005; a name it does not know is not a host
    merged = {"named": {37: (None, ("train-gpu005", "train", "gpu005"))},
              "present": {37: None}}
    assert hosts.Locator(merged, {}, ["gpu004", "gpu005"]).locate(37) == (
        "gpu005", "log file name")
    assert hosts.Locator(merged, {}, ["gpu101"]).locate(37) == (None, None)


@pytest.mark.parametrize("shape", ["kubectl", "torchrun-tee", "journald"])
def test_the_node_side_script_lets_every_shape_through(tmp_path: Path, shape: str) -> None:
    # the probe's own sh script over the files as collected: prefixed lines pass its greps,
    # and the fleet merge names the same straggler
    files, host = gen.shaped_job(shape, 64)
    gen.write_job(tmp_path / "job", files)
    out = subprocess.run(["sh", "-c", ranks.command({"logs": str(tmp_path / "job" / "*")})],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    facts = PROBE.parse(out)
    fleet = [gen.host_of(8 * i, fmt=gen.POD if shape == "kubectl" else "gpu{:03d}")
             for i in range(8)]  # the inventory: read on the first node, all eight known
    found = PROBE.check_fleet({fleet[0]: facts}, context(params={"peers": fleet}))
    assert codes(found) == ["straggler-rank"] and found[0].hosts == (host,)
    assert found[0].evidence["ranks"][0]["rank"] == 37


@pytest.mark.parametrize("shape", ["srun-label", "mpirun"])
def test_a_combined_512_rank_log_keeps_every_ranks_init_line(tmp_path: Path, shape: str) -> None:
    # one file for all 512 ranks: the node keeps every rank's NCCL init line (not the first 64),
    # so the straggler's host is known from its own line
    files, host = gen.shaped_job(shape, 512)
    gen.write_job(tmp_path / "job", files)
    out = subprocess.run(["sh", "-c", ranks.command({"logs": str(tmp_path / "job" / "*")})],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    facts = PROBE.parse(out)
    assert facts["ranks_seen"] == 512 and facts["world_size"] == 512
    assert (facts["stragglers"][0]["rank"], facts["stragglers"][0]["host"]) == (301, host)
