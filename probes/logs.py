"""logs: what the ranks printed, found on the host without being told where.

A hang or a crash is usually explained in the ranks' own output (an NCCL WARN naming the
failed IB completion, PyTorch's watchdog, a child killed by signal 9), but operators rarely
know where that output went. This sweep component finds it: the training processes' stdout
and stderr when they are files, torchrun's per-rank log directories, Slurm's StdOut/StdErr
(passed by the client when diag looked the job up) and the operator's ``--logs`` glob. Each
file's tail is grepped on the host with the fault catalogue's job-stream ERE, so only lines a
signature could want leave the node (probes/logs_script.py has the script and its bounds).

Whose line is it: a file written by this host's workers is this host's; what srun or mpirun
relays, Slurm's batch output and files on a network file system may hold every node's lines,
so there a line counts for this host only when it names it (NCCL's ``host:pid:tid`` prefix).
The ``lines`` section holds the lines this host answers for (the catalogue reads it as the
``job`` stream); ``others`` the rest, kept in the facts only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes import faults
from probes.base import (
    Context,
    Probe,
    finding,
    guard_parse,
    not_measured,
    script,
    section_reader,
    split_sections,
)
from probes.logs_script import (
    files_section,
    lines_section,
    others_section,
    procs_section,
    self_section,
    stale_section,
    string_list,
)
from probes.model import Finding
from probes.parsers import ParseError
from probes.rankprogress.hosts import host_in_line

NAME = "logs"
STREAM = "job"
SOURCES = ("fd1", "fd2", "torchrun", "slurm", "param")
MAX_LINES = 400  # kept in the facts, per host (the section itself is bounded on the host)


def command(params: Mapping[str, Any]) -> str:
    sections = [
        ("self", self_section()),
        ("procs", procs_section(params.get("process_pattern"))),
        ("files", files_section(params)),
        ("lines", lines_section(faults.stream_ere(STREAM))),
        ("others", others_section()),
        ("stale", stale_section()),  # files of an earlier run: kept, never the job stream
        # RDMA devices (IB or RoCE) the host has: on a host measured to have none, NCCL's
        # "Failed to open libibverbs" is the Ethernet-only twin, not a missing library
        ("rdma", "ls /sys/class/infiniband 2>/dev/null | wc -l"),
    ]
    return script(sections)


# --- parsing ---------------------------------------------------------------------------------

_PID = re.compile(r"^pid (\d+) (host|job) ?(.*)$")
_FD = re.compile(r"^fd([12]) (\d+) (.*)$")
_SLURM_ID = re.compile(r"^slurm (\d+) (procid|nodeid) (\d+)$")
_TORCHRUN = re.compile(r"^torchrun (\d+) (logdir|redirects|tee|is) (.*)$")
_FILE = re.compile(r"^file (\d+) (\S+) (host|job) (\d+) (-?\d+|\?) (\S+) (.*)$")
_UNREADABLE = re.compile(r"^unreadable (\S+) (\S+) (.*)$")
_NOMATCH = re.compile(r"^nomatch (\S+) (.*)$")
_SKIPPED = re.compile(r"^skipped (\S+) (\S+) ?(.*)$")
_STALE = re.compile(r"^stale (\d+) (before-job|old)$")
_HEADER = re.compile(r"^--- file (\d+)(?: matched (\d+) named (\d+) shared ([01]))?\s*$")


def _facts() -> dict[str, Any]:
    return {
        "hostname": None, "processes": [], "process_count": 0, "fds_unreadable": 0,
        "torchrun": [], "torchrun_live": None, "slurm_task_ids": [], "slurm_node_id": None,
        "files": [], "files_unreadable": [], "files_more": 0, "unmatched": [], "skipped": [],
        "slurm_batch_host_here": None,
        "lines": [], "lines_own": 0, "lines_other": 0, "lines_stale": 0, "rdma_devices": None,
        "missing": [],
        "errors": {}}


def _procs(text: str, facts: dict[str, Any]) -> None:
    by_pid: dict[int, dict[str, Any]] = {}
    torchrun: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        if m := _PID.match(line):
            by_pid[int(m.group(1))] = {"pid": int(m.group(1)), "comm": m.group(3).strip() or None,
                                       "launcher": m.group(2) == "job", "fd1": None,
                                       "fd2": None, "fds_readable": True}
        elif (m := _FD.match(line)) and int(m.group(2)) in by_pid:
            proc, target = by_pid[int(m.group(2))], m.group(3).strip()
            if target == "?":
                proc["fds_readable"] = False
            elif target != "-":
                proc[f"fd{m.group(1)}"] = target
        elif m := _SLURM_ID.match(line):
            if m.group(2) == "procid":
                facts["slurm_task_ids"].append(int(m.group(3)))
            else:
                facts["slurm_node_id"] = int(m.group(3))
        elif m := _TORCHRUN.match(line):
            entry = torchrun.setdefault(int(m.group(1)), {"pid": int(m.group(1)), "log_dir": None,
                                                          "redirects": None, "tee": None})
            key = {"logdir": "log_dir"}.get(m.group(2), m.group(2))
            if key in entry:
                entry[key] = m.group(3).strip() or None
        elif line.startswith("torchrun_live "):
            facts["torchrun_live"] = line.split()[-1] == "1"
    facts["processes"] = list(by_pid.values())
    facts["process_count"] = len(by_pid)
    facts["fds_unreadable"] = sum(1 for p in by_pid.values() if not p["fds_readable"])
    facts["torchrun"] = list(torchrun.values())
    facts["slurm_task_ids"] = sorted(set(facts["slurm_task_ids"]))


def _files(text: str, facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    by_index: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if m := _FILE.match(line):
            entry = {"path": m.group(7), "source": m.group(2), "scope": m.group(3),
                     "size": int(m.group(4)),
                     "age_s": None if m.group(5) == "?" else max(0, int(m.group(5))),
                     "fstype": None if m.group(6) == "?" else m.group(6),
                     "matched": 0, "hosts_named": 0, "shared": m.group(3) == "job",
                     "stale": None}
            by_index[m.group(1)] = entry
            facts["files"].append(entry)
        elif (m := _STALE.match(line)) and m.group(1) in by_index:
            by_index[m.group(1)]["stale"] = m.group(2)
        elif m := _UNREADABLE.match(line):
            facts["files_unreadable"].append({"path": m.group(3), "source": m.group(1),
                                              "why": m.group(2)})
        elif m := _NOMATCH.match(line):
            facts["unmatched"].append({"source": m.group(1), "pattern": m.group(2)})
        elif m := _SKIPPED.match(line):
            facts["skipped"].append({"source": m.group(1), "why": m.group(2),
                                     "detail": m.group(3) or None})
        elif line in ("batch_host yes", "batch_host no"):
            facts["slurm_batch_host_here"] = line.endswith("yes")
        elif line.startswith("more ") and line[5:].strip().isdecimal():
            facts["files_more"] = int(line[5:])
    return by_index


def _lines(text: str, by_index: Mapping[str, dict[str, Any]], own: bool,
           kept: list[dict[str, Any]], stale: bool = False) -> int:
    """The lines of one section (*own*: the host answers for them), with the host each names
    (the host side sorted them: a file of this host's, or a line naming it, is its own)."""
    current: dict[str, Any] | None = None
    count = 0
    for line in text.splitlines():
        if m := _HEADER.match(line):
            current = by_index.get(m.group(1))
            if current is not None and m.group(2) is not None:
                current.update(matched=int(m.group(2)), hosts_named=int(m.group(3)),
                               shared=m.group(4) == "1")
            continue
        if not line.strip():
            continue
        count += 1
        host = host_in_line(line)
        kept.append({"file": current["path"] if current else None, "text": line.strip(),
                     "host": host, "own": own, **({"stale": True} if stale else {})})
    return count


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "self" not in sections or "procs" not in sections:
        raise ParseError("logs: no self/procs section (not the output of the logs component)")
    facts = _facts()
    read = section_reader(sections, facts["missing"], absent_is_missing=True,
                          errors=facts["errors"])
    for line in (read("self") or "").splitlines():
        key, _, value = line.partition(" ")
        if key == "host" and value.strip():
            facts["hostname"] = value.strip()
    _procs(read("procs") or "", facts)
    by_index = _files(read("files") or "", facts)
    kept: list[dict[str, Any]] = []
    # read apart from section_reader, as rdma below: older recordings have no such section
    stale = sections.get("stale")
    if stale is not None and not stale.missing:  # first: the first to go past MAX_LINES
        facts["lines_stale"] = _lines(stale.text, by_index, False, kept, stale=True)
    facts["lines_own"] = _lines(read("lines") or "", by_index, True, kept)
    facts["lines_other"] = _lines(read("others") or "", by_index, False, kept)
    facts["lines"] = kept[-MAX_LINES:]
    # read apart from section_reader: an output without it (older recordings) is not a missing
    # section, only a fact not measured
    rdma = sections.get("rdma")
    if rdma is not None and not rdma.missing and rdma.text.strip().isdigit():
        facts["rdma_devices"] = int(rdma.text.strip())
    return facts


parse = guard_parse(NAME, _parse)


# --- checks: only what could not be read ----------------------------------------------------

def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    what = "the ranks' output (job log lines)"
    findings: list[Finding] = []
    procs = facts.get("processes") or []
    files = facts.get("files") or []
    given = bool(string_list(ctx.params.get("slurm_output")) or string_list(ctx.params.get("log")))
    if facts.get("missing"):
        findings.append(not_measured(NAME, host, what, "the script's sections "
                                     f"{', '.join(facts['missing'])} did not run"))
    if not procs and not files and not given:
        pattern = ctx.params.get("process_pattern") or "the default pattern"
        findings.append(not_measured(
            NAME, host, what, f"no training process runs here ({pattern}) and no Slurm output "
            "or --logs was given"))
    elif procs and not files:
        to_files = any(str(p.get(fd) or "").startswith("/") and not
                       str(p.get(fd)).startswith("/dev/") for p in procs for fd in ("fd1", "fd2"))
        if all(not p.get("fds_readable") for p in procs):
            findings.append(not_measured(
                NAME, host, what, "the training processes' /proc/PID/fd is not readable "
                "(another user's processes: run diag as that user or as root)"))
        elif not to_files:  # (files they write that could not be read are named below)
            findings.append(not_measured(
                NAME, host, what, "the training processes write to a pipe or terminal (srun, "
                "a container runtime, a tee) and no log file was found: give --logs, or --job "
                "so Slurm's output files are read"))
    unreadable = [f for f in facts.get("files_unreadable") or [] if f.get("why") != "missing"]
    if unreadable:
        names = ", ".join(f"{f['path']} ({f['why']})" for f in unreadable[:3])
        findings.append(not_measured(NAME, host, "job log files",
                                     f"{len(unreadable)} file(s) could not be read: {names}"))
    # Slurm's batch output lives where the batch step wrote it: missing elsewhere is normal.
    slurm_here = facts.get("slurm_batch_host_here") is not False
    gone = [u["pattern"] for u in facts.get("unmatched") or []
            if u.get("source") == "param" or (u.get("source") == "slurm" and slurm_here)]
    gone += [f["path"] for f in facts.get("files_unreadable") or []
             if f.get("why") == "missing" and f.get("source") == "slurm" and slurm_here]
    if gone:
        findings.append(not_measured(NAME, host, "job log files",
                                     f"no file matches {', '.join(gone[:3])} on {host}"))
    refused = [s["detail"] for s in facts.get("skipped") or [] if s.get("why") == "unexpanded"]
    if refused:
        findings.append(not_measured(
            NAME, host, "Slurm output files",
            f"{', '.join(refused[:3])}: a job field (%j, %x, ...) was not expanded by the client, "
            "and a glob in its place could read another job's output"))
    findings += _earlier_run(host, facts, ctx)
    return findings


def _earlier_run(host: str, facts: Mapping[str, Any], ctx: Context) -> list[Finding]:
    """Lines of an earlier run a signature could read (a file last written before the job
    started or outside the window, or a line stamped long before): named, never judged."""
    lines = [x for x in facts.get("lines") or [] if x.get("stale")]
    if not facts.get("lines_stale") and not lines:
        return []
    by_path = {f["path"]: f for f in facts.get("files") or []}
    paths = list(dict.fromkeys(str(x["file"]) for x in lines if x.get("file"))) or [
        p for p, f in by_path.items() if f.get("stale") and f.get("matched")]
    shown = []
    for path in paths[:3]:
        f = by_path.get(path) or {}
        age = f.get("age_s")
        why = {"before-job": "last written before the job started",
               "old": "not written within the window: --param logs.window_minutes=N reads it"
               }.get(f.get("stale") or "", "its lines stamped long before the job")
        shown.append(f"{path} ({why}" + (f", {age / 3600:.1f} h ago)" if age is not None
                                         else ")"))
    count = facts.get("lines_stale") or len(lines)
    return [finding(
        "job-log-earlier-run", [host],
        f"{host}: {count} fault line(s) of an earlier run, not this incident's and not "
        f"judged: {'; '.join(shown)}", NAME,
        files=[{k: (by_path.get(p) or {"path": p}).get(k)
                for k in ("path", "source", "age_s", "stale", "matched")} for p in paths[:8]],
        lines=[x["text"] for x in lines][:5], job_start_epoch=ctx.params.get("job_start_epoch"))]


PROBE = Probe(NAME, command, parse, check, timeout_s=30.0)
