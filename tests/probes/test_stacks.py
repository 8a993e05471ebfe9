"""The stacks probe: py-spy output parsed, grouped across ranks, and refused where it cannot run.

Outputs are built in the exact shape the node-side script prints (the baseline was assembled
from it); one test runs the script for real against live Python processes on this machine
(skipped where py-spy or ptrace is unavailable) and checks that nothing but frames leaves.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from probes import stacks
from probes.base import get_probe
from probes.parsers import ParseError
from tests.probes.probe_outputs import baseline, by_code, codes, context, sh_accepts

PROBE = get_probe("stacks")
DP = "/usr/local/lib/python3.10/dist-packages"
WAIT = [("wait", f"{DP}/torch/distributed/distributed_c10d.py", 2501),
        ("all_reduce", f"{DP}/torch/distributed/distributed_c10d.py", 2219),
        ("wrapper", f"{DP}/torch/distributed/c10d_logger.py", 83),
        ("reduce_gradients", "/workspace/llama3/train.py", 142),
        ("train_step", "/workspace/llama3/train.py", 214),
        ("main", "/workspace/llama3/train.py", 355),
        ("<module>", "/workspace/llama3/train.py", 359)]
LOADER = [("_recv_bytes", "/usr/lib/python3.10/multiprocessing/connection.py", 419),
          ("recv", "/usr/lib/python3.10/multiprocessing/connection.py", 250),
          ("_next_data", f"{DP}/torch/utils/data/dataloader.py", 1295),
          ("__next__", f"{DP}/torch/utils/data/dataloader.py", 631),
          ("load_next_batch", "/workspace/llama3/train.py", 188),
          ("train_step", "/workspace/llama3/train.py", 205),
          ("main", "/workspace/llama3/train.py", 355),
          ("<module>", "/workspace/llama3/train.py", 359)]


def output(ranks: dict[int, list[tuple[str, str, int]]], *, pyspy: bool = True,
           errors: dict[int, str] | None = None, uid: int = 0, scope: str = "1") -> str:
    """What the script prints on a node running these ranks (rank -> main-thread frames)."""
    errors = errors or {}
    lines = ["=== diag:section ptrace", f"uid {uid}", f"ptrace_scope {scope}",
             "CapEff:\t000001ffffffffff", "=== diag:rc ptrace 0", "=== diag:section procs"]
    pids = {r: 48230 + i for i, r in enumerate(sorted({*ranks, *errors}))}
    lines += [f"--- pid {pid} ppid 48211 rank {r} comm python3" for r, pid in pids.items()]
    lines.append("=== diag:rc procs 0")
    if not pyspy:
        return "\n".join([*lines, "=== diag:missing stacks"]) + "\n"
    lines.append("=== diag:section stacks")
    for r, pid in pids.items():
        lines.append(f"--- dump {pid} rank {r}")
        if r in errors:
            lines.append(errors[r])
        else:
            lines.append(f"Thread {pid} (idle) main")
            lines += [f"    {fn} ({file}:{line})" for fn, file, line in ranks[r]]
            lines += [f"Thread {pid + 170} (idle)",
                      "    wait (/usr/lib/python3.10/threading.py:324)"]
        lines.append(f"--- rc {pid} {1 if r in errors else 0}")
    return "\n".join([*lines, "=== diag:rc stacks 0"]) + "\n"


def job(per_host: int = 8, hosts: int = 2, odd: dict[int, list] | None = None) -> dict:
    """facts per host for ranks 0..N, all in the all_reduce wait except *odd*."""
    odd = odd or {}
    return {f"gpu{h + 1:03d}": PROBE.parse(output({
        r: odd.get(r, WAIT) for r in range(h * per_host, (h + 1) * per_host)}))
        for h in range(hosts)}


def test_command_is_valid_sh():
    assert sh_accepts(PROBE.command({})).returncode == 0
    assert sh_accepts(PROBE.command({"process_pattern": "x'; reboot; '$(id)"})).returncode == 0


def test_parse_baseline_and_no_finding():
    facts = PROBE.parse(baseline("stacks"))
    assert (facts["processes"], facts["dumped"], facts["groups"]) == (9, 8, 1)
    assert (facts["children"], facts["launchers"]) == (16, 1)  # DataLoader workers, torchrun
    assert facts["ptrace_scope"] == 1 and facts["cap_sys_ptrace"] is True
    assert [s["rank"] for s in facts["stacks"]] == list(range(8))
    assert facts["stacks"][0]["frames"][0] == {
        "function": "_engine_run_backward", "line": 825,
        "file": f"{DP}/torch/autograd/graph.py"}
    ctx = context()
    assert PROBE.check("gpu001", facts, ctx) == []
    assert PROBE.check_fleet({"gpu001": facts, "gpu002": PROBE.parse(baseline("stacks"))},
                             ctx) == []


def test_outlier_rank_is_named_with_host_and_frames():
    found = PROBE.check_fleet(job(odd={11: LOADER}), context())
    assert codes(found) == ["outlier-stack"]
    f = found[0]
    assert f.hosts == ("gpu002",)
    assert f.evidence["ranks"] == [{"rank": 11, "host": "gpu002", "pid": 48233}]
    assert f.evidence["frames"][4] == "load_next_batch (/workspace/llama3/train.py:188)"
    assert f.evidence["majority_frames"][1].startswith("all_reduce (")
    assert (f.evidence["majority_count"], f.evidence["ranks_compared"]) == (15, 16)
    assert "rank 11 on gpu002 is in _recv_bytes" in f.message
    assert len(f.evidence["frames"]) == stacks.TOP_FRAMES


def test_install_prefix_does_not_split_groups():
    # one node's torch lives in site-packages of a conda env, the other's in dist-packages
    conda = [(fn, file.replace(DP, "/opt/conda/lib/python3.10/site-packages"), line)
             for fn, file, line in WAIT]
    found = PROBE.check_fleet(job(odd={r: conda for r in range(8, 16)}), context())
    assert found == []


def test_ranks_in_the_same_other_place_form_one_finding():
    odd = {r: LOADER for r in range(0, 128, 4)}  # 32 of 128 ranks in the loader
    found = PROBE.check_fleet(job(per_host=16, hosts=8, odd=odd), context())
    assert len(found) == 1 and found[0].evidence["total"] == 32
    assert len(found[0].evidence["ranks"]) == stacks.MAX_LISTED
    assert "and 12 more" in found[0].message and len(found[0].hosts) == 8


def test_no_majority_no_outlier():
    # ranks spread over three places (running, not hung in one collective): nothing to say
    other = [("forward", "/workspace/llama3/model.py", 88), *WAIT[3:]]
    odd = {r: (LOADER if r % 3 == 1 else other) for r in range(16) if r % 3}
    assert PROBE.check_fleet(job(odd=odd), context()) == []
    assert PROBE.check_fleet(job(per_host=1, hosts=2, odd={1: LOADER}), context()) == []


def test_processes_without_rank_are_left_out():
    # a helper process without RANK (e.g. a launcher wrapper) is not a rank to compare
    facts = job(odd={})
    facts["gpu001"]["stacks"].append({"pid": 1, "rank": None, "comm": "python3", "state": "idle",
                                      "threads": 1, "frames": [], "stack_id": "elsewhere"})
    assert PROBE.check_fleet(facts, context()) == []


def test_pyspy_missing_is_not_measured():
    facts = PROBE.parse(output({0: WAIT}, pyspy=False))
    assert facts["pyspy"] is False and facts["processes"] == 1
    found = PROBE.check("gpu001", facts, context())
    assert codes(found) == ["not-measured"] and "py-spy is not installed" in found[0].message


def test_ptrace_refused_is_not_measured_with_the_reason():
    # py-spy's real message when it may not attach (another user's process, yama scope 1)
    denied = ("Permission Denied: Try running again with elevated permissions by going "
              "'sudo env \"PATH=$PATH\" !!'")
    facts = PROBE.parse(output({}, errors={0: denied, 1: denied}, uid=1001))
    assert [e["ptrace_denied"] for e in facts["errors"]] == [True, True]
    found = PROBE.check("gpu001", facts, context())
    assert codes(found) == ["not-measured"]
    assert "ptrace not permitted" in found[0].message
    assert "ptrace_scope=1" in found[0].message and "uid 1001" in found[0].message


def test_other_pyspy_failures_and_timeouts_are_not_measured():
    facts = PROBE.parse(output({}, errors={0: "Error: Failed to find python version from "
                                              "target process"}))
    found = PROBE.check("gpu001", facts, context())
    assert "py-spy failed: Error: Failed to find python version" in found[0].message
    timed_out = output({0: WAIT}).replace("--- rc 48230 0", "--- rc 48230 124")
    lines = [ln for ln in timed_out.splitlines()
             if not ln.startswith(("Thread", "    "))]
    facts = PROBE.parse("\n".join(lines) + "\n")
    assert "printed no stack" in facts["errors"][0]["error"]


def test_no_training_process_is_not_measured():
    found = PROBE.check("gpu001", PROBE.parse(output({})),
                        context(params={"process_pattern": "trn"}))
    assert codes(found) == ["not-measured"] and "no process matching 'trn'" in found[0].message


def test_garbage_is_a_parse_error():
    with pytest.raises(ParseError):
        PROBE.parse("bash: py-spy: command not found\n")
    with pytest.raises(ParseError):
        PROBE.parse(baseline("versions"))


def test_frame_and_file_helpers():
    assert stacks.short_file(f"{DP}/torch/x.py") == "torch/x.py"
    assert stacks.short_file("/home/u/proj/train.py") == "proj/train.py"
    dumps = stacks.parse_dumps("--- dump 7 rank 3\nThread 0x7F12 (active+gil)\n"
                               "    f (a.py:1)\n    g (b.py:2)\n--- rc 7 0\n")
    assert dumps[0]["frames"][1] == {"function": "g", "file": "b.py", "line": 2}
    assert dumps[0]["rank"] == 3 and dumps[0]["state"] == "active+gil"


# --- the script for real, on this machine ------------------------------------------------------

RANKPROC = '''
import os, sys, threading, time

def all_reduce_wait():
    sys.stdin.buffer.read(1)

def load_next_batch():
    sys.stdin.buffer.read(1)

def train_step():
    if os.environ.get("OUTLIER") == "1":
        load_next_batch()
    else:
        all_reduce_wait()

def main():
    if os.environ.get("FORK_WORKER") == "1":
        child = os.fork()
        if child == 0:
            sys.stdin.buffer.read(1)
            os._exit(0)
        print("child", child, flush=True)
    threading.Thread(target=time.sleep, args=(3600,), name="secret-thread-name",
                     daemon=True).start()
    print("ready", flush=True)
    train_step()

main()
'''


def _pyspy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return found if os.access(found, os.X_OK) else None


def test_script_on_live_processes(tmp_path: Path):
    # three ranks blocked in Python (one in the data loader, one with a forked worker), their
    # command lines and environments holding secrets that must not leave the node
    pyspy = _pyspy()
    if pyspy is None:
        pytest.skip("py-spy is not installed (pip install py-spy)")
    script = tmp_path / f"rankproc_{uuid.uuid4().hex[:8]}.py"
    script.write_text(RANKPROC)
    procs: list[subprocess.Popen[bytes]] = []
    extra: list[int] = []
    try:
        for rank, env in ((0, {}), (1, {"FORK_WORKER": "1"}), (2, {"OUTLIER": "1"})):
            proc = subprocess.Popen(
                [sys.executable, str(script), "--api-key=sk-live-secret"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                env={"PATH": os.environ.get("PATH", ""), "RANK": str(rank),
                     "HF_TOKEN": "hf_env_secret", **env})
            procs.append(proc)
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()
            if line.startswith("child"):
                extra.append(int(line.split()[1]))
                line = proc.stdout.readline().decode()
            assert line.strip() == "ready"
        env = dict(os.environ, PATH=f"{Path(pyspy).parent}:{os.environ.get('PATH', '')}")
        out = subprocess.run(["sh", "-c", PROBE.command({"process_pattern": script.name})],
                             capture_output=True, text=True, timeout=120, env=env).stdout
        facts = PROBE.parse(out)
        if facts["errors"] and all(e["ptrace_denied"] for e in facts["errors"]):
            pytest.skip("ptrace is not permitted here")
        for secret in ("sk-live-secret", "hf_env_secret", "secret-thread-name", "HF_TOKEN",
                       "--api-key"):
            assert secret not in out
        assert facts["children"] == 1 and facts["dumped"] == 3
        assert sorted(s["rank"] for s in facts["stacks"]) == [0, 1, 2]
        found = PROBE.check_fleet({"this-node": facts}, context())
        assert codes(found) == ["outlier-stack"]
        outlier = by_code(found, "outlier-stack")[0]
        assert [r["rank"] for r in outlier.evidence["ranks"]] == [2]
        assert outlier.evidence["frames"][0].startswith("load_next_batch (")
        assert outlier.evidence["majority_frames"][0].startswith("all_reduce_wait (")
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        for pid in extra:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
