"""The procs component: the training processes' limits, cgroup, /dev/shm and devices."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from probes import procs
from probes.parsers import ParseError
from probes.procs import command, parse
from tests.probes.probe_outputs import (
    REAL,
    baseline,
    block,
    codes,
    context,
    edit,
    replace,
    section_text,
    sh_accepts,
)

PROBE = procs.PROBE
BASE = baseline("procs")
JOB = "/system.slice/slurmstepd.scope/job_4471"
MEMLOCK = "limit Max locked memory         unlimited            unlimited            bytes     "


def run(text: str, host: str = "gpu001"):
    facts = parse(text)
    return facts, PROBE.check(host, facts, context())


def test_command_is_valid_sh() -> None:
    assert sh_accepts(command({})).returncode == 0
    assert sh_accepts(command({"process_pattern": "it's python"})).returncode == 0


def test_command_never_reads_environ_itself() -> None:
    # the PID finder greps environ files for NCCL_ (names only); nothing here prints them
    text = command({})
    assert text.count("environ") == 1 and "grep -lsaz '^NCCL_' /proc/[0-9]*/environ" in text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_script_on_this_host() -> None:
    # a stand-in training process: its limits, cgroup, /dev/shm and devices are read
    # (not named like a training process: every loopback host of the suite's fleets reads
    # this machine's /proc, and its walks look for "python.*train" by default)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                "diag_procs_standin"])
    try:
        time.sleep(0.3)
        started = time.monotonic()
        out = subprocess.run(["sh", "-c", command({"process_pattern": "diag_procs_standin"})],
                             capture_output=True, text=True, timeout=60).stdout
        assert time.monotonic() - started < 5
    finally:
        sleeper.kill()
        sleeper.wait()
    facts, _ = run(out)
    mine = [p for p in facts["processes"] if p["pid"] == sleeper.pid]
    assert len(mine) == 1
    proc = mine[0]
    assert proc["memlock_unlimited"] is not None and proc["nofile_soft"]
    assert proc["cgroup"] is not None and proc["cgroup_version"] in (1, 2)
    if os.geteuid() == 0:  # another user's /proc/PID/root may not be readable
        assert proc["shm_size_bytes"] and proc["has_nvidia_dev"] is not None
        assert proc["container"] is False and proc["mnt_ns_differs"] is False
    assert facts["host_uverbs_count"] is not None and facts["cgroup_v2"] is not None


def test_parse_baseline() -> None:
    # torchrun and 8 ranks in one Slurm task cgroup; the job's memory.max is the limit
    facts, findings = run(BASE)
    assert facts["process_count"] == 9 and findings == []
    assert facts["host_uverbs_count"] == 8 and facts["host_nvidia_dev_count"] == 8
    rank = facts["processes"][1]
    assert rank["pid"] == 48230 and rank["comm"] == "python3"
    assert rank["memlock_unlimited"] is True and rank["memlock_soft_bytes"] is None
    assert rank["nofile_soft"] == 131072 and rank["nproc_soft"] == 8256063
    assert rank["cgroup"] == JOB + "/step_0/user/task_0" and rank["cgroup_version"] == 2
    assert rank["mem_max_bytes"] == 2061584302080 and rank["mem_limit_cgroup"] == JOB
    assert rank["mem_unlimited"] is False and rank["mem_current_bytes"] == 442866049024
    assert rank["mem_anon_pct"] == pytest.approx(14.6)
    assert rank["cgroup_oom_kills"] == 0 and rank["cgroup_oom_events"] == 0
    assert rank["pids_max"] is None and rank["pids_current"] == 1874
    assert rank["shm_fstype"] == "tmpfs" and rank["shm_size_bytes"] == 4096 * 264183586
    assert rank["shm_used_pct"] == pytest.approx(0.1)
    assert (rank["has_uverbs"], rank["uverbs_count"], rank["has_nvidia_dev"],
            rank["nvidia_dev_count"], rank["has_nvidiactl"]) == (True, 8, True, 8, True)
    assert rank["container"] is False and rank["container_hint"] is None


def test_docker_container_small_shm_and_memlock() -> None:
    # a rank in a Docker container: 64 KiB memlock, 64 MB /dev/shm, its own mount namespace
    text = BASE.replace(MEMLOCK, "limit Max locked memory         65536                65536"
                                 "                bytes     ")
    text = text.replace(f"cgroup 0::{JOB}/step_0/user/task_0",
                        "cgroup 0::/system.slice/docker-4f1c9a.scope")
    text = text.replace("shm_mount 30 24 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs "
                        "rw,inode64", "shm_mount 1742 1731 0:312 / /dev/shm rw,nosuid,nodev,"
                                      "noexec,relatime - tmpfs shm rw,size=65536k,inode64")
    text = text.replace("shm_statfs 4096 264183586 263890722\n", "shm_statfs_error\n")
    text = text.replace("mntns mnt:[4026531841]\n--- pid", "mntns mnt:[4026532761]\n--- pid")
    facts, findings = run(text)
    rank = facts["processes"][0]
    assert rank["memlock_unlimited"] is False and rank["memlock_soft_bytes"] == 65536
    assert rank["shm_size_bytes"] == 64 << 20 and rank["shm_used_bytes"] is None
    assert rank["container"] is True and rank["container_hint"] == "docker"
    assert rank["mnt_ns_differs"] is True
    assert rank["mem_max_bytes"] is None  # that cgroup's files were not read
    assert findings == []  # faults come from the catalogue, not from the check


def test_enroot_keeps_the_job_cgroup_but_not_the_mount_namespace() -> None:
    text = edit(BASE, "procs", "mntns mnt:[4026531841]\n--- pid 48231",
                "mntns mnt:[4026532999]\n--- pid 48231")
    rank = run(text)[0]["processes"][1]
    assert rank["container"] is True and rank["container_hint"] == "mount-namespace"


def test_cgroup_v1_memory_limit_and_kills() -> None:
    # cgroup v1 (hybrid host): memory.limit_in_bytes on the job, oom_kill in memory.oom_control
    procs_text = (
        "--- pid 5120 comm python3\n"
        "limit Max locked memory         unlimited            unlimited            bytes\n"
        "cgroup 11:pids:/slurm/uid_1001/job_77/step_0/task_0\n"
        "cgroup 4:memory:/slurm/uid_1001/job_77/step_0/task_0\n"
        "cgroup 1:name=systemd:/system.slice/slurmd.service\n"
        "cgroup 0::/system.slice/slurmd.service\n")
    levels = []
    for path, limit, usage, kills, rss in (
            ("/slurm/uid_1001/job_77/step_0/task_0", "9223372036854771712", "1000", "0", "900"),
            ("/slurm/uid_1001/job_77/step_0", "9223372036854771712", "1000", "0", "900"),
            ("/slurm/uid_1001/job_77", "68719476736", "68000000000", "3", "67000000000"),
            ("/slurm/uid_1001", "9223372036854771712", "68000000000", "3", "67000000000"),
            ("/slurm", "9223372036854771712", "68000000000", "3", "67000000000")):
        levels.append(f"--- cgroup memory {path}\nmemory.limit_in_bytes {limit}\n"
                      f"memory.usage_in_bytes {usage}\nmemory.failcnt 12\n"
                      f"memory.oom_control.oom_kill_disable 0\nmemory.oom_control.under_oom 0\n"
                      f"memory.oom_control.oom_kill {kills}\nmemory.stat.rss 5\n"
                      f"memory.stat.total_rss {rss}\n")
    levels.append("--- cgroup pids /slurm/uid_1001/job_77/step_0/task_0\npids.max 4096\n"
                  "pids.current 3900\n")
    text = replace(BASE, host="mntns mnt:[4026531840]\nuverbs 0\nnvidia 0\ncgroup2 none\n",
                   procs=procs_text, cgroups="".join(levels))
    proc = run(text)[0]["processes"][0]
    assert proc["cgroup_version"] == 1 and proc["cgroup"] == "/slurm/uid_1001/job_77/step_0/task_0"
    assert proc["mem_max_bytes"] == 68719476736
    assert proc["mem_limit_cgroup"] == "/slurm/uid_1001/job_77"
    assert proc["cgroup_oom_kills"] == 3 and proc["mem_failcnt"] == 12
    assert proc["mem_anon_pct"] == pytest.approx(97.5)
    assert proc["pids_max"] == 4096 and proc["pids_used_pct"] == pytest.approx(95.2)
    assert proc["has_uverbs"] is None  # no devices line: not read


def test_real_limits_sample_as_a_process() -> None:
    # a container's real /proc/1/limits, as the script prints its three rows
    sample = (REAL / "proc-limits__container-pid1-memlock-65536-nofile-1024-trailing-spaces.txt"
              ).read_text(encoding="utf-8")
    rows = [f"limit {line}" for line in sample.splitlines()
            if line.startswith(("Max locked memory", "Max open files", "Max processes"))]
    text = replace(BASE, procs="--- pid 1 comm python\n" + "\n".join(rows) + "\n", cgroups="")
    proc = run(text)[0]["processes"][0]
    assert (proc["memlock_soft_bytes"], proc["nofile_soft"], proc["nproc_soft"]) == \
        (65536, 1024, 62394)


def test_unreadable_process_is_not_measured() -> None:
    # another user's process: limits and cgroup read, its root and namespace not
    text = replace(BASE, procs="--- pid 7001 comm python3\nlimit_error unreadable\n"
                               "cgroup_error unreadable\ndevices unreadable\nmntns unreadable\n")
    facts, findings = run(text)
    proc = facts["processes"][0]
    assert proc["memlock_unlimited"] is None and proc["has_nvidia_dev"] is None
    assert proc["container"] is None
    assert codes(findings) == ["not-measured"]
    assert "pid 7001" in findings[0].message and "limits" in findings[0].message


def test_no_training_process_is_healthy_but_unusual() -> None:
    facts, findings = run(replace(BASE, procs="", cgroups=""))
    assert facts["processes"] == [] and facts["process_count"] == 0 and findings == []


def test_missing_sections_and_garbage() -> None:
    facts, findings = run(replace(BASE, cgroups=None))
    assert facts["missing"] == ["cgroups"] and codes(findings) == ["not-measured"]
    assert facts["processes"][0]["mem_max_bytes"] is None
    with pytest.raises(ParseError):
        parse(block("host", "uverbs 1\n"))
    with pytest.raises(ParseError):
        parse("Permission denied\n")
    garbled = edit(BASE, "procs", "shm_statfs 4096 264183586 263890722",
                   "shm_statfs 4096 lots none")
    assert parse(garbled)["processes"][0]["shm_size_bytes"] is None


def test_baseline_sections_are_the_scripts() -> None:
    # the baseline names the sections the script prints, in its order
    assert [name for name in ("host", "procs", "cgroups")
            if f"=== diag:section {name}" in command({})] == ["host", "procs", "cgroups"]
    assert section_text(BASE, "host").startswith("mntns ")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_training_process_finder_on_real_processes() -> None:
    # Real processes on this machine: one with an NCCL_* variable (a training process by
    # default), one whose environment only mentions NCCL_ in a value (not one); an explicit
    # pattern names the job's processes and nothing else.
    import os
    import subprocess

    from probes.nccl import training_pids_sh

    tag = f"diag-finder-{os.getpid()}"
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    nccl = subprocess.Popen(["sleep", "30"], env={**base, "NCCL_DEBUG": "INFO"})
    mention = subprocess.Popen(["sleep", "31"], env={**base, "NOTE": "see NCCL_DEBUG"})
    named = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(32)", tag],
                             env=base)
    try:
        def found(pattern: str | None) -> set[int]:
            out = subprocess.run(["sh", "-c", training_pids_sh(pattern, limit=10_000)],
                                 capture_output=True, text=True, timeout=30).stdout
            return {int(p) for p in out.split()}

        by_default = found(None)
        assert nccl.pid in by_default and mention.pid not in by_default
        # a diag script's helper with the job step's NCCL_* environment is not the job's
        nccl.kill()  # a training process by default for every walk on this machine: not
        nccl.wait()  # a moment longer than asked (the suite's loopback hosts read this /proc)
        helper = subprocess.Popen(["sh", "-c", "echo '=== diag:section x'; sleep 33; true"],
                                  env={**base, "NCCL_DEBUG": "INFO"}, start_new_session=True)
        try:
            deadline = time.monotonic() + 10
            while not (kids := _children(helper.pid)) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert kids and not kids & found(None), kids
        finally:  # the whole group: the orphaned `sleep 33` would be a training process
            os.killpg(helper.pid, signal.SIGKILL)
            helper.wait()
        explicit = found(tag)
        assert named.pid in explicit and nccl.pid not in explicit
        # a diag script's grandchild carrying the pattern in its own command line: the
        # script's `sh -c` (a shell, left out) runs awk with the pattern as an argument, and
        # awk's parent is that sh, not the script (CI read such a process as gpu008's)
        chain = subprocess.Popen(
            ["sh", "-c", "echo '=== diag:section x'; "
             f"sh -c 'awk \"BEGIN {{ system(\\\"sleep 34\\\") }}\" {tag}; true'; true"],
            env=base, start_new_session=True)
        try:
            deadline = time.monotonic() + 10
            awk: set[int] = set()
            while not awk and time.monotonic() < deadline:
                awk = {p for p in _descendants(chain.pid) if _comm(p) == "awk"}
                time.sleep(0.05)
            assert awk and not awk & found(tag), awk
            assert named.pid in found(tag)  # the job's own process is still found
        finally:
            os.killpg(chain.pid, signal.SIGKILL)
            chain.wait()
    finally:
        for proc in (nccl, mention, named):
            proc.kill()
            proc.wait()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        kids = _children(todo.pop()) - found
        found |= kids
        todo.extend(kids)
    return found


def _children(pid: int) -> set[int]:
    import glob

    kids = set()
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid):
            kids.add(int(stat.split("/")[2]))
    return kids
