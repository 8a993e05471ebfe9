"""Which node a rank-log file is: from Slurm's output pattern or the host-shaped part of its
name (never a whole composite stem: train-48213-gpu-c05.out is gpu-c05), and first of all from
the hosts its lines name (NCCL's prefix, torch elastic's failure table, srun's errors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.cli import main
from probes.rankfiles import analyse_files
from probes.rankprogress import hosts


def watchdog(rank: int, seq: int) -> str:
    return (f"[rank{rank}]:[E120 10:40:00.000000 ProcessGroupNCCL.cpp:616] [Rank {rank}] "
            f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600083 "
            "milliseconds before timing out.")


@pytest.mark.parametrize(("path", "host"), [
    ("/logs/train-48213-gpu-c05.out", "gpu-c05"),          # %x-%j-%N
    ("/logs/gpu-c05-48213.out", "gpu-c05"),                # %N-%j
    ("/logs/48213-gpu-c05.err", "gpu-c05"),                # %j-%N
    ("/logs/gpu-c05.48213.err", "gpu-c05"),                # %N.%j
    ("/logs/train-48213_7-gpu-c05.out", "gpu-c05"),        # %x-%A_%a-%N
    ("/logs/llama3-70b-48213-gpu005.cluster.local.out", "gpu005.cluster.local"),
    ("/logs/train-48213-gpu-001.out", "gpu-001"),
    ("/logs/train-gpu005.out", "gpu005"),                  # a generic word, then the node
    ("/logs/gpu005-rank3.log", "gpu005"),                  # the node, then a rank
    ("/logs/job_12-gpu005.log", "gpu005"),
    ("/logs/slurm-48213_7.out", None),                     # Slurm's default: no node
    ("/logs/llama3-70b-48213.out", None),                  # %x-%j: a job name is no host
    ("/logs/run7-48213.out", None),
    ("/logs/gpu005.log", "gpu005"), ("/logs/node-12.log.gz", "node-12"),
    ("/logs/gpu005/stderr.log", "gpu005"), ("/logs/rank37.log", None),
])
def test_the_node_in_a_log_name(path: str, host: str | None) -> None:
    assert hosts.host_from_name(path) == host


@pytest.mark.parametrize(("pattern", "path", "host"), [
    ("%x-%j-%N.out", "/l/train-48213-gpu-c05.out", "gpu-c05"),
    ("%x-%j-%N.out", "/l/a-b-48213-gpu-c05.out", "gpu-c05"),   # a job name with dashes
    ("/l/%x-%j-%N.out", "/other/train-48213-gpu-c05.out", None),
    ("%N.%4j.%t.log", "/l/gpu-c05.0042.3.log", "gpu-c05"),
    ("slurm-%j.out", "/l/slurm-48213.out", None),               # no %N: names no node
    ("%x-%j-%N.out", "/l/train-48213.out", None),               # does not match
])
def test_the_node_from_slurms_output_pattern(pattern: str, path: str, host: str | None) -> None:
    assert hosts.host_from_name(path, pattern) == host


def test_name_tokens_offer_every_run_of_words_to_the_inventory() -> None:
    tokens = hosts.name_tokens("/logs/train-48213-gpu-c05.out")
    assert tokens[0] == "gpu-c05" and "train-48213-gpu-c05" in tokens and "48213" not in tokens
    merged = {"named": {3: (None, tuple(tokens))}, "present": {3: None}}
    assert hosts.Locator(merged, {}, ["gpu-c04", "gpu-c05"]).locate(3) == (
        "gpu-c05", "log file name")


def test_the_hosts_lines_name() -> None:
    lines = ["gpu-c06:48230:48397 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : x",
             "[2026-06-23 15:45:07] gpu-c06:420:437 [5] nvls.cc:379 (nvlsAllocateMem) NCCL WARN y",
             "srun: error: gpu-c06: task 3: Out Of Memory",
             "  host      : gpu-c06.cluster.local",
             "slurmstepd: error: *** STEP 48213.0 ON gpu-c06 CANCELLED AT 2025-01-20T10:41:00 ***",
             "[W socket.cpp:464] [c10d] The client socket has failed to connect to [gpu-c01]:29500"]
    assert hosts.content_hosts(lines[:5]) == {"gpu-c06"}
    assert hosts.content_hosts(lines[5:]) == set()  # the peer it could not reach is not its own
    assert hosts.host_in_line(lines[1]) == "gpu-c06" and hosts.host_in_line(lines[3]) is None


def test_parse_rank_logs_places_ranks_by_content_then_by_name(tmp_path: Path) -> None:
    # gpu-c05's file names no host inside: its name does; gpu-c06's NCCL line names it; a file
    # named after gpu-c07 whose lines say gpu-c09 is gpu-c09's (the content is what ran)
    files = {"train-48213-gpu-c05.out": [watchdog(0, 1580), watchdog(1, 1580)],
             "train-48213-gpu-c06.out": [watchdog(2, 1579), watchdog(3, 1580),
                                         "gpu-c06:48230:48397 [0] transport/net_ib.cc:1295 "
                                         "NCCL WARN NET/IB : Got completion from peer x"],
             "train-48213-gpu-c07.out": [watchdog(4, 1580), "  host      : gpu-c09",
                                         "  rank      : 4 (local_rank: 0)"]}
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    result = analyse_files(sorted(str(tmp_path / n) for n in files))
    where = {row["rank"]: row["host"] for row in result["table"]}
    assert where == {0: "gpu-c05", 1: "gpu-c05", 2: "gpu-c06", 3: "gpu-c06", 4: "gpu-c09"}
    (straggler,) = result["stragglers"]
    assert (straggler["rank"], straggler["host"], straggler["host_from"]) == (
        2, "gpu-c06", "logs")


def test_a_slurm_pattern_decides_where_the_name_is_ambiguous(tmp_path: Path) -> None:
    # %x-%j.%N with a job name shaped like a host and a node name that is not ("node-a"):
    # the heuristic takes "bert2"; the pattern says which part is %N
    path = tmp_path / "bert2-48213.node-a.out"
    path.write_text(watchdog(0, 10) + "\n")
    assert analyse_files([str(path)])["table"][0]["host"] == "bert2"
    assert analyse_files([str(path)], name_pattern="%x-%j.%N.out")["table"][0]["host"] == \
        "node-a"
    other = tmp_path / "bert2-48213.out"
    other.write_text(watchdog(0, 10) + "\n")
    assert analyse_files([str(other)], name_pattern="%x-%j.out")["table"][0]["host"] is None


def test_the_cli_names_the_node_of_a_slurm_named_log(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "train-48213-gpu-c05.out", tmp_path / "train-48213-gpu-c06.out"
    a.write_text(watchdog(0, 1580) + "\n" + watchdog(1, 1580) + "\n")
    b.write_text(watchdog(2, 1579) + "\n" + watchdog(3, 1580) + "\n")
    assert main(["parse", "rank-logs", str(a), str(b), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"host": "gpu-c06"' in out and "train-48213-gpu-c06" not in out.replace(
        str(b), "")
