"""The logs component: the ranks' output found on the host (their stdout/stderr files,
torchrun's log directories, Slurm's output patterns, --logs), grepped there with the fault
catalogue's job ERE, and each line credited to the host that answers for it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.base import split_sections
from probes.faults.apply import attach_log_lines, judge
from probes.logs import PROBE, command, parse
from probes.logs_script import _TORCHRUN_AWK, slurm_word
from probes.parsers import ParseError
from tests.probes.probe_outputs import baseline, block, codes, context, edit, real, replace

ME = socket.gethostname().split(".")[0]
NCCL_OWN = f"{ME}:100:200 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from " \
           "peer 10.0.2.17<42317> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
NCCL_OTHER = "gpu-zz9:1:2 [3] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : " \
             "port error"
TABLE = ["Root Cause (first observed failure):", "[0]:", "  time      : 2025-01-20_10:21:03",
         "  host      : {host}", "  rank      : 3 (local_rank: 3)",
         "  exitcode  : -9 (pid: 48233)", "  error_file: <N/A>",
         "  traceback : Signal 9 (SIGKILL) received by PID 48233"]


def run(params: dict) -> str:
    out = subprocess.run(["sh", "-c", command(params)], capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout


@pytest.fixture()
def procs() -> Iterator[list[int]]:
    """Processes started by a test, ended (by pid) afterwards."""
    started: list[int] = []
    yield started
    for pid in started:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def start(procs: list[int], argv: list[str], out: Path | None = None, **env: str) -> int:
    stdout = open(out, "ab") if out else subprocess.DEVNULL  # noqa: SIM115 - the child's
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.STDOUT,
                            env={**os.environ, **env}, start_new_session=True)
    if out:
        stdout.close()  # type: ignore[union-attr]
    procs.append(proc.pid)
    return proc.pid


SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


# --- the script -------------------------------------------------------------------------------

@pytest.mark.parametrize("params", [
    {},
    {"log": "/var/log/x*.log", "slurm_output": ["/o/%x-%j-%N.out"], "slurm_nodes": ["a", "b"]},
    {"slurm_output": ["/o/it's $(touch /tmp/diag-pwned) `id`-%N-%3t-%n.out", "/o/a\\%N"],
     "slurm_batch_host": "gpu-c05.cluster", "log": ["~/l/*.log", "/p/x'y\"z"],
     "process_pattern": "train'; echo pwned", "window_minutes": 5,
     "job_start_epoch": 1733500000},
])
def test_the_script_is_posix_sh(params: dict) -> None:
    assert subprocess.run(["dash", "-n", "-c", command(params)]).returncode == 0


def test_the_script_runs_here_and_injects_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    out = run({"slurm_output": [f"{tmp_path}/o-$(touch {marker})-%N.out"],
               "log": f"{tmp_path}/`touch {marker}`*.log", "process_pattern": "diag-none-xyz"})
    assert not marker.exists()
    facts = parse(out)
    assert {"self", "procs", "files", "lines", "others"} <= set(split_sections(out))
    assert facts["hostname"] and facts["missing"] == [] and facts["errors"] == {}
    assert {u["source"] for u in facts["unmatched"]} == {"slurm", "param"}


def test_it_finds_the_ranks_output_wherever_it_went(tmp_path: Path, procs: list[int]) -> None:
    # a worker writing to a file, torchrun with --log-dir (two attempts), Slurm's per-node
    # pattern, the operator's glob: each found once, the newest torchrun attempt only
    out_log = tmp_path / "out.log"
    start(procs, [*SLEEP, "train.py"], out_log, NCCL_DEBUG="INFO")
    run_dir = tmp_path / "tr" / "myrun_ab12"
    for attempt, text in (("attempt_0", NCCL_OWN), ("attempt_1", "CUDA error: unspecified "
                                                                  "launch failure")):
        (run_dir / attempt / "0").mkdir(parents=True)
        (run_dir / attempt / "0" / "stderr.log").write_text(text + "\n")
    start(procs, [*SLEEP, "/usr/local/bin/torchrun", "--nproc-per-node", "2", "--log-dir",
                  str(tmp_path / "tr"), "-r", "3", "train.py", "--log_dir", "/nope"])
    (tmp_path / f"slurm-{ME}.out").write_text(
        "\n".join([NCCL_OWN, NCCL_OTHER, "plain line system not yet initialized",
                   *[t.format(host="gpu-zz9") for t in TABLE]]) + "\n")
    (tmp_path / "p1.txt").write_text("CUDA error: no CUDA-capable device is detected\n")
    with out_log.open("a") as f:
        f.write(NCCL_OWN + "\n")
    out = run({"slurm_output": [f"{tmp_path}/slurm-%N.out"], "log": f"{tmp_path}/*.txt"})
    facts = parse(out)
    mine = {f["path"]: f for f in facts["files"] if f["path"].startswith(str(tmp_path))}
    assert mine[str(out_log)]["source"] in ("fd1", "fd2")
    assert mine[str(run_dir / "attempt_1" / "0" / "stderr.log")]["source"] == "torchrun"
    assert str(run_dir / "attempt_0" / "0" / "stderr.log") not in mine
    slurm = mine[f"{tmp_path}/slurm-{ME}.out"]
    assert slurm["source"] == "slurm" and slurm["hosts_named"] == 2 and slurm["shared"]
    assert mine[f"{tmp_path}/p1.txt"]["source"] == "param"
    torchrun = [t for t in facts["torchrun"] if t["log_dir"] == str(tmp_path / "tr")]
    assert torchrun and torchrun[0]["redirects"] == "3"
    lines = [(x["file"], x["text"], x["own"]) for x in facts["lines"]
             if str(x["file"]).startswith(str(tmp_path))]
    # the shared Slurm file: this host's NCCL line is its own; the other host's, the unplaced
    # line and the failure table naming gpu-zz9 are not
    assert (slurm["path"], NCCL_OWN, True) in lines
    assert (slurm["path"], NCCL_OTHER, False) in lines
    assert (slurm["path"], "plain line system not yet initialized", False) in lines
    assert (slurm["path"], "exitcode  : -9 (pid: 48233)", False) in lines
    assert not any("host      :" in t for _, t, _ in lines)
    assert (str(out_log), NCCL_OWN, True) in lines
    assert PROBE.check(ME, facts, context(params={"slurm_output": ["x"]})) == []


def test_torchrun_default_directory_under_its_tmpdir(tmp_path: Path, procs: list[int]) -> None:
    base = tmp_path / "torchelastic_q1w2e3" / "none_x7y8" / "attempt_0" / "3"
    base.mkdir(parents=True)
    (base / "error.json").write_text('{"message": "Signal 11 (SIGSEGV) received by PID 5"}\n')
    start(procs, [*SLEEP, "/opt/venv/bin/torchrun", "--standalone", "train.py"],
          TMPDIR=str(tmp_path))
    facts = parse(run({}))
    found = [f for f in facts["files"] if f["path"] == str(base / "error.json")]
    assert found and found[0]["source"] == "torchrun" and found[0]["scope"] == "host"
    assert any(x["text"].startswith('{"message": "Signal 11') for x in facts["lines"])


def test_slurm_task_and_node_ids_come_from_the_ranks(tmp_path: Path, procs: list[int]) -> None:
    for name in ("o-3-1.log", "o-4-1.log", "o-3-0.log"):
        (tmp_path / name).write_text("x\n")
    start(procs, [*SLEEP, "train.py"], SLURM_PROCID="3", SLURM_NODEID="1", NCCL_DEBUG="WARN")
    facts = parse(run({"slurm_output": [f"{tmp_path}/o-%t-%n.log"]}))
    paths = {f["path"]: f["scope"] for f in facts["files"] if f["source"] == "slurm"}
    assert paths == {f"{tmp_path}/o-3-1.log": "host"}


# --- the parser -------------------------------------------------------------------------------

def test_the_healthy_baseline_reads_and_raises_nothing() -> None:
    facts = parse(baseline("logs"))
    assert len(facts["files"]) == 16 and facts["lines"] == [] and facts["process_count"] == 9
    assert {f["source"] for f in facts["files"]} == {"fd1", "fd2"}
    assert facts["torchrun"][0]["log_dir"] == "/shared/jobs/llama3-70b/logs/torchrun"
    assert PROBE.check("gpu001", facts, context()) == []


def test_ranks_writing_to_pipes_are_not_measured_not_healthy() -> None:
    text = replace(baseline("logs"), files="",
                   procs="pid 48230 job srun\nfd1 48230 pipe:[1]\nfd2 48230 pipe:[2]\n")
    (found,) = PROBE.check("gpu001", parse(text), context())
    assert found.code == "not-measured" and "pipe or terminal" in found.message


def test_unreadable_fds_and_files_are_named() -> None:
    text = replace(baseline("logs"), files="unreadable slurm permission /o/x.out\n",
                   procs="pid 4 host python3\nfd1 4 ?\nfd2 4 ?\n")
    facts = parse(text)
    assert facts["fds_unreadable"] == 1 and facts["processes"][0]["fd1"] is None
    messages = [f.message for f in PROBE.check("gpu001", facts, context())]
    assert any("/proc/PID/fd is not readable" in m for m in messages)
    assert any("/o/x.out (permission)" in m for m in messages)


def test_batch_output_missing_matters_only_on_the_batch_host() -> None:
    here = replace(baseline("logs"), files="batch_host yes\nnomatch slurm /o/t-48213-%N.out\n")
    there = replace(baseline("logs"), files="batch_host no\nnomatch slurm /o/t-48213-%N.out\n")
    assert codes(PROBE.check("gpu001", parse(here), context())) == ["not-measured"]
    assert PROBE.check("gpu002", parse(there), context()) == []
    skipped = replace(baseline("logs"), files="skipped slurm unexpanded /o/%x.out\n")
    assert "not expanded" in PROBE.check("gpu001", parse(skipped), context())[0].message


def test_nothing_running_and_nothing_given_is_not_measured() -> None:
    text = replace(baseline("logs"), procs="torchrun_live 0\n", files="")
    (found,) = PROBE.check("gpu001", parse(text), context())
    assert "no training process runs here" in found.message


def test_garbled_and_foreign_output() -> None:
    with pytest.raises(ParseError):
        parse("=== diag:section loadavg\n1 2 3\n=== diag:rc loadavg 0\n")
    with pytest.raises(ParseError):
        parse("random text\n")
    text = block("self", "host a\n") + block("procs", "pid x host\nfd9 1 /x\ngarbage\n") + \
        "=== diag:missing files\n" + block("lines", "--- file 7 matched x\nline\n")
    facts = parse(text)
    assert facts["missing"] == ["files", "others"] and facts["processes"] == []
    assert facts["lines"] == [{"file": None, "text": "--- file 7 matched x", "host": None,
                               "own": True}, {"file": None, "text": "line", "host": None,
                                              "own": True}]


def test_lines_a_host_answers_for_become_findings_and_the_others_do_not() -> None:
    # the catalogue reads the "lines" section as the job stream (catalog.yaml logs: {lines: job})
    text = edit(baseline("logs"), "lines", "", f"--- file 1 matched 1 named 1 shared 0\n"
                f"{real('nccl-debug__ib-retry-exceeded-status12-then-flush-status5-excerpt').splitlines()[0]}\n")
    text = replace(text, others=f"--- file 2\n{NCCL_OTHER}\n")
    facts = parse(text)
    attach_log_lines(text, {"lines": "job"}, facts)
    found = judge("logs", {"gpu001": facts}, context().thresholds)
    assert [f.code for f in found] == ["nccl-ib-retry-exceeded"]
    assert [x["own"] for x in facts["lines"]] == [True, False]


# --- pieces -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("pattern", "shown", "per_node"), [
    ("/o/%x-%j.out", None, None),
    ("/o/train-48213-%N.out", "/o/train-48213-%N.out", True),
    ("/o/t-%3t-%n.%%N", "/o/t-%t-%n.%N", True),
    ("/o/a\\%N.out", "/o/a%N.out", False),
    ("/o/50%d.out", "/o/50%d.out", False),
])
def test_slurm_filename_patterns(pattern: str, shown: str | None, per_node: bool | None) -> None:
    built = slurm_word(pattern)
    if shown is None:
        assert built is None
        return
    assert built is not None and built[1:] == (shown, per_node)
    assert subprocess.run(["dash", "-n", "-c", f"echo {built[0]}"]).returncode == 0


@pytest.mark.parametrize(("argv", "expect"), [
    (["python3", "/usr/bin/torchrun", "--log-dir", "/l", "-r", "3", "--tee=1", "t.py",
      "--log_dir", "/x"], ["is torchrun", "logdir /l", "redirects 3", "tee 1"]),
    (["python", "-m", "torch.distributed.run", "--log_dir=/a b", "-r3", "-m", "pkg",
      "--tee", "3"], ["is torchrun", "logdir /a b", "redirects 3"]),
    (["python3", "train.py", "--log-dir", "/x"], []),
])
def test_torchrun_options_from_its_command_line(argv: list[str], expect: list[str]) -> None:
    out = subprocess.run(["awk", _TORCHRUN_AWK], input="\n".join(argv) + "\n",
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == expect
