"""host: is the node itself starving the GPUs — CPU, I/O wait, memory, the OOM killer?

A data loader with too many workers saturates the CPUs, a slow filesystem shows as iowait, and
host memory exhaustion ends in swapping or in the kernel OOM killer silently ending one rank
(the others then hang in their next collective). All read from /proc, plus the kernel log for
OOM-killer lines; CPU time is sampled twice, one second apart, so busy time and iowait are
current.

CPU saturation is judged the way the USE method defines it, not from the load average: the
CPUs are busy (utilization from /proc/stat over the sample) *and* work waits for them
(saturation: the run queue, procs_running, longer than the CPU count, or PSI's "some" CPU
pressure high). Brendan Gregg, "The USE Method: Linux Performance Checklist": CPU saturation
is "vmstat 1, 'r' > CPU count" (vmstat's r is /proc/stat's procs_running). The load average
alone counts tasks in uninterruptible sleep too and smooths over a minute, so a 224-CPU node
94% busy with a short run queue is busy, not saturated.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    failure_text,
    finding,
    not_measured,
    script,
    section_reader,
    split_sections,
)
from probes.model import Finding
from probes.parsers import ParseError, proc_pressure

NAME = "host"

_OOM_ERE = "Out of memory: Kill|out of memory: Kill|oom-kill:|invoked oom-killer"
_STAT_ERE = "^(cpu |procs_running |procs_blocked )"
# CPU saturation levels (diag policy; the sources are in the module doc and the merge note):
# busy share of all CPUs over the sample, and PSI "some" CPU pressure over 10 s. PSI's "some"
# on many CPUs is the share of execution threads with a task waiting for them (kernel/sched/
# psi.c: SOME = min(nr_delayed_tasks / threads, 1)), so 20% means waiting work worth a fifth
# of the machine's CPUs. Read from the thresholds when they are there.
CPU_BUSY_PCT = 90.0
PSI_CPU_SOME_AVG10_PCT = 20.0
_SECTIONS = [
    ("loadavg", "cat /proc/loadavg"),
    ("nproc", "nproc 2>/dev/null || grep -c '^processor' /proc/cpuinfo"),
    # the CPU time line and the run queue (procs_running: tasks running or runnable now;
    # procs_blocked: in uninterruptible sleep), twice a second apart (proc(5), /proc/stat)
    ("stat", f"grep -E '{_STAT_ERE}' /proc/stat; sleep 1; grep -E '{_STAT_ERE}' /proc/stat"),
    # PSI (Linux >= 4.20; Documentation/accounting/psi.rst): "some" is the share of time tasks
    # waited for a CPU. Absent on older kernels; "Operation not supported" when the kernel was
    # built with CONFIG_PSI_DEFAULT_DISABLED and booted without psi=1 (RHEL 8).
    ("psi", "cat /proc/pressure/cpu"),
    ("meminfo", "grep -E '^(MemTotal|MemAvailable|MemFree|SwapTotal|SwapFree):' /proc/meminfo"),
    # Raw [seconds since boot] stamps (dmesg, journalctl short-monotonic) + uptime give each
    # line's age without parsing dates. dmesg may be restricted to root: then the journal.
    ("oom", "echo \"uptime $(cut -d' ' -f1 /proc/uptime)\"; "
            "if timeout 10 dmesg >/dev/null 2>&1; then echo 'source dmesg'; "
            f"timeout 10 dmesg | grep -E '{_OOM_ERE}' | tail -n 40; "
            "elif command -v journalctl >/dev/null 2>&1 && "
            "timeout 10 journalctl -k -b -q --no-pager -n 1 >/dev/null 2>&1; then "
            "echo 'source journalctl'; timeout 10 journalctl -k -b -q --no-pager "
            f"-o short-monotonic | grep -E '{_OOM_ERE}' | tail -n 40; "
            "else echo 'source none'; fi"),
]


def command(params: Mapping[str, Any]) -> str:
    return script(_SECTIONS)


_STAMP = re.compile(r"^\s*\[\s*(\d+(?:\.\d+)?)\]")
_KILLED = re.compile(r"\b[Oo]ut of memory: Kill(?:ed)? process (\d+) \(([^)]*)\)")
_CGROUP = re.compile(r"Memory cgroup out of memory", re.I)


def _cpu_times(line: str) -> list[int] | None:
    parts = line.split()
    if len(parts) < 5 or parts[0] != "cpu":
        return None
    try:
        return [int(v) for v in parts[1:]]
    except ValueError:
        return None


def _cpu_shares(text: str) -> tuple[float | None, float | None]:
    """(iowait %, busy %) of all CPUs' time between the first and the last ``cpu`` line."""
    samples = [t for t in (_cpu_times(line) for line in text.splitlines()) if t]
    if len(samples) < 2:
        return None, None
    first, second = samples[0], samples[-1]
    # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    delta = [b - a for a, b in zip(first[:8], second[:8], strict=False)]
    total = sum(delta)
    if total <= 0 or len(delta) < 5:
        return None, None
    # busy: neither idle nor waiting for I/O (steal counts: the CPU was not this host's)
    busy = total - delta[3] - delta[4]
    return round(100.0 * delta[4] / total, 2), round(100.0 * busy / total, 2)


def _procs(text: str, key: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(rf"^{key} (\d+)\s*$", text, re.M)]


def _psi_some_avg10(text: str) -> float:
    """``some avg10=2.04 avg60=0.75 avg300=0.40 total=157656722`` -> 2.04 (ParseError if the
    text is not /proc/pressure output)."""
    return float(proc_pressure.parse(text)["some"]["avg10"])


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "loadavg" not in sections or "meminfo" not in sections:
        raise ParseError("host: no loadavg/meminfo section (not the output of the host probe)")
    facts: dict[str, Any] = {
        "cpu_count": None, "load_per_cpu": None, "iowait_pct": None, "mem_available_pct": None,
        "swap_used_bytes": None, "load_1m": None, "load_5m": None, "load_15m": None,
        "mem_total_bytes": None, "mem_available_bytes": None, "swap_total_bytes": None,
        "oom_kills": None, "kernel_log_source": None, "uptime_s": None, "busy_pct": None,
        "procs_running": None, "procs_blocked": None, "psi_cpu_some_avg10": None,
        "errors": {}}

    section = section_reader(sections, need_output=True)

    load = (section("loadavg") or "").split()
    if len(load) >= 3:
        try:
            facts["load_1m"], facts["load_5m"], facts["load_15m"] = (float(v) for v in load[:3])
        except ValueError:
            raise ParseError(f"host: /proc/loadavg unreadable: {' '.join(load[:3])}") from None
    cpus = (section("nproc") or "").strip()
    facts["cpu_count"] = int(cpus) if cpus.isdecimal() and int(cpus) > 0 else None
    if facts["cpu_count"] and facts["load_1m"] is not None:
        facts["load_per_cpu"] = round(facts["load_1m"] / facts["cpu_count"], 3)
    stat = section("stat") or ""
    facts["iowait_pct"], facts["busy_pct"] = _cpu_shares(stat)
    running, blocked = _procs(stat, "procs_running"), _procs(stat, "procs_blocked")
    # the lower of the two samples: one burst of runnable threads is not a queue
    facts["procs_running"] = min(running) if running else None
    facts["procs_blocked"] = blocked[-1] if blocked else None
    psi = sections.get("psi")  # absent from outputs recorded before the section existed
    if psi is not None and not psi.missing:
        with contextlib.suppress(ParseError):  # not PSI output: named in errors below
            facts["psi_cpu_some_avg10"] = _psi_some_avg10(psi.text) if psi.rc == 0 else None
        if facts["psi_cpu_some_avg10"] is None:
            facts["errors"]["psi"] = failure_text(psi.text, psi.rc)

    mem: dict[str, int] = {}
    for line in (section("meminfo") or "").splitlines():
        if m := re.match(r"^(\w+):\s+(\d+)\s*kB", line):
            mem[m.group(1)] = int(m.group(2)) * 1024
    facts["mem_total_bytes"] = mem.get("MemTotal")
    facts["mem_available_bytes"] = mem.get("MemAvailable")
    if mem.get("MemTotal") and "MemAvailable" in mem:
        facts["mem_available_pct"] = round(100.0 * mem["MemAvailable"] / mem["MemTotal"], 2)
    if "SwapTotal" in mem and "SwapFree" in mem:
        facts["swap_total_bytes"] = mem["SwapTotal"]
        facts["swap_used_bytes"] = mem["SwapTotal"] - mem["SwapFree"]

    oom = section("oom") or ""
    uptime = re.search(r"^uptime (\d+(?:\.\d+)?)", oom, re.M)
    facts["uptime_s"] = float(uptime.group(1)) if uptime else None
    source = re.search(r"^source (\w+)", oom, re.M)
    facts["kernel_log_source"] = source.group(1) if source and source.group(1) != "none" \
        else None
    if facts["kernel_log_source"]:
        kills = []
        for line in oom.splitlines():
            if not (m := _KILLED.search(line)):
                continue
            stamp = _STAMP.search(line.split("kernel:")[0]) or _STAMP.search(line)
            age = None
            if stamp and facts["uptime_s"] is not None:
                age = max(0.0, round(facts["uptime_s"] - float(stamp.group(1)), 1))
            kills.append({"pid": int(m.group(1)), "process": m.group(2), "age_s": age,
                          "cgroup": bool(_CGROUP.search(line))})
        facts["oom_kills"] = kills
    return facts


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    findings += _cpu_saturation(host, facts, ctx)
    iowait = facts.get("iowait_pct")
    if iowait is not None and iowait > ctx.threshold("iowait_pct"):
        findings.append(finding(
            "iowait-high", [host], f"CPUs on {host} spent {iowait:.0f}% of the last second "
            "waiting for I/O", NAME, iowait_pct=iowait))
    avail = facts.get("mem_available_pct")
    swap_used, swap_total = facts.get("swap_used_bytes"), facts.get("swap_total_bytes")
    swap_pct = 100.0 * swap_used / swap_total if swap_used and swap_total else 0.0
    low_mem = avail is not None and avail < ctx.threshold("mem_available_pct")
    if low_mem or swap_pct > ctx.threshold("swap_used_pct"):
        findings.append(finding(
            "host-memory-pressure", [host],
            f"{host}: {avail}% of memory available, swap "
            f"{(swap_used or 0) / 2**30:.1f} GiB used ({swap_pct:.0f}%)",
            NAME, mem_available_pct=avail, swap_used_bytes=swap_used,
            swap_used_pct=round(swap_pct, 1)))
    kills = facts.get("oom_kills")
    if kills is None:
        findings.append(not_measured(NAME, host, "kernel OOM-killer log",
                                     "neither dmesg nor the kernel journal is readable"))
    else:
        findings += _oom_kills(host, kills, ctx)
    return findings


def _oom_kills(host: str, kills: list[dict[str, Any]], ctx: Context) -> list[Finding]:
    """Recent OOM kills: the host's RAM running out (mm/oom_kill.c "Out of memory: Killed
    process") is the host's; a kill at a memory cgroup's limit ("Memory cgroup out of memory:
    Killed process", CONSTRAINT_MEMCG) is the job's own limit, whatever RAM the host had free:
    the job's (job-cgroup-oom-killer), never a fault of the node."""
    minutes = ctx.threshold("oom_window_minutes")
    recent = [k for k in kills if k["age_s"] is None or k["age_s"] <= minutes * 60]
    out = []
    for code, chosen, what in (
            ("host-oom-killer", [k for k in recent if not k["cgroup"]],
             "the kernel OOM killer ended"),
            ("job-cgroup-oom-killer", [k for k in recent if k["cgroup"]],
             "the kernel killed, at their memory cgroup's limit,")):
        if chosen:
            last = chosen[-1]
            out.append(finding(
                code, [host], f"{what} {len(chosen)} process(es) on {host} in the last "
                f"{minutes} min (last: {last['process']} pid {last['pid']})",
                NAME, count=len(chosen), kills=chosen[-5:]))
    return out


def saturation(facts: Mapping[str, Any], thresholds: Mapping[str, Any]
               ) -> tuple[bool, bool] | None:
    """(run queue longer than the CPUs, PSI CPU pressure high) when the CPUs are busy past
    cpu_busy_pct and at least one holds; None when they are not saturated or busy is unread.
    The sweep also asks it, to read a component that ran out of time on such a host."""
    busy, cpus = facts.get("busy_pct"), facts.get("cpu_count")
    running, psi = facts.get("procs_running"), facts.get("psi_cpu_some_avg10")
    if busy is None:
        return None
    queue = running is not None and cpus is not None and running > cpus
    pressure = psi is not None and psi >= thresholds.get("psi_cpu_some_avg10_pct",
                                                          PSI_CPU_SOME_AVG10_PCT)
    if busy < thresholds.get("cpu_busy_pct", CPU_BUSY_PCT) or not (queue or pressure):
        return None
    return queue, pressure


def _cpu_saturation(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    """Busy CPUs with work waiting for them (USE: utilization and saturation together)."""
    busy, cpus = facts.get("busy_pct"), facts.get("cpu_count")
    running, psi = facts.get("procs_running"), facts.get("psi_cpu_some_avg10")
    if busy is None:
        return [not_measured(NAME, host, "CPU saturation",
                             "/proc/stat's CPU time could not be read twice")]
    saturated = saturation(facts, ctx.thresholds)
    if saturated is None:
        return []
    queue, pressure = saturated
    waits = [f"{running} runnable tasks on {cpus} CPUs" if queue else "",
             f"tasks waited for a CPU {psi:.0f}% of the last 10 s (PSI)" if pressure else ""]
    return [finding(
        "cpu-saturated", [host],
        f"CPUs on {host} were {busy:.0f}% busy over the last second and work waits for them: "
        + "; ".join(w for w in waits if w) + f" (load {facts.get('load_1m')})", NAME,
        busy_pct=busy, cpu_count=cpus, procs_running=running, psi_cpu_some_avg10=psi,
        load_1m=facts.get("load_1m"), load_per_cpu=facts.get("load_per_cpu"))]


PROBE = Probe(NAME, command, parse, check, timeout_s=30.0)
