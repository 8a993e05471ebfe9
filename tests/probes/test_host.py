"""The host probe: load, iowait over one second, memory and swap, kernel OOM-killer lines."""

from __future__ import annotations

import subprocess
import sys

import pytest

from probes.base import get_probe
from probes.host import command, parse
from probes.parsers import ParseError
from tests.probes.probe_outputs import (
    baseline,
    by_code,
    codes,
    context,
    edit,
    real,
    replace,
    sh_accepts,
)

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
    assert facts["busy_pct"] is not None and 0 <= facts["busy_pct"] <= 100
    assert facts["procs_running"] >= 1  # the script's own grep runs
    assert 0 < facts["mem_available_pct"] <= 100 and facts["swap_used_bytes"] is not None
    # PSI where the kernel has it, else the reason is recorded (never a made-up 0)
    assert facts["psi_cpu_some_avg10"] is not None or "psi" in facts["errors"]


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
    # busy: (user 3700 + system 420 + softirq 40) of 22400 ticks; the run queue's lower sample
    assert f["busy_pct"] == pytest.approx(100 * 4160 / 22400, abs=0.01)
    assert f["procs_running"] == 39 and f["procs_blocked"] == 0
    assert f["psi_cpu_some_avg10"] == 0.27 and f["errors"] == {}


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


def busy(text: str, busy_pct: float) -> str:
    """The baseline with the CPUs *busy_pct* busy over the sample (224 CPUs, 100 Hz)."""
    total = 22400
    idle = round(total * (100 - busy_pct) / 100) - 40  # iowait stays 40 ticks
    second = (f"cpu  {4871234567 + total - idle - 40 - 460} 1203456 612346098 "
              f"{21576882967 + idle} 9876583 0 23456829 0 0 0")
    return edit(text, "stat", STAT2, second)


def queue(text: str, first: int, second: int) -> str:
    text = edit(text, "stat", "procs_running 41", f"procs_running {first}")
    return edit(text, "stat", "procs_running 39", f"procs_running {second}")


def psi(text: str, avg10: float) -> str:
    return edit(text, "psi", "some avg10=0.27", f"some avg10={avg10:.2f}")


def test_load_average_alone_is_not_saturation():
    # load 412 on 224 CPUs (tasks in D state count too): before, this alone was cpu-saturated
    text = edit(BASE, "loadavg", "38.41 37.96 37.55", "412.50 398.12 350.04")
    f, findings = run(text)
    assert f["load_per_cpu"] == pytest.approx(1.842, abs=1e-3)
    assert findings == []


def test_busy_224_cpu_host_with_short_run_queue_is_not_saturated():
    # 94% busy on 224 CPUs, 180 runnable, PSI 3%: a busy, well-fed host
    text = psi(queue(busy(BASE, 94), 190, 180), 3)
    f, findings = run(text)
    assert f["busy_pct"] == pytest.approx(94, abs=0.1) and f["procs_running"] == 180
    assert findings == []


def test_run_queue_twice_the_cpus_and_psi_is_saturated():
    # 99% busy, 450 runnable tasks on 224 CPUs, tasks waited 60% of the last 10 s
    text = psi(queue(busy(BASE, 99), 460, 450), 60)
    _, findings = run(text)
    [sat] = by_code(findings, "cpu-saturated")
    assert codes(findings) == ["cpu-saturated"] and sat.severity == "warning"
    assert sat.evidence["procs_running"] == 450 and sat.evidence["psi_cpu_some_avg10"] == 60
    assert "450 runnable tasks on 224 CPUs" in sat.message and "60%" in sat.message


def test_long_run_queue_without_psi_is_saturated():
    # a kernel without PSI: the run queue alone says work waits
    text = replace(queue(busy(BASE, 97), 300, 280), psi=None)
    f, findings = run(text)
    assert f["psi_cpu_some_avg10"] is None
    assert codes(findings) == ["cpu-saturated"]


def test_psi_pressure_with_a_momentary_short_queue_is_saturated():
    # one sample of the run queue was short, but tasks waited 35% of the last 10 s
    text = psi(queue(busy(BASE, 96), 500, 200), 35)
    assert codes(run(text)[1]) == ["cpu-saturated"]


def test_one_burst_of_runnable_tasks_is_not_a_queue():
    # 600 runnable in one sample, 150 in the other, PSI low: the lower sample counts
    text = psi(queue(busy(BASE, 95), 600, 150), 2)
    f, findings = run(text)
    assert f["procs_running"] == 150 and findings == []


def test_long_queue_on_idle_cpus_is_not_cpu_saturation():
    # runnable tasks but CPUs mostly idle (e.g. throttled by a cgroup quota): not this fault
    text = psi(queue(BASE, 400, 400), 40)
    assert run(text)[1] == []


def test_thresholds_come_from_the_thresholds_file_when_set():
    text = psi(queue(busy(BASE, 85), 300, 300), 10)
    assert run(text)[1] == []
    assert codes(run(text, cpu_busy_pct=80)[1]) == ["cpu-saturated"]


def test_psi_disabled_is_recorded_not_zero():
    # RHEL 8: CONFIG_PSI_DEFAULT_DISABLED, booted without psi=1
    text = replace(BASE, psi=("cat: /proc/pressure/cpu: Operation not supported\n", 1))
    f, findings = run(text)
    assert f["psi_cpu_some_avg10"] is None
    assert f["errors"] == {"psi": "cat: /proc/pressure/cpu: Operation not supported"}
    assert findings == []


def test_real_psi_samples_read_in_the_section():
    for name in ("proc-pressure__cpu-flatcar-kernel-5.8-some-line-only.txt",
                 "proc-pressure__cpu-linux-6.18-firecracker-vm-some-and-full-zero.txt"):
        f = parse(replace(BASE, psi=real(name)))
        assert f["psi_cpu_some_avg10"] is not None and f["errors"] == {}


def test_output_without_psi_section_or_run_queue_still_reads():
    # outputs recorded before these sections existed: facts unknown, not zero
    text = replace(BASE, stat=f"{STAT1}\n{STAT2}\n")
    text = text[:text.index("=== diag:section psi")] + text[text.index("=== diag:section mem"):]
    f, findings = run(text)
    assert f["procs_running"] is None and f["psi_cpu_some_avg10"] is None
    assert f["busy_pct"] is not None and findings == []


def test_cpu_time_unreadable_is_not_measured():
    text = replace(BASE, stat=("grep: /proc/stat: Permission denied\n", 2))
    f, findings = run(text)
    assert f["busy_pct"] is None
    assert codes(findings) == ["not-measured"]


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
    # the job's own memory limit, not the host's RAM: never host-oom-killer (a standing fault
    # of the node), the job-scope signature instead
    assert codes(findings) == ["job-cgroup-oom-killer"]
    assert "memory cgroup" in findings[0].message


def test_a_global_and_a_cgroup_oom_kill_are_told_apart():
    cgroup = ("[1209400.118201] Memory cgroup out of memory: Killed process 48231 (python3) "
              "total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:1001\n")
    text = edit(BASE, "oom", "source dmesg\n", "source dmesg\n" + OOM_LINES + cgroup)
    findings = run(text)[1]
    assert codes(findings) == ["host-oom-killer", "job-cgroup-oom-killer"]
    assert by_code(findings, "host-oom-killer")[0].evidence["count"] == 1
    assert by_code(findings, "job-cgroup-oom-killer")[0].evidence["kills"][0]["pid"] == 48231


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
