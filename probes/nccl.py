"""nccl: the NCCL environment the training processes really run with, and what NCCL logged.

Most NCCL trouble on a healthy fabric is configuration: NCCL_SOCKET_IFNAME or NCCL_IB_HCA naming
an interface the host does not have (or whose port is down), IB disabled by a leftover
NCCL_IB_DISABLE=1, hosts of one job launched with different NCCL_* values, or NCCL quietly
falling back to TCP sockets. The variables are read from ``/proc/PID/environ`` of the running
training processes, not from the operator's shell, and filtered on the host against an
allow-list so no other variable (tokens, passwords) ever leaves the node.

This module also holds the shell pieces the connectivity and joblog probes share: finding the
training processes and reading a bounded tail of the job's log.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Mapping
from typing import Any

from probes import nccl_fleet
from probes.base import (
    Context,
    Probe,
    finding,
    fleet_minority,
    not_measured,
    script,
    section_reader,
    split_sections,
)
from probes.logfiles import glob_word as glob_word  # re-exported (tests)
from probes.logfiles import log_files_sh, log_grep_sh, stale_cutoff
from probes.model import Finding
from probes.nccl_env import ifname_selection as ifname_selection  # re-exported (peer_reach)
from probes.nccl_env import list_misreadings, value_misreadings
from probes.nccl_settings import job_settings
from probes.nccl_settings import setting_findings as setting_findings  # re-exported (tests)
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "nccl"

DEFAULT_PROCESS_PATTERN = "torchrun|python.*train|deepspeed|accelerate"

# Only these variables are printed by the host (grep -E in the script) and kept by parse.
ALLOWED_ENV = re.compile(
    r"^(NCCL_[A-Za-z0-9_]+|CUDA_[A-Za-z0-9_]+|UCX_[A-Za-z0-9_]+|TORCH_NCCL_[A-Za-z0-9_]+"
    r"|TORCH_DISTRIBUTED_[A-Za-z0-9_]+|PYTORCH_CUDA_ALLOC_CONF|MASTER_ADDR|MASTER_PORT"
    r"|WORLD_SIZE|RANK|LOCAL_RANK|OMP_NUM_THREADS)="
)
# The same allow-list as an ERE for grep on the host (kept in step with ALLOWED_ENV by a test).
ALLOWED_ENV_ERE = (
    "^(NCCL_[A-Za-z0-9_]+|CUDA_[A-Za-z0-9_]+|UCX_[A-Za-z0-9_]+|TORCH_NCCL_[A-Za-z0-9_]+"
    "|TORCH_DISTRIBUTED_[A-Za-z0-9_]+|PYTORCH_CUDA_ALLOC_CONF|MASTER_ADDR|MASTER_PORT"
    "|WORLD_SIZE|RANK|LOCAL_RANK|OMP_NUM_THREADS)="
)
# Set per host or per rank by design; never "drift".
PER_RANK_VARS = frozenset({"NCCL_HOSTID", "NCCL_COMM_ID", "NCCL_LAUNCH_MODE_RANK"})

MAX_PROCESSES = 64
_SHELLS = "sh|bash|dash|zsh|ksh|fish|sshd|sudo|su|login|tmux*|screen|ssh|grep|sort|timeout|pgrep"


# --- shell pieces shared with connectivity and joblog -----------------------------------------

def training_pids_sh(pattern: str | None = None, limit: int = MAX_PROCESSES) -> str:
    """Shell printing the PIDs of the training processes, one a line.

    By default a process counts when its command line matches the default pattern (pgrep -f)
    or its environment holds an NCCL_* variable — by name: ``grep -z`` reads environ's
    NUL-separated entries, so a value that merely mentions NCCL_ (a test id, a log path, a
    note) does not make a process a training process. A *pattern* the operator gives
    (``--param PROBE.process_pattern=...``) says which processes are the job's: it replaces
    both, so another job's NCCL process on a shared node is not taken for this one. Shells,
    this script itself and its helpers (any descendant of a diag script) are left
    out: a pipeline's ``head`` forked from this script matched the pattern in the script's
    own command line before it exec'd, and was read as a training process with the
    default memlock limit. "Helper" is any descendant, not only a child: a ``sh -c`` a
    script runs carries the pattern in its own command line to its children, whose parent
    is not the script (a test worker's walk read another walk's grandchild as gpu008's
    training process). The walk up the parents reads ``/proc/PID/stat`` with the shell's
    ``read`` and remembers ancestors already found clean, so ranks sharing a launcher cost
    one ``grep`` per distinct ancestor, not per rank.
    """
    pat = shlex.quote(pattern or DEFAULT_PROCESS_PATTERN)
    by_env = "" if pattern else (
        "timeout 10 grep -lsaz '^NCCL_' /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; ")
    return (
        f"{{ if command -v pgrep >/dev/null 2>&1; then pgrep -f {pat}; fi; "
        f"{by_env}}} "
        "| sort -un | { clean=' '; while read -r p; do "
        "[ \"$p\" = \"$$\" ] && continue; "
        "{ read -r c < /proc/$p/comm; } 2>/dev/null || continue; "
        f"case \"$c\" in {_SHELLS}) continue;; esac; "
        "grep -qas 'diag:section' /proc/$p/cmdline && continue; "
        # a helper of a diag script (this one's `head`, a `sh -c`'s child, or another diag's
        # on the same node): pgrep saw it as a fork still carrying a script's command line,
        # or it inherited the NCCL_* environment of a job step diag runs in
        "a=$p; n=0; own=0; seen=''; "
        "while [ $n -lt 32 ]; do "
        "{ read -r st < /proc/$a/stat; } 2>/dev/null || break; "
        "st=${st##*) }; set -- $st; a=$2; "
        "case \"$a\" in ''|0|1) break;; esac; "
        "case \"$clean\" in *\" $a \"*) break;; esac; "
        "if [ \"$a\" = \"$$\" ] || grep -qas 'diag:section' /proc/$a/cmdline; "
        "then own=1; break; fi; "
        "seen=\"$seen$a \"; n=$((n + 1)); done; "
        "[ $own = 1 ] && continue; "
        "clean=\"$clean$seen\"; "
        f"echo \"$p\"; done; }} | head -n {int(limit)}"
    )


# --- the probe -------------------------------------------------------------------------------

_NCCL_LOG_ERE = ("NCCL (INFO|WARN)|NCCL version|ProcessGroupNCCL|Watchdog caught|WorkNCCL"
                 "|set by environment")
_NCCL_INIT_ERE = "NCCL version|Using network|NET/[A-Za-z]+ : Using|set by environment"


def command(params: Mapping[str, Any]) -> str:
    pids = training_pids_sh(params.get("process_pattern"))
    procs = (f"for p in $({pids}); do "
             "echo \"--- pid $p comm $(cat /proc/$p/comm 2>/dev/null)\"; "
             "if [ -r /proc/$p/environ ]; then "
             f"tr '\\0' '\\n' < /proc/$p/environ | grep -aE {shlex.quote(ALLOWED_ENV_ERE)} "
             "| cut -c1-500; else echo '--- unreadable'; fi; done")
    hcas = ("if [ -d /sys/class/infiniband ]; then for d in /sys/class/infiniband/*; do "
            "[ -d \"$d/ports\" ] || continue; for p in \"$d\"/ports/*; do "
            "echo \"$(basename \"$d\") $(basename \"$p\") "
            "$(timeout 5 cat \"$p/state\" 2>/dev/null | tr -d '\\n') | "
            "$(timeout 5 cat \"$p/link_layer\" 2>/dev/null | tr -d '\\n')\"; done; done; "
            "else echo 'no /sys/class/infiniband'; fi")
    sections = [("procs", procs), ("links", "ip -o link show"), ("addrs", "ip -o addr show"),
                ("hcas", hcas)]
    if params.get("log"):  # the files of an earlier run left out (probes/logfiles.py)
        cutoff = stale_cutoff(params)
        sections += [("logfiles", log_files_sh(str(params["log"]), cutoff=cutoff)),
                     ("log", log_grep_sh(str(params["log"]), _NCCL_LOG_ERE,
                                         head_ere=_NCCL_INIT_ERE, cutoff=cutoff))]
    return script(sections, {"links": "ip", "addrs": "ip"})


_PROC = re.compile(r"^--- pid (\d+) comm ?(.*)$")
_LINK = re.compile(r"^\d+:\s+([^:@\s]+)(?:@[^:\s]*)?:\s+<([^>]*)>(.*)$")
_ADDR = re.compile(r"^\d+:\s+([^\s@]+)(?:@\S+)?\s+(inet6?)\s+(\S+)")
_HCA = re.compile(r"^(\S+) (\d+) (?:\d+: )?([A-Z_]+) \| (\S*)\s*$")


def parse_processes(text: str) -> list[dict[str, Any]]:
    """The per-process blocks of the procs section: pid, comm, readable, allow-listed env."""
    processes: list[dict[str, Any]] = []
    for line in text.splitlines():
        if m := _PROC.match(line):
            processes.append({"pid": int(m.group(1)), "comm": m.group(2).strip(),
                              "readable": True, "env": {}})
        elif line.strip() == "--- unreadable" and processes:
            processes[-1]["readable"] = False
        elif processes and ALLOWED_ENV.match(line):
            key, _, value = line.partition("=")
            processes[-1]["env"].setdefault(key, value)
    return processes


def merge_env(processes: list[dict[str, Any]]) -> tuple[dict[str, str], list[str]]:
    """One env for the host (each variable's most common value) and the variables that vary."""
    values: dict[str, Counter[str]] = {}
    for proc in processes:
        for key, value in proc["env"].items():
            values.setdefault(key, Counter())[value] += 1
    env = {key: counts.most_common(1)[0][0] for key, counts in sorted(values.items())}
    varying = sorted(key for key, counts in values.items() if len(counts) > 1)
    return env, varying


def _interfaces(links: str | None, addrs: str | None) -> list[dict[str, Any]] | None:
    if links is None:
        return None
    interfaces: dict[str, dict[str, Any]] = {}
    for line in links.splitlines():
        if m := _LINK.match(line):
            flags = m.group(2).split(",")
            state = re.search(r"\bstate\s+(\S+)", m.group(3))
            state_ = state.group(1) if state else None
            interfaces[m.group(1)] = {
                "name": m.group(1), "state": state_,
                "up": ("UP" in flags and "LOWER_UP" in flags) or state_ == "UP",
                "addrs": []}
    for line in (addrs or "").splitlines():
        if (m := _ADDR.match(line)) and m.group(1) in interfaces:
            interfaces[m.group(1)]["addrs"].append(m.group(3))
    return list(interfaces.values())


def _hcas(text: str | None) -> list[dict[str, Any]] | None:
    if text is None:
        return None
    hcas = []
    for line in text.splitlines():
        if m := _HCA.match(line.strip()):
            hcas.append({"name": m.group(1), "port": int(m.group(2)), "state": m.group(3),
                         "link_layer": m.group(4) or None})
    return hcas


def parse_nccl_log(text: str) -> dict[str, Any] | None:
    """nccl-debug facts of the grepped log lines; None when they hold no NCCL line at all."""
    if not text.strip():
        return None
    try:
        return parse_kind("nccl-debug", text)
    except ParseError:
        return None


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "procs" not in sections or "hcas" not in sections:
        raise ParseError("nccl: no procs/hcas section (not the output of the nccl probe)")
    facts: dict[str, Any] = {
        "env": {}, "nccl_version": None, "networks": [], "socket_ifname": None, "ib_hca": None,
        "watchdog_timeouts": 0, "debug_enabled": None, "env_varying": [], "processes": 0,
        "processes_unreadable": 0, "commands": [], "interfaces": None, "hcas": None,
        "ib_devices": [], "watchdog": [], "log_files": None, "missing": []}

    section = section_reader(sections, facts["missing"])

    processes = parse_processes(section("procs") or "")
    readable = [p for p in processes if p["readable"]]
    env, varying = merge_env(readable)
    facts.update(env=env, env_varying=varying, processes=len(processes),
                 processes_unreadable=len(processes) - len(readable),
                 commands=sorted({p["comm"] for p in processes if p["comm"]}),
                 socket_ifname=env.get("NCCL_SOCKET_IFNAME"), ib_hca=env.get("NCCL_IB_HCA"))
    if readable:
        facts["debug_enabled"] = env.get("NCCL_DEBUG", "").strip().upper() in ("INFO", "TRACE")
    facts["interfaces"] = _interfaces(section("links"), section("addrs"))
    facts["hcas"] = _hcas(section("hcas"))
    if "logfiles" in sections:
        facts["log_files"] = (section("logfiles") or "").split()
    log = parse_nccl_log(section("log") or "")
    if log:
        facts.update(nccl_version=log["nccl_version"], networks=log["networks"],
                     ib_devices=log["ib_devices"][:16],
                     watchdog_timeouts=len(log["watchdog_timeouts"]),
                     watchdog=log["watchdog_timeouts"][:5])
        if any("NCCL INFO" in line for line in (section("log") or "").splitlines()):
            facts["debug_enabled"] = True
    return facts


# --- checks ----------------------------------------------------------------------------------

def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    pattern = ctx.params.get("process_pattern") or DEFAULT_PROCESS_PATTERN
    if not facts.get("processes"):
        findings.append(not_measured(
            NAME, host, "NCCL environment of the training processes",
            f"no process matching '{pattern}' or with NCCL_* in its environment runs here"))
    elif facts.get("processes_unreadable") == facts["processes"]:
        findings.append(not_measured(
            NAME, host, "NCCL environment of the training processes",
            "their /proc/PID/environ is not readable (another user's processes: probe as that "
            "user or root)"))
    if facts.get("log_files") == [] and ctx.params.get("log"):
        findings.append(not_measured(NAME, host, "NCCL log",
                                     f"no file matches {ctx.params['log']}"))
    env = facts.get("env") or {}
    hcas = facts.get("hcas") or []

    if facts.get("socket_ifname") and facts.get("interfaces") is None:
        findings.append(not_measured(NAME, host, "NCCL_SOCKET_IFNAME against interfaces",
                                     "the ip command is missing"))
    # the transport NCCL chose, NCCL_SOCKET_IFNAME / NCCL_IB_HCA / NCCL_IB_DISABLE against this
    # host's devices: judged in check_fleet, where the same on most hosts is the job's setting
    # (probes/nccl_settings.py)

    misread = value_misreadings(env)
    for var, names in (("NCCL_IB_HCA", sorted({h["name"] for h in hcas})),
                       ("NCCL_SOCKET_IFNAME",
                        [i["name"] for i in facts.get("interfaces") or []])):
        if env.get(var) is not None and names:
            misread += list_misreadings(var, env[var], names)
    if misread:
        findings.append(finding(
            "nccl-env-invalid", [host],
            f"NCCL will not read the job's environment on {host} as written: "
            + "; ".join(misread[:3]), NAME, notes=misread[:8]))

    if facts.get("watchdog_timeouts"):
        first = (facts.get("watchdog") or [{}])[0]
        findings.append(finding(
            "nccl-watchdog-timeout", [host],
            f"the NCCL watchdog reported {facts['watchdog_timeouts']} collective timeout(s) "
            f"(first: {first.get('op')} SeqNum={first.get('seq')}, "
            f"timeout {first.get('timeout_ms')} ms)",
            NAME, count=facts["watchdog_timeouts"], timeouts=(facts.get("watchdog") or [])[:3]))
    return findings


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    findings: list[Finding] = job_settings(facts_by_host)
    with_env = {h: f for h, f in facts_by_host.items()
                if f.get("processes") and f.get("processes_unreadable", 0) < f["processes"]}
    ignore = set(PER_RANK_VARS)
    for facts in with_env.values():
        ignore.update(facts.get("env_varying") or [])
    keys = sorted({k for f in with_env.values() for k in (f.get("env") or {})
                   if k.startswith("NCCL_") and k not in ignore})
    if len(with_env) >= 2:
        for key in keys:
            values = {h: (f.get("env") or {}).get(key, "<unset>") for h, f in with_env.items()}
            odd = fleet_minority(values)
            if not odd:
                continue
            findings.append(finding(
                "nccl-env-drift", odd.hosts, odd.differs(key),
                NAME, key=key, majority=odd.majority, odd=dict(list(odd.hosts.items())[:20]),
                counts={v: len(hs) for v, hs in odd.groups.items()}))
    findings.extend(nccl_fleet.check_fleet(facts_by_host, ctx))  # version, transport
    quiet = sorted(h for h, f in with_env.items() if f.get("debug_enabled") is False)
    if quiet:
        findings.append(finding(
            "nccl-debug-off", quiet,
            f"NCCL_DEBUG is not INFO on {len(quiet)} host(s): the job's log will not say which "
            "network and HCAs NCCL chose (set NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET)",
            NAME, hosts_count=len(quiet)))
    return findings


PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=60.0)
