"""ranks: rank progress from the training job's logs, to find the rank (and node) others wait for.

The job's logs are read where they are: a glob on every node (params.logs, e.g.
``/shared/job-1234/rank*.log``, on shared storage or node-local). The node sends only the
lines that matter: ProcessGroupNCCL watchdog, progress and heartbeat lines, and from the head
of each file NCCL's and torch's init lines (they map ranks to hosts). Each file is marked, so
the analysis knows which lines came from which file: a per-rank file names its rank, a
node-local file its node. Bounded: the newest ``max_files`` files, the last ``tail_lines``
lines of big files (small ones are read whole by one awk), the last 16,384 matching lines per
file, lines cut at 1,000 characters; files that are not text are named and skipped.
``check_fleet`` merges every node's files (one copy of a shared file read by every node) and
runs the analysis of ``probes.rankprogress``, and turns its verdict into findings. Every node
of a fleet reading the same shared directory sends the same output: it is parsed once and its
facts shared, so memory does not grow with the fleet. ``probes.rankfiles`` runs the same
analysis on files on this machine.
"""

from __future__ import annotations

import hashlib
import shlex
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any

from probes.base import Context, Probe, finding, script, split_sections
from probes.logfiles import log_files_sh, stale_cutoff
from probes.model import Finding
from probes.parsers import ParseError
from probes.rankprogress.blocking import blocking_text
from probes.rankprogress.grammar import HEAD_ERE, MAX_LISTED, TAIL_ERE
from probes.rankprogress.hosts import rank_host_map
from probes.rankprogress.scan import FILE_MARK, merge_sources, scan_file, split_files
from probes.rankprogress.verdict import analyse, ranks_text

NAME = "ranks"

MAX_FILES = 4096  # a 4,096-rank job with one file per rank
TAIL_LINES = 20000  # per file: a rank's hang lines are its last ones
HEAD_LINES = 200_000  # per file: NCCL's init lines come first (all ranks' in a combined log)
HEAD_KEEP = 8192  # init lines kept per file: a combined log of 4,096 ranks has one or two each
KEEP_PER_FILE = 16384  # matching lines kept per file (a combined log of 4,096 ranks: ~4 each)
MAX_OUTPUT_LINES = 200_000
MAX_PATTERNS = 8
NO_LOGS = "diag: no log param"


def log_patterns(params: Mapping[str, Any]) -> list[str]:
    """params.logs as a list of globs (a string is one glob; a list, several)."""
    logs = params.get("logs")
    if isinstance(logs, str):
        logs = [logs]
    if not isinstance(logs, list | tuple):
        return []
    return [str(p).strip() for p in logs if str(p).strip()][:MAX_PATTERNS]


def _int_param(params: Mapping[str, Any], key: str, default: int) -> int:
    try:
        value = int(params.get(key, default))
    except (TypeError, ValueError):
        return default
    return max(1, min(value, 10 * default))


# Files up to this size are read whole by one awk process (one pass for hundreds of per-rank
# files: ~0.5 s for 1,024 files of 100 KB, where a head/tail/grep pipeline per file takes ~8 s);
# bigger ones (a combined multi-GB log) by head and tail, which seek instead of reading it all.
WHOLE_FILE_BYTES = 32 << 20
AWK_TIMEOUT_S = 90  # a hung file system ends the read, keeping the files already read (fflush)

# One pass over each small file: NCCL/torch init lines among its first H lines (HK at most),
# the last K watchdog/progress lines anywhere. Regexes come in with -v (no shell quoting).
_AWK_READER = (
    '{ f = $0; print "=== diag:file " f; n = 0; m = 0; c = 0; '
    "while ((getline line < f) > 0) { n++; "
    "if (n <= H && m < HK && line ~ he) { print substr(line, 1, 1000); m++ } "
    "if (line ~ te) { buf[c % K] = line; c++ } } close(f); "
    "for (i = (c > K ? c - K : 0); i < c; i++) print substr(buf[i % K], 1, 1000); "
    "fflush() }")


# Files that are not text (a core dump, a .gz, a checkpoint matched by the glob) are named and
# left out: grep -I calls a file with NUL bytes in its first buffer binary (LC_ALL=C, so a log
# with stray non-UTF-8 bytes stays text); -L lists those (and empty files, which are kept:
# an empty rank37.log still says rank 37 started).
SKIP_MARK = "=== diag:skip "
_SKIP_BINARY = (
    "B=$(printf '%s\\n' \"$F\" | tr '\\n' '\\000' | LC_ALL=C xargs -0 grep -IL -e '' -- "
    "2>/dev/null | while IFS= read -r f; do [ -s \"$f\" ] && printf '%s\\n' \"$f\"; done); "
    "if [ -n \"$B\" ]; then printf '%s\\n' \"$B\" | sed 's/^/" + SKIP_MARK + "/'; "
    "F=$({ printf '%s\\n' \"$B\"; echo '=== diag:split'; printf '%s\\n' \"$F\"; } "
    "| awk 'x { if (!($0 in b)) print; next } $0 == \"=== diag:split\" { x = 1; next } "
    "{ b[$0] = 1 }'); fi; ")


def command(params: Mapping[str, Any]) -> str:
    patterns = log_patterns(params)
    if not patterns:
        return script([("logfiles", f"echo '{NO_LOGS}'")])
    limit = _int_param(params, "max_files", MAX_FILES)
    tail = _int_param(params, "tail_lines", TAIL_LINES)
    cutoff = stale_cutoff(params)  # an earlier run's files are not read (probes/logfiles.py)
    files = ("{ " + "; ".join(log_files_sh(p, limit, cutoff) for p in patterns) + "; } "
             f"| awk '!seen[$0]++' | head -n {limit}")
    head_ere, tail_ere = shlex.quote(HEAD_ERE), shlex.quote(TAIL_ERE)
    sizes = ("S=$(printf '%s\\n' \"$F\" | tr '\\n' '\\000' "
             "| xargs -0 stat -L -c '%s %n' 2>/dev/null); "
             # without stat every file takes the head/tail path
             "[ -n \"$S\" ] || S=$(printf '%s\\n' \"$F\" | sed 's/^/999999999999 /'); ")
    small = (f"printf '%s\\n' \"$S\" | awk '$1 + 0 <= {WHOLE_FILE_BYTES} "
             "{ sub(/^[0-9]+ /, \"\"); print }' "
             f"| timeout {AWK_TIMEOUT_S} awk -v H={HEAD_LINES} -v HK={HEAD_KEEP} "
             f"-v K={KEEP_PER_FILE} "
             f"-v he={head_ere} -v te={tail_ere} "
             f"{shlex.quote(_AWK_READER)}; ")
    big = (f"printf '%s\\n' \"$S\" | awk '$1 + 0 > {WHOLE_FILE_BYTES} "
           "{ sub(/^[0-9]+ /, \"\"); print }' "
           f"| while IFS= read -r f; do echo \"{FILE_MARK}$f\"; "
           f"{{ timeout 20 head -n {HEAD_LINES} \"$f\" | grep -m {HEAD_KEEP} -aE {head_ere}; "
           f"timeout 20 tail -n {tail} \"$f\" | grep -aE {tail_ere} | tail -n {KEEP_PER_FILE}; "
           "} | cut -c1-1000; done; ")
    read = (f"F=$({files}); if [ -n \"$F\" ]; then {_SKIP_BINARY}{sizes}"
            f"{{ {small}{big}}} | head -n {MAX_OUTPUT_LINES}; fi")
    return script([("logs", read)])


def _trim_lines(scans: list[dict[str, Any]]) -> None:
    """Keep one example line per kind of row: 1,024 identical timeout lines say nothing more
    than one, while the odd rank's own line (its signature is rare) is kept for evidence."""
    def signature(row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(row.get(k) for k in ("pg", "timed_out", "seq", "op", "enqueued",
                                          "completed", "stuck"))

    counts = Counter(signature(r) for s in scans for r in s["rows"])
    shown: set[tuple[Any, ...]] = set()
    for scan in scans:
        for row in scan["rows"]:
            sig = signature(row)
            if counts[sig] > 3 and sig in shown:
                row.pop("line", None)
            shown.add(sig)


PARSED_KEPT = 8  # distinct outputs remembered: every node reading one shared directory hits
_parsed: OrderedDict[str, dict[str, Any]] = OrderedDict()
_parsed_lock = threading.Lock()


def parse(text: str) -> dict[str, Any]:
    """The facts of one node's output. Identical outputs (a shared log directory read by every
    node) are parsed once and share their facts: a 512-node fleet costs what one node does."""
    key = hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()
    with _parsed_lock:
        if key in _parsed:
            _parsed.move_to_end(key)
            return dict(_parsed[key])  # the inner lists and dicts are shared, never changed
    facts = _parse(text)
    with _parsed_lock:
        _parsed[key] = facts
        while len(_parsed) > PARSED_KEPT:
            _parsed.popitem(last=False)
    return dict(facts)


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "logfiles" in sections and NO_LOGS in sections["logfiles"].text:
        return {"log_files": None, "log_files_total": 0, "sources": [],
                **analyse({}, None)}
    if "logs" not in sections:
        raise ParseError("ranks: no logs section (not the output of the ranks probe)")
    text = sections["logs"].text
    skipped = [line[len(SKIP_MARK):].strip() for line in text.splitlines()
               if line.startswith(SKIP_MARK)]
    if skipped:
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith(SKIP_MARK))
    files = [(path, lines) for path, lines in split_files(text)
             if path != "-" or any(line.strip() for line in lines)]
    scans = [scan_file(path, lines) for path, lines in files]
    _trim_lines(scans)
    facts = analyse(merge_sources((None, s) for s in scans))
    paths = [path for path, _ in files]
    facts.update(log_files=paths[:64], log_files_total=len(paths), sources=scans,
                 skipped_files=[{"path": p, "why": "not text (binary data)"}
                                for p in skipped[:64]], skipped_total=len(skipped))
    return facts


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    if not facts_by_host:
        return []
    hosts = list(facts_by_host)
    logs = " ".join(log_patterns(ctx.params)) or "params.logs"
    if all(f.get("log_files") is None for f in facts_by_host.values()):
        return [finding("not-measured", hosts,
                        "rank progress not measured: no log pattern was given (e.g. --logs "
                        "'/shared/job-1234/rank*.log')", NAME, what="rank progress",
                        why="no log pattern")]
    read = {h: f for h, f in facts_by_host.items() if f.get("log_files")}
    if not read:
        return [finding("not-measured", hosts,
                        f"rank progress not measured: no file matches {logs} on any of "
                        f"{len(hosts)} host(s)", NAME, what="rank progress",
                        why=f"no file matches {logs}")]
    merged = merge_sources((h, s) for h, f in read.items() for s in f.get("sources") or [])
    result = analyse(merged, rank_host_map(ctx.params.get("rank_hosts")),
                        peers=[str(p) for p in ctx.params.get("peers") or hosts],
                        world_size=_world(ctx.params))
    return findings(result, NAME)


def _world(params: Mapping[str, Any]) -> int | None:
    value = str(params.get("world_size", ""))
    return int(value) if value.isdecimal() and len(value) < 8 else None


# --- the verdict as findings -----------------------------------------------------------------

def findings(result: Mapping[str, Any], probe: str = NAME) -> list[Finding]:
    """straggler-rank, collective-mismatch and watchdog-stuck findings of an analysis."""
    out = []
    for m in result.get("mismatches") or []:
        ops = "; ".join(f"{op} on rank(s) {ranks_text(ranks)}" + (
            f" ({m['counts'][op]} in all)" if m["counts"][op] > len(ranks) else "")
            for op, ranks in m["ops"].items())
        out.append(finding(
            "collective-mismatch", m["hosts"],
            f"ranks wait in different collectives at work {m['seq']} of process group "
            f"{m['pg']}{_desc(m.get('pg_desc'))}: {ops}. The code path diverged across ranks "
            "(an application bug, not a node fault)",
            probe, pg=m["pg"], seq=m["seq"], ops=m["ops"], counts=m["counts"],
            lines=m["lines"]))
    stragglers = result.get("stragglers") or []
    if stragglers:
        # The stuck ranks are accused; ranks only blocked by them are evidence, not culprits.
        stuck_ranks = [s for s in stragglers if s.get("role", "stuck") == "stuck"]
        blocked = [s for s in stragglers if s.get("role") == "blocked"]
        hosts = sorted({s["host"] for s in stuck_ranks if s["host"]})
        first = stuck_ranks[0]
        total = max(1, len({s["rank"] if s["rank"] is not None else (s["pg"], s["group_rank"])
                            for s in stuck_ranks})
                    + result.get("stragglers_total", len(stragglers)) - len(stragglers))
        names = ranks_text(list(dict.fromkeys(
            str(s["rank"] if s["rank"] is not None else f"group rank {s['group_rank']}")
            + (f" on {s['host']}" if s["host"] else " (host unknown)")
            + (f" (host from the {s['host_from']})" if s["host"] and s.get("host_from") in (
                "log file name", "node of the ranks around it") else "")
            for s in stuck_ranks)), total)
        out.append(finding(
            "straggler-rank", hosts,
            f"rank {names} {'is' if total == 1 else 'are'} behind the majority in process "
            f"group {first['pg']}{_desc(first.get('pg_desc'))}: {first['reason']}"
            + blocking_text(first) + (
                "" if hosts else "; map ranks to hosts with params.rank_hosts "
                "(e.g. 'gpu001:0-7 gpu002:8-15') or NCCL_DEBUG=INFO logs"),
            probe, ranks=[{k: s.get(k) for k in (
                "rank", "host", "pg", "last_completed", "majority_last_completed", "seq",
                "majority_seq", "reason", "line", "confidence", "host_from", "role",
                "blocks", "blocks_through", "blocked_by")}
                for s in stragglers[:MAX_LISTED]],
            total=total, blocked=len(blocked), confidence=first.get("confidence"),
            majority_seq=first.get("majority_seq"),
            majority_last_completed=first.get("majority_last_completed")))
    stuck = result.get("stuck") or []
    if stuck:
        hosts = sorted({s["host"] for s in stuck if s["host"]})
        names = ranks_text([str(s["rank"]) + (f" on {s['host']}" if s["host"] else "")
                             for s in stuck], result.get("stuck_total", len(stuck)))
        out.append(finding(
            "watchdog-stuck", hosts,
            f"the NCCL watchdog got stuck on rank {names}: a CUDA or NCCL call hung in that "
            "process (often a GPU fault; check XIDs on its host)",
            probe, ranks=[{k: s[k] for k in ("rank", "host", "pg", "reason", "line")}
                          for s in stuck[:MAX_LISTED]],
            total=result.get("stuck_total", len(stuck))))
    return out


def _desc(desc: str | None) -> str:
    return f" ({desc})" if desc else ""


PROBE = Probe(NAME, command, parse, check_fleet=check_fleet, timeout_s=120.0)
