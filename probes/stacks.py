"""stacks: where each rank's Python code is, and which rank is not where the others are.

In a hung job 1,023 ranks sit in the same frame (an all_reduce wait); the one in the data
loader, a checkpoint branch or another collective is the one they wait for. The probe dumps
the Python stack of every training process on the node with ``py-spy dump --pid`` (read-only:
py-spy pauses the process for the few milliseconds of the read, so the stack is consistent),
each dump bounded by ``timeout 10``. Only the thread headers and ``function (file:line)``
frames leave the node: py-spy's first line (the process's full command line, which may hold
secrets), locals and everything else are dropped there. The rank comes from the process's
RANK variable (only that variable is read from /proc/PID/environ) or ``--rank N`` on its
command line. DataLoader workers (children with their parent's RANK) and launchers (torchrun's
agent) are not ranks and are left out. ``check_fleet`` groups identical main-thread stacks
across every host and names the ranks outside the majority.

py-spy needs ptrace: when it is missing, or ptrace is refused (kernel.yama.ptrace_scope, a
container without CAP_SYS_PTRACE, another user's processes), the probe says "not measured"
with the reason, never "no outlier".
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from probes.base import Context, Probe, finding, not_measured, script, split_sections
from probes.model import Finding
from probes.nccl import DEFAULT_PROCESS_PATTERN, training_pids_sh
from probes.parsers import ParseError

NAME = "stacks"

MAX_PROCESSES = 256  # listed (ranks plus their DataLoader workers)
MAX_DUMPS = 16  # dumped per node: 8 GPUs per node, room for launchers
DUMP_TIMEOUT_S = 10
DEADLINE_S = 60  # no new dump starts after this; the rest are reported as skipped
MAX_FRAMES = 64  # per thread, kept from the node
TOP_FRAMES = 8  # main-thread frames that decide which group a stack is in
MAX_LISTED = 20

# What of py-spy's output leaves the node: thread headers, frames, and its error lines.
_KEEP_ERE = (r"^Thread [0-9A-Fa-fx]+ |^    [^ ].* \(.*:[0-9]+\)$|^Error:|Permission Denied"
             r"|[Pp]ermission denied|[Oo]peration not permitted|ptrace")
# Thread names other than MainThread are dropped; the header keeps id and state.
_THREAD_SED = (r"""-e 's/^\(Thread [0-9A-Fa-fx]* ([^)]*)\): *"MainThread".*/\1 main/' """
               r"-e 's/^\(Thread [0-9A-Fa-fx]* ([^)]*)\).*/\1/'")

_HELPERS = (
    "ppid_of() { sed -n 's/^.*) [A-Za-z] \\([0-9]*\\) .*$/\\1/p' /proc/$1/stat 2>/dev/null; }; "
    "rank_of() { if [ ! -r /proc/$1/environ ]; then echo '?'; return; fi; "
    "r=$(tr '\\0' '\\n' < /proc/$1/environ 2>/dev/null | grep -m1 -aE '^RANK=[0-9]+$' "
    "| cut -d= -f2); "
    "[ -n \"$r\" ] || r=$(tr '\\0' ' ' < /proc/$1/cmdline 2>/dev/null "
    "| grep -oE -- '--(global[_-]?)?rank[= ][0-9]+' | head -n 1 | grep -oE '[0-9]+$'); "
    "echo \"${r:--}\"; }; "
    "comm_of() { tr -c 'A-Za-z0-9_.:\\n-' '_' < /proc/$1/comm 2>/dev/null; }; "
)


def command(params: Mapping[str, Any]) -> str:
    pids = training_pids_sh(params.get("process_pattern"), limit=MAX_PROCESSES)
    procs = (f"{_HELPERS}P=$({pids}); for p in $P; do "
             "echo \"--- pid $p ppid $(ppid_of $p) rank $(rank_of $p) comm $(comm_of $p)\"; "
             "done")
    dumps = (
        f"{_HELPERS}P=$({pids}); L=\" $(echo $P) \"; n=0; t0=$(date +%s); for p in $P; do "
        "pp=$(ppid_of $p); r=$(rank_of $p); "
        "case \"$L\" in *\" $pp \"*) if [ \"$r\" != '-' ] && [ \"$(rank_of $pp)\" = \"$r\" ]; "
        "then echo \"--- skip $p child\"; continue; fi;; esac; "
        f"n=$((n+1)); if [ $n -gt {MAX_DUMPS} ]; then echo \"--- skip $p limit\"; continue; fi; "
        f"if [ $(( $(date +%s) - t0 )) -ge {DEADLINE_S} ]; then "
        "echo \"--- skip $p deadline\"; continue; fi; "
        "echo \"--- dump $p rank $r\"; "
        f"out=$(timeout {DUMP_TIMEOUT_S} py-spy dump --pid \"$p\" 2>&1); rc=$?; "
        f"printf '%s\\n' \"$out\" | grep -aE {shlex.quote(_KEEP_ERE)} | sed {_THREAD_SED} "
        "| head -n 400 | cut -c1-300; echo \"--- rc $p $rc\"; done")
    ptrace = ("echo \"uid $(id -u)\"; "
              "echo \"ptrace_scope $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null "
              "|| echo none)\"; grep -m1 '^CapEff' /proc/self/status")
    return script([("ptrace", ptrace), ("procs", procs), ("stacks", dumps)],
                  {"stacks": "py-spy"})


# --- parse -----------------------------------------------------------------------------------

_PROC = re.compile(r"^--- pid (\d+) ppid (\d*) rank (\S+) comm ?(.*)$")
_DUMP = re.compile(r"^--- dump (\d+) rank (\S+)")
_SKIP = re.compile(r"^--- skip (\d+) (\w+)")
_RC = re.compile(r"^--- rc (\d+) (-?\d+)")
_THREAD = re.compile(r"^Thread ([0-9A-Fa-fx]+) \(([^)]*)\)( main)?\s*$")
_FRAME = re.compile(r"^    (.+?) \((.+):(\d+)\)$")
_PTRACE_DENIED = re.compile(r"Permission Denied|[Pp]ermission denied|[Oo]peration not permitted"
                            r"|ptrace")
_LAUNCHER = re.compile(r"torch/distributed/elastic/agent/|torch/distributed/run\.py"
                       r"|torch/distributed/launch\.py")
_SITE = re.compile(r"^.*?/(?:site|dist)-packages/")
CAP_SYS_PTRACE = 19


def short_file(path: str) -> str:
    """A frame's file without the install prefix: nodes may install the same code under
    /usr/local/lib/python3.10/dist-packages or /opt/conda/lib/python3.10/site-packages."""
    if _SITE.match(path):
        return _SITE.sub("", path)
    parts = path.rsplit("/", 2)
    return "/".join(parts[-2:])


def _rank(value: str) -> int | None:
    return int(value) if value.isdecimal() else None


def _finish(proc: dict[str, Any], threads: list[dict[str, Any]], errors: list[str]) -> None:
    proc["threads"] = len(threads)
    main = next((t for t in threads if t["main"]), threads[0] if threads else None)
    proc["frames"] = main["frames"][:MAX_FRAMES] if main else []
    proc["state"] = main["state"] if main else None
    if not proc["frames"]:
        proc["error"] = (errors[0][:300] if errors else
                         "py-spy printed no stack (timed out, or not a Python process)")
        proc["ptrace_denied"] = any(_PTRACE_DENIED.search(e) for e in errors)
    proc["launcher"] = any(_LAUNCHER.search(f["file"]) for f in proc["frames"])


def parse_dumps(text: str) -> list[dict[str, Any]]:
    """The stacks section: per dumped process its rank, main-thread frames, or its error."""
    dumps: list[dict[str, Any]] = []
    threads: list[dict[str, Any]] = []
    errors: list[str] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        if m := _DUMP.match(line):
            if current is not None:
                _finish(current, threads, errors)
            current = {"pid": int(m.group(1)), "rank": _rank(m.group(2)), "rc": None}
            dumps.append(current)
            threads, errors = [], []
        elif current is None:
            continue
        elif m := _RC.match(line):
            current["rc"] = int(m.group(2))
        elif m := _THREAD.match(line):
            threads.append({"main": bool(m.group(3)) or m.group(1) == str(current["pid"]),
                            "state": m.group(2), "frames": []})
        elif m := _FRAME.match(line):
            if threads and len(threads[-1]["frames"]) < MAX_FRAMES:
                threads[-1]["frames"].append({"function": m.group(1)[:200],
                                              "file": m.group(2)[:300],
                                              "line": int(m.group(3))})
        elif line.strip() and not line.startswith("--- "):
            errors.append(line.strip())
    if current is not None:
        _finish(current, threads, errors)
    return dumps


def signature(frames: list[dict[str, Any]], top: int = TOP_FRAMES) -> str:
    """What makes two stacks "the same": the innermost *top* frames, install prefix dropped."""
    return " <- ".join(f"{f['function']} ({short_file(f['file'])}:{f['line']})"
                       for f in frames[:top])


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "procs" not in sections:
        raise ParseError("stacks: no procs section (not the output of the stacks probe)")
    facts: dict[str, Any] = {"processes": 0, "groups": 0, "dumped": 0, "stacks": [],
                             "errors": [], "children": 0, "skipped": 0, "launchers": 0,
                             "pyspy": True, "uid": None, "ptrace_scope": None,
                             "cap_sys_ptrace": None}
    ptrace = sections.get("ptrace")
    for line in (ptrace.text if ptrace else "").splitlines():
        key, value = [*line.split(None, 1), ""][:2]
        value = value.strip()
        if key == "uid" and value.isdecimal():
            facts["uid"] = int(value)
        elif key == "ptrace_scope" and value.isdecimal():
            facts["ptrace_scope"] = int(value)
        elif key == "CapEff:" and re.fullmatch(r"[0-9A-Fa-f]{1,16}", value):
            facts["cap_sys_ptrace"] = bool(int(value, 16) >> CAP_SYS_PTRACE & 1)
    procs = [m for line in sections["procs"].text.splitlines() if (m := _PROC.match(line))]
    sec = sections.get("stacks")
    if sec is None or sec.missing:
        facts["pyspy"] = False
        facts["processes"] = len(procs)
        return facts
    skipped = [m for line in sec.text.splitlines() if (m := _SKIP.match(line))]
    facts["children"] = sum(1 for m in skipped if m.group(2) == "child")
    facts["skipped"] = sum(1 for m in skipped if m.group(2) != "child")
    facts["processes"] = max(len(procs) - facts["children"], 0)
    comms = {int(m.group(1)): m.group(4).strip() for m in procs}
    for dump in parse_dumps(sec.text):
        dump["comm"] = comms.get(dump["pid"], "")
        if dump["comm"] == "torchrun":
            dump["launcher"] = True
        if dump.get("error"):
            facts["errors"].append({k: dump.get(k) for k in ("pid", "rank", "error",
                                                              "ptrace_denied")})
            continue
        if dump["launcher"]:
            facts["launchers"] += 1
            continue
        facts["stacks"].append({"pid": dump["pid"], "rank": dump["rank"],
                                "comm": dump["comm"], "state": dump["state"],
                                "threads": dump["threads"], "frames": dump["frames"][:16],
                                "stack_id": signature(dump["frames"])})
    facts["errors"] = facts["errors"][:MAX_LISTED]
    facts["dumped"] = len(facts["stacks"])
    facts["groups"] = len({s["stack_id"] for s in facts["stacks"]})
    return facts


# --- checks ----------------------------------------------------------------------------------

def _ptrace_hint(facts: Mapping[str, Any]) -> str:
    scope, uid = facts.get("ptrace_scope"), facts.get("uid")
    why = []
    if scope is not None and scope > 0:
        why.append(f"kernel.yama.ptrace_scope={scope}")
    if uid not in (None, 0):
        why.append(f"diag runs as uid {uid}")
    if facts.get("cap_sys_ptrace") is False:
        why.append("no CAP_SYS_PTRACE (a container needs --cap-add SYS_PTRACE)")
    return ("ptrace not permitted" + (f" ({', '.join(why)})" if why else "")
            + ": run the probe as root (or sudo), or set kernel.yama.ptrace_scope=0")


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    what = "Python stacks of the training processes"
    pattern = ctx.params.get("process_pattern") or DEFAULT_PROCESS_PATTERN
    if "pyspy" not in facts:
        return []
    if not facts.get("pyspy"):
        return [not_measured(NAME, host, what, "py-spy is not installed (pip install py-spy)")]
    if not facts.get("processes") and not facts.get("errors"):
        return [not_measured(NAME, host, what,
                             f"no process matching '{pattern}' or with NCCL_* in its "
                             "environment runs here")]
    errors = facts.get("errors") or []
    if facts.get("stacks") or facts.get("launchers"):
        return []
    if errors and all(e.get("ptrace_denied") for e in errors):
        return [not_measured(NAME, host, what, _ptrace_hint(facts))]
    if errors:
        return [not_measured(NAME, host, what, f"py-spy failed: {errors[0]['error']}")]
    return []


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    entries = [(host, s) for host, f in facts_by_host.items() for s in f.get("stacks") or []]
    if any(s["rank"] is not None for _, s in entries):  # processes without a rank: helpers
        entries = [(h, s) for h, s in entries if s["rank"] is not None]
    if len(entries) < 3:
        return []
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for host, stack in entries:
        groups.setdefault(stack["stack_id"], []).append((host, stack))
    majority_sig = max(groups, key=lambda sig: len(groups[sig]))
    majority = groups[majority_sig]
    if len(majority) * 2 <= len(entries):
        return []  # no majority: ranks are spread out (running, not waiting in one place)
    findings = []
    outliers = sorted((g for sig, g in groups.items() if sig != majority_sig),
                      key=lambda g: (len(g), g[0][1]["rank"] or 0))
    top = majority[0][1]["frames"][:TOP_FRAMES]
    for group in outliers[:8]:
        frames = group[0][1]["frames"][:TOP_FRAMES]
        ranks = [{"rank": s["rank"], "host": h, "pid": s["pid"]} for h, s in group]
        names = ", ".join(f"{r['rank']} on {r['host']}" for r in ranks[:MAX_LISTED])
        if len(ranks) > MAX_LISTED:
            names += f" and {len(ranks) - MAX_LISTED} more"
        findings.append(finding(
            "outlier-stack", {h for h, _ in group},
            f"rank {names} {'is' if len(group) == 1 else 'are'} in "
            f"{_where(frames)} while {len(majority)} of {len(entries)} ranks are in "
            f"{_where(top)}: {'this rank' if len(group) == 1 else 'these ranks'} "
            "did not reach the collective the others wait in",
            NAME, ranks=ranks[:MAX_LISTED], total=len(group), frames=_frames(frames),
            majority_frames=_frames(top), majority_count=len(majority),
            ranks_compared=len(entries), groups=len(groups)))
    return findings


def _where(frames: list[dict[str, Any]]) -> str:
    if not frames:
        return "an empty stack"
    shown = " <- ".join(f"{f['function']} ({short_file(f['file'])}:{f['line']})"
                        for f in frames[:3])
    return shown[:300]


def _frames(frames: list[dict[str, Any]]) -> list[str]:
    return [f"{f['function']} ({f['file']}:{f['line']})"[:300] for f in frames]


PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=90.0)  # DEADLINE_S + one dump
