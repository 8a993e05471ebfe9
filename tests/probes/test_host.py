"""The host probe: load, iowait over one second, memory and swap, kernel OOM-killer lines."""

from __future__ import annotations

import subprocess
import sys

import pytest

from probes.base import get_probe
from probes.host import command, parse
from probes.parsers import ParseError
from tests.probes.probe_outputs import baseline, by_code, codes, context, edit, replace, sh_accepts

PROBE = get_probe("host")
BASE = baseline("host")
STAT1 = "cpu  4871234567 1203456 612345678 21576882967 9876543 0 23456789 0 0 0"
STAT2 = "cpu  4871238267 1203456 612346098 21576901167 9876583 0 23456829 0 0 0"
# A global OOM kill as a 5.15 kernel prints it, ~10 minutes before the probe ran.
OOM_LINES = (
    "[1209001.412233] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|"
    "__GFP_COMP), order=0, oom_score_adj=0\n"
    "[1209001.412790] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,"
    "mems_allowed=0-1,global_oom,task_memcg=/system.slice/slurmstepd.scope/job_4471,"
    "task=python3,pid=48233,uid=1001\n"
    "[1209001.412851] Out of memory: Killed process 48233 (python3) total-vm:412339812kB, "
    "anon-rss:251274312kB, file-rss:191232kB, shmem-rss:8192kB, UID:1001 pgtables:502312kB "
    "oom_score_adj:0\n")


def run(text: str, host: str = "gpu001", **thresholds):
    facts = parse(text)
    return facts, PROBE.check(host, facts, context(thresholds=thresholds))


def test_command_is_valid_sh():
    # the script is accepted by sh -n
    assert sh_accepts(command({})).returncode == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_script_on_this_host():
    # run for real: every fact comes back (the kernel log may be closed to this user)
    out = subprocess.run(["sh", "-c", command({})], capture_output=True, text=True,
                         timeout=60).stdout
    facts = parse(out)
    assert facts["cpu_count"] >= 1 and facts["load_per_cpu"] is not None
    assert facts["iowait_pct"] is not None and 0 <= facts["iowait_pct"] <= 100
    assert 0 < facts["mem_available_pct"] <= 100 and facts["swap_used_bytes"] is not None


def test_parse_baseline():
    # 224 CPUs at load 38, 0.18% iowait, 89% memory available, no swap, no OOM kill
    f = parse(BASE)
    assert f["cpu_count"] == 224 and f["load_1m"] == 38.41
    assert f["load_per_cpu"] == pytest.approx(38.41 / 224, abs=1e-3)
    assert f["iowait_pct"] == pytest.approx(100 * 40 / 22400, abs=0.01)
    assert f["mem_available_pct"] == pytest.approx(100 * 1887654320 / 2113468688, abs=0.01)
    assert f["swap_used_bytes"] == 0 and f["swap_total_bytes"] == 0
    assert f["oom_kills"] == [] and f["kernel_log_source"] == "dmesg"
    assert f["uptime_s"] == 1209634.87


def test_baseline_raises_nothing():
    # the healthy node: no finding
    _, findings = run(BASE)
    assert findings == []
    assert PROBE.check_fleet({"a": parse(BASE), "b": parse(BASE)}, context()) == []


def test_garbage_is_a_parse_error():
    # foreign text and another probe's output are refused
    with pytest.raises(ParseError):
        parse("Permission denied (publickey).\n")
    with pytest.raises(ParseError):
        parse(baseline("storage"))


def test_cpu_saturated():
    # load 412 on 224 CPUs (too many data-loader workers)
    text = edit(BASE, "loadavg", "38.41 37.96 37.55", "412.50 398.12 350.04")
    f, findings = run(text)
    assert f["load_per_cpu"] == pytest.approx(1.842, abs=1e-3)
    assert codes(findings) == ["cpu-saturated"]


def test_iowait_high():
    # a quarter of the last second went to I/O wait (idle and iowait deltas swapped around)
    second = "cpu  4871238267 1203456 612346098 21576895567 9882183 0 23456829 0 0 0"
    f, findings = run(edit(BASE, "stat", STAT2, second))
    assert f["iowait_pct"] == pytest.approx(25.18, abs=0.01)
    assert codes(findings) == ["iowait-high"]


def test_memory_nearly_exhausted():
    # 2% of memory left
    text = edit(BASE, "meminfo", "MemAvailable:   1887654320 kB", "MemAvailable:     42269373 kB")
    _, findings = run(text)
    assert codes(findings) == ["host-memory-pressure"]


def test_swap_in_use():
    # memory is fine but half the swap is used
    text = edit(BASE, "meminfo", "SwapTotal:              0 kB\nSwapFree:               0 kB",
                "SwapTotal:       67108860 kB\nSwapFree:        33554430 kB")
    f, findings = run(text)
    assert f["swap_used_bytes"] == 33554430 * 1024
    assert codes(findings) == ["host-memory-pressure"]


def test_a_little_old_swap_is_fine():
    # 1% of swap used: no finding
    text = edit(BASE, "meminfo", "SwapTotal:              0 kB\nSwapFree:               0 kB",
                "SwapTotal:       67108860 kB\nSwapFree:        66437771 kB")
    assert run(text)[1] == []


def test_recent_oom_kill():
    # the kernel OOM killer ended rank 3's python3 ten minutes ago
    text = edit(BASE, "oom", "source dmesg\n", "source dmesg\n" + OOM_LINES)
    f, findings = run(text)
    assert f["oom_kills"] == [{"pid": 48233, "process": "python3", "age_s": 633.5,
                               "cgroup": False}]
    [oom] = by_code(findings, "host-oom-killer")
    assert oom.severity == "error" and oom.evidence["count"] == 1
    assert codes(findings) == ["host-oom-killer"]


def test_cgroup_oom_kill_from_journal():
    # a Slurm job's memory cgroup limit, read from journalctl -o short-monotonic
    line = ("[1209400.118201] gpu001 kernel: Memory cgroup out of memory: Killed process 48231 "
            "(python3) total-vm:398112344kB, anon-rss:240112312kB, file-rss:0kB, shmem-rss:0kB, "
            "UID:1001 pgtables:480112kB oom_score_adj:0\n")
    text = replace(BASE, oom=f"uptime 1209634.87\nsource journalctl\n{line}")
    f, findings = run(text)
    assert f["kernel_log_source"] == "journalctl"
    assert f["oom_kills"][0]["cgroup"] is True and f["oom_kills"][0]["age_s"] == 234.8
    assert "memory cgroup" in findings[0].message


def test_old_oom_kill_is_ignored():
    # an OOM kill 12 days ago (near boot) is outside the 120-minute window
    old = OOM_LINES.replace("[1209001.", "[  3001.")
    text = edit(BASE, "oom", "source dmesg\n", "source dmesg\n" + old)
    assert run(text)[1] == []
    assert codes(run(text, oom_window_minutes=60 * 24 * 30)[1]) == ["host-oom-killer"]


def test_kernel_log_unreadable_is_not_measured():
    # dmesg restricted to root and no journal access
    text = replace(BASE, oom="uptime 1209634.87\nsource none\n")
    f, findings = run(text)
    assert f["oom_kills"] is None
    assert codes(findings) == ["not-measured"]
