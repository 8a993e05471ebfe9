"""host: is the node itself starving the GPUs — CPU, I/O wait, memory, the OOM killer?

A data loader with too many workers saturates the CPUs, a slow filesystem shows as iowait, and
host memory exhaustion ends in swapping or in the kernel OOM killer silently ending one rank
(the others then hang in their next collective). All read from /proc, plus the kernel log for
OOM-killer lines; CPU time is sampled twice, one second apart, so iowait is current.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    finding,
    not_measured,
    script,
    section_reader,
    split_sections,
)
from probes.model import Finding
from probes.parsers import ParseError

NAME = "host"

_OOM_ERE = "Out of memory: Kill|out of memory: Kill|oom-kill:|invoked oom-killer"
_SECTIONS = [
    ("loadavg", "cat /proc/loadavg"),
    ("nproc", "nproc 2>/dev/null || grep -c '^processor' /proc/cpuinfo"),
    ("stat", "grep '^cpu ' /proc/stat; sleep 1; grep '^cpu ' /proc/stat"),
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


def _iowait_pct(text: str) -> float | None:
    samples = [t for t in (_cpu_times(line) for line in text.splitlines()) if t]
    if len(samples) < 2:
        return None
    first, second = samples[0], samples[-1]
    # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    delta = [b - a for a, b in zip(first[:8], second[:8], strict=False)]
    total = sum(delta)
    if total <= 0 or len(delta) < 5:
        return None
    return round(100.0 * delta[4] / total, 2)


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "loadavg" not in sections or "meminfo" not in sections:
        raise ParseError("host: no loadavg/meminfo section (not the output of the host probe)")
    facts: dict[str, Any] = {
        "cpu_count": None, "load_per_cpu": None, "iowait_pct": None, "mem_available_pct": None,
        "swap_used_bytes": None, "load_1m": None, "load_5m": None, "load_15m": None,
        "mem_total_bytes": None, "mem_available_bytes": None, "swap_total_bytes": None,
        "oom_kills": None, "kernel_log_source": None, "uptime_s": None}

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
    facts["iowait_pct"] = _iowait_pct(section("stat") or "")

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
    load = facts.get("load_per_cpu")
    if load is not None and load > ctx.threshold("load_per_cpu"):
        findings.append(finding(
            "cpu-saturated", [host],
            f"load {facts.get('load_1m')} on {facts.get('cpu_count')} CPUs ({load:.2f} per CPU) "
            f"on {host}", NAME, load_1m=facts.get("load_1m"), cpu_count=facts.get("cpu_count"),
            load_per_cpu=load))
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
        window_s = ctx.threshold("oom_window_minutes") * 60
        recent = [k for k in kills if k["age_s"] is None or k["age_s"] <= window_s]
        if recent:
            last = recent[-1]
            findings.append(finding(
                "host-oom-killer", [host],
                f"the kernel OOM killer ended {len(recent)} process(es) on {host} in the last "
                f"{ctx.threshold('oom_window_minutes')} min (last: {last['process']} pid "
                f"{last['pid']}{', memory cgroup limit' if last['cgroup'] else ''})",
                NAME, count=len(recent), kills=recent[-5:]))
    return findings


PROBE = Probe(NAME, command, parse, check, timeout_s=30.0)
