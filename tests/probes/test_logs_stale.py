"""Stale evidence: a log file last written before the job started (a re-used output file, a
--logs glob that reaches last week's run) holds an earlier run's lines. They are named
(job-log-earlier-run, info) and never judged as this incident's (probes/logs_script.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from probes.faults.apply import attach_log_lines, judge
from probes.logs import PROBE, command, parse
from tests.probes.probe_outputs import baseline, codes, context

ME = socket.gethostname().split(".")[0]
# NCCL User Guide, Troubleshooting, "Shared memory" (a container's 64 MB /dev/shm)
SHM = f"{ME}:2045:2290 [0] NCCL WARN Error: failed to extend /dev/shm/nccl-03v824 to 4194660 bytes"
# NVIDIA/nccl-tests#206
MEMLOCK = (f"{ME}:1011:1234 [3] NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot "
           "allocate memory")
DAY = 86400


def _walk(params: dict) -> tuple[dict, list]:
    """The script run here, parsed, its job stream judged as a walk does."""
    text = subprocess.run(["sh", "-c", command({"process_pattern": "diag-none-xyz", **params})],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    facts = parse(text)
    attach_log_lines(text, {"lines": "job"}, facts)  # probes/catalog.yaml logs: {lines: job}
    ctx = context(params=params)
    found = PROBE.check(ME, facts, ctx) + judge("logs", {ME: facts}, ctx.thresholds)
    return facts, found


def _write(path: Path, line: str, mtime: float) -> Path:
    path.write_text(line + "\n")
    os.utime(path, (mtime, mtime))
    return path


def test_a_file_last_written_before_the_job_started_is_an_earlier_run(tmp_path: Path) -> None:
    now = time.time()
    old = _write(tmp_path / "rank0.log", SHM, now - 3 * DAY)  # last week's run, same name
    new = _write(tmp_path / "rank1.log", MEMLOCK, now - 60)
    facts, found = _walk({"log": f"{tmp_path}/*.log", "job_start_epoch": int(now - 3600)})
    files = {f["path"]: f for f in facts["files"]}
    assert files[str(old)]["stale"] == "before-job" and files[str(new)]["stale"] is None
    assert [x["text"] for x in facts["lines"] if x.get("stale")] == [SHM]
    assert facts["lines_stale"] == 1
    # the current file's fault is judged; the earlier run's is named, at info, and not judged
    assert "nccl-ib-memlock-limit" in codes(found)
    assert "nccl-shm-too-small" not in codes(found)
    (earlier,) = [f for f in found if f.code == "job-log-earlier-run"]
    assert earlier.severity == "info" and str(old) in earlier.message
    assert earlier.evidence["lines"] == [SHM]


def test_without_a_job_an_operator_file_outside_the_window_is_an_earlier_run(
        tmp_path: Path) -> None:
    old = _write(tmp_path / "train.log", SHM, time.time() - 3 * DAY)
    facts, found = _walk({"log": str(old)})
    assert facts["files"][0]["stale"] == "old"
    assert "nccl-shm-too-small" not in codes(found)
    assert "job-log-earlier-run" in codes(found)
    # the operator widens the window for a post-mortem: the lines count again
    facts, found = _walk({"log": str(old), "window_minutes": 5 * 1440})
    assert facts["files"][0]["stale"] is None
    assert "nccl-shm-too-small" in codes(found) and "job-log-earlier-run" not in codes(found)


def test_a_file_written_since_the_job_started_is_current(tmp_path: Path) -> None:
    # the job has run for two days: its own file, last written a minute ago, is current,
    # whatever its age against the window
    log = _write(tmp_path / "train.log", SHM, time.time() - 60)
    facts, found = _walk({"log": str(log), "job_start_epoch": int(time.time() - 2 * DAY)})
    assert facts["files"][0]["stale"] is None
    assert "nccl-shm-too-small" in codes(found) and "job-log-earlier-run" not in codes(found)


def test_a_live_ranks_reused_output_file_not_written_since_the_job_started(
        tmp_path: Path) -> None:
    # `python train.py >> train.log`: the rank appends to last run's file and has written
    # nothing yet; what the file holds is the earlier run's
    log = _write(tmp_path / "train.log", SHM, time.time() - DAY)
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                 "diag-stale-rank.py"], stdout=out, start_new_session=True)
    try:
        os.utime(log, (time.time() - DAY, time.time() - DAY))
        facts, found = _walk({"process_pattern": "diag-stale-rank",
                              "job_start_epoch": int(time.time() - 600)})
    finally:
        proc.kill()
        proc.wait()
    mine = [f for f in facts["files"] if f["path"] == str(log)]
    assert mine and mine[0]["source"] in ("fd1", "fd2") and mine[0]["stale"] == "before-job"
    assert "nccl-shm-too-small" not in codes(found)


def test_an_older_recording_without_the_stale_section_reads_as_before() -> None:
    facts = parse(baseline("logs"))
    assert facts["missing"] == [] and facts["lines_stale"] == 0
    assert all(f["stale"] is None for f in facts["files"])


def test_the_jobs_start_comes_from_scontrols_start_time() -> None:
    import datetime

    from assistant.fleet.slurmjob import JobInfo

    info = JobInfo(id="48213", state="RUNNING", nodes=["gpu-c05"],
                   start_time="2026-12-07T10:00:00", fields={"JobId": "48213"})
    local = datetime.datetime(2026, 12, 7, 10, 0, 0).timestamp()  # scontrol's local time
    assert info.start_epoch() == int(local)
    # an srun job without a batch step still says when it started
    assert info.logs_params() == {"job_start_epoch": int(local)}
    # SLURM_TIME_FORMAT=relative ("Tod 10:00"), or no start yet: unknown, not a guess
    for text in ("Tod 10:00", "Unknown", "None", ""):
        info.start_time = text
        assert info.start_epoch() is None and "job_start_epoch" not in info.logs_params()


OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
       "total capacity of 79.15 GiB of which 1.06 GiB is free.")


def _probe(name: str, params: dict) -> tuple[str, dict, list]:
    from probes.base import get_probe

    probe = get_probe(name)
    text = subprocess.run(["sh", "-c", probe.command(params)], capture_output=True, text=True,
                          timeout=60, check=True).stdout
    facts = probe.parse(text)
    ctx = context(params=params)
    return text, facts, probe.check(ME, facts, ctx) + probe.check_fleet({ME: facts}, ctx)


def test_joblog_reads_no_oom_of_an_earlier_run(tmp_path: Path) -> None:
    # last week's run wrote its OOM in the file this run's --logs glob reaches
    _write(tmp_path / "train.log", OOM, time.time() - 3 * DAY)
    _, facts, found = _probe("joblog", {"log": f"{tmp_path}/*.log"})
    assert facts["log_files"] == [] and facts["oom_count"] == 0
    assert codes(found) == ["not-measured"] and "earlier run" in found[0].message
    # the same file written since the job started is this run's
    _write(tmp_path / "train.log", OOM, time.time() - 60)
    _, facts, found = _probe("joblog", {"log": f"{tmp_path}/*.log",
                                        "job_start_epoch": int(time.time() - 3 * DAY)})
    assert "cuda-oom" in codes(found)


def test_nccl_and_ranks_read_no_file_of_an_earlier_run(tmp_path: Path) -> None:
    _write(tmp_path / "rank0.log", SHM, time.time() - 3600)
    params = {"log": f"{tmp_path}/*.log", "logs": f"{tmp_path}/*.log",
              "job_start_epoch": int(time.time() - 600)}
    text, facts, _ = _probe("nccl", params)
    assert facts["log_files"] == []
    attach_log_lines(text, {"log": "job"}, facts)
    assert "nccl-shm-too-small" not in codes(judge("nccl", {ME: facts}, {}))
    text, facts, _ = _probe("ranks", params)
    assert "rank0.log" not in text


def test_lines_stamped_long_before_the_job_in_a_current_file_are_an_earlier_run(
        tmp_path: Path) -> None:
    # `>> train.log` across runs: NCCL 2.26+ stamps WARN lines "[%F %T] " (local time); last
    # week's stamped line is an earlier run's whatever the zone, this run's line counts
    import datetime

    week = datetime.datetime.fromtimestamp(time.time() - 7 * DAY).strftime("%Y-%m-%d %H:%M:%S")
    near = datetime.datetime.fromtimestamp(time.time() - 300).strftime("%Y-%m-%d %H:%M:%S")
    log = tmp_path / "train.log"
    log.write_text(f"[{week}] {SHM}\n[{near}] {MEMLOCK}\n")
    facts, found = _walk({"log": str(log), "job_start_epoch": int(time.time() - 3600)})
    assert facts["files"][0]["stale"] is None  # the file itself is current
    assert [x["text"] for x in facts["lines"] if x.get("stale")] == [f"[{week}] {SHM}"]
    assert "nccl-shm-too-small" not in codes(found)
    assert "nccl-ib-memlock-limit" in codes(found)
    assert "job-log-earlier-run" in codes(found)
    # a stamp within half a day of the cutoff could be any zone's: counted
    log.write_text(f"[{near}] {SHM}\n")
    facts, found = _walk({"log": str(log), "job_start_epoch": int(time.time() - 3600)})
    assert "nccl-shm-too-small" in codes(found)
