"""Logs and outputs of any size: rank logs read within a memory bound that does not grow with
the number of files, lines or nodes; files that are not text skipped with their name.

Memory is measured with tracemalloc (Python allocations, the part that could grow with the
input); bench/rankmem.py measures the whole process's peak RSS at 1,024 ranks and 100 MB.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assistant.cli import main
from bench import ranks as gen
from probes import rankfiles, ranks
from probes.base import get_probe
from tests.probes.probe_outputs import codes, context

PROBE = get_probe("ranks")
HOSTS = [f"gpu{i:03d}" for i in range(1, 9)]


def peak_mb(call: Callable[[], Any]) -> tuple[Any, float]:
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    """64 ranks on gpu001-gpu008, rank 37 quiet, ~60 KB per log."""
    gen.write_job(tmp_path / "job", gen.job(64, {37: gen.RankSpec("quiet")}, noise_lines=400))
    return tmp_path / "job"


def test_local_files_give_the_probes_answer(job: Path) -> None:
    out = subprocess.run(["sh", "-c", ranks.command({"logs": str(job / "*.log")})],
                         capture_output=True, text=True, check=True).stdout
    node = PROBE.parse(out)
    local = rankfiles.read_local([str(job / "rank*.log")], peers=HOSTS)
    assert local["stragglers"][0]["rank"] == node["stragglers"][0]["rank"] == 37
    assert local["table"] == node["table"] and local["files_read"] == 64


def test_big_files_are_read_from_both_ends(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = rankfiles.read_local([str(job / "*.log")])
    monkeypatch.setattr(ranks, "WHOLE_FILE_BYTES", 1000)
    monkeypatch.setattr(rankfiles, "TAIL_BYTES", 2000)
    ends = rankfiles.read_local([str(job / "*.log")])
    assert ends["stragglers"] == whole["stragglers"] and ends["table"] == whole["table"]


def test_memory_does_not_grow_with_the_number_of_files(tmp_path: Path) -> None:
    # 16 and then 128 logs of ~200 KB: what is held is per rank, not per byte read
    peaks = []
    for world in (16, 128):
        gen.write_job(tmp_path / str(world), gen.job(world, {3: gen.RankSpec("quiet")},
                                                     noise_lines=1400))
        size = sum(p.stat().st_size for p in (tmp_path / str(world)).iterdir())
        result, peak = peak_mb(lambda w=world: rankfiles.read_local(
            [str(tmp_path / str(w) / "*.log")]))
        assert result["stragglers"][0]["rank"] == 3
        peaks.append((size / 1e6, peak))
    (small_mb, small_peak), (big_mb, big_peak) = peaks
    assert big_mb > 7 * small_mb  # eight times the input...
    assert big_peak < 3 * small_peak + 2 and big_peak < 12  # ...not eight times the memory


def test_a_gigantic_line_is_never_held_whole(tmp_path: Path) -> None:
    # 64 MB without a newline (a log someone cat'ed a tensor into), then the hang lines
    log = tmp_path / "rank5.log"
    body = "\n".join(gen.rank_log(5, 8, gen.RankSpec(), noise_lines=2))
    with log.open("w") as f:
        f.write("x" * (64 << 20) + "\n" + body + "\n")
    result, peak = peak_mb(lambda: rankfiles.analyse_files([str(log)]))
    assert result["timed_out_ranks"] == 1 and peak < 8


def test_a_file_that_is_not_text_is_skipped_with_its_name(job: Path) -> None:
    (job / "core.12345").write_bytes(b"\x7fELF\x02\x01\x01\x00" + os.urandom(1 << 20))
    (job / "rank99.log.gz").write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + os.urandom(4096))
    (job / "rank98.log").write_text("")  # empty: kept, it says rank 98 started
    local = rankfiles.read_local([str(job / "*")])
    assert sorted(s["path"].rsplit("/", 1)[1] for s in local["skipped_files"]) == [
        "core.12345", "rank99.log.gz"]
    assert {s["why"] for s in local["skipped_files"]} == {"not text (binary data)"}
    assert local["stragglers"][0]["rank"] == 37
    # the node-side script skips them too, and says which
    out = subprocess.run(["sh", "-c", ranks.command({"logs": str(job / "*")})],
                         capture_output=True, text=True, check=True).stdout
    facts = PROBE.parse(out)
    assert sorted(s["path"].rsplit("/", 1)[1] for s in facts["skipped_files"]) == [
        "core.12345", "rank99.log.gz"]
    assert f"{job}/rank98.log" in facts["log_files"] and "ELF" not in out
    assert facts["stragglers"][0]["rank"] == 37


def test_a_log_with_stray_non_utf8_bytes_is_still_text(job: Path) -> None:
    with (job / "rank00.log").open("ab") as f:
        f.write(b"caf\xe9 au lait \xff\xfe\n")
    out = subprocess.run(["sh", "-c", ranks.command({"logs": str(job / "*.log")})],
                         capture_output=True, text=True, check=True).stdout
    assert PROBE.parse(out)["skipped_files"] == []
    assert rankfiles.read_local([str(job / "*.log")])["skipped_files"] == []


def test_every_node_reading_one_shared_directory_costs_one_nodes_memory(job: Path) -> None:
    # 64 nodes send the same output (the logs are on shared storage): parsed once, shared
    out = subprocess.run(["sh", "-c", ranks.command({"logs": str(job / "*.log")})],
                         capture_output=True, text=True, check=True).stdout
    _, one = peak_mb(lambda: PROBE.parse(out + "\n"))  # a distinct text: parsed for real

    def fleet() -> dict[str, Any]:
        return {f"gpu{i:03d}": PROBE.parse(out) for i in range(64)}

    kept, sixty_four = peak_mb(fleet)
    assert sixty_four < one + 1  # not 64 times one node's facts
    assert kept["gpu000"]["sources"] is kept["gpu063"]["sources"]
    found = PROBE.check_fleet(kept, context(params={"peers": list(kept)}))
    assert codes(found) == ["straggler-rank"]


def test_parse_rank_logs_cli_skips_binary_and_names_it(job: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (job / "core.12345").write_bytes(b"\x00" * 4096)
    files = [str(job / "core.12345"), *sorted(str(p) for p in job.glob("rank*.log"))]
    code = main(["parse", "rank-logs", *files, "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == f"diag: skipped {job}/core.12345: not text (binary data)\n"
    assert '"straggler"' in out
    assert main(["parse", "rank-logs", str(job / "core.12345")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not text (binary data): no rank log to read" in err


def test_parse_refuses_a_huge_file_after_a_bounded_read(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as f:
        f.truncate(1 << 30)  # sparse 1 GB
    start = time.monotonic()
    code, peak = peak_mb(lambda: main(["parse", "nvidia-smi", str(huge)]))
    err = capsys.readouterr().err
    assert code == 2 and "more than 32 MiB" in err and err.count("\n") == 1
    assert peak < 120 and time.monotonic() - start < 10


def test_parse_refuses_an_endless_stream() -> None:
    # `yes | diag parse dmesg-xid -`: the read stops at the bound, one line, exit 2
    proc = subprocess.run(
        f"yes 'NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.' | "
        f"{sys.executable} -m assistant.cli parse dmesg-xid -",
        shell=True, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "more than 32 MiB" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
