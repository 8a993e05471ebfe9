"""joblog: what the training job's own log says went wrong.

The job's log usually names the failure before any host metric does: CUDA out of memory (and
whether it was fragmentation), a loss that turned NaN/inf, a torchrun/c10d rendezvous that timed
out, or an import/library error at start. The probe reads a bounded tail of the log on the host
(params.log, a path or glob) and only the matching lines leave the node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import Context, Probe, finding, not_measured, script, split_sections
from probes.logfiles import log_files_sh, log_grep_sh, stale_cutoff
from probes.model import Finding
from probes.nccl import training_pids_sh
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "joblog"

_OOM = r"out of memory|OutOfMemoryError"
_LOSS = r"loss.{0,40}(nan|inf)|(nan|inf).{0,12}loss|nan iterations"
_RENDEZVOUS = (r"RendezvousTimeoutError|RendezvousConnectionError|client socket has timed out"
               r"|client socket has failed to connect|connect\(\) timed out")
_IMPORT = (r"ModuleNotFoundError|ImportError|CUDA driver version is insufficient"
           r"|cannot open shared object file")
# torchelastic's agent at the end of a run that succeeded, and at the start of the next one
# (torch/distributed/elastic/agent/server/api.py: _invoke_run's "[role] worker group successfully
# finished. Waiting 300 seconds for other agents to finish.", torchelastic <= 1.10's "Local worker
# group finished (SUCCEEDED)", _exit_barrier's "Error waiting on exit barrier" after it; the next
# run's "Rendezvous'ing worker group" / "Starting worker group" / "Rendezvous complete for
# workers"). Between them the store is being torn down: an agent that waits at the exit barrier
# while rank 0 still exports, or whose store host already left, prints RendezvousConnectionError
# or a socket time-out (pytorch forums "Error waiting on exit barrier", #197541) on a run that
# trained to its end.
_RUN_END = (r"worker group successfully finished|Local worker group finished \((WorkerState\.)?"
            r"SUCCEEDED\)|Error waiting on exit barrier")
_RUN_START = r"Rendezvous'ing worker group|Starting worker group|Rendezvous complete for workers"
# What the host lets through (grep -i): a generous superset; parse() decides precisely.
GREP_ERE = "|".join([_OOM, _LOSS, _RENDEZVOUS, _IMPORT, _RUN_END, _RUN_START,
                     "PYTORCH_CUDA_ALLOC_CONF="])


def command(params: Mapping[str, Any]) -> str:
    log = params.get("log")
    pids = training_pids_sh(params.get("process_pattern"))
    alloc = (f"for p in $({pids}); do [ -r /proc/$p/environ ] || continue; "
             "tr '\\0' '\\n' < /proc/$p/environ | grep -a '^PYTORCH_CUDA_ALLOC_CONF=' "
             "| cut -c1-300 | head -n 1; done | sort | uniq -c | sort -rn | head -n 3")
    sections = [("allocconf", alloc)]
    if log:  # an earlier run's files are not read, only named (probes/logfiles.py)
        cutoff = stale_cutoff(params)
        sections = [("logfiles", log_files_sh(str(log), cutoff=cutoff)),
                    ("log", log_grep_sh(str(log), GREP_ERE, ignore_case=True, cutoff=cutoff)),
                    ("stalefiles", log_files_sh(str(log), cutoff=cutoff, stale=True)),
                    *sections]
    else:
        sections = [("logfiles", "echo 'diag: no log param'"), *sections]
    return script(sections)


_OOM_RX = re.compile(_OOM, re.I)
_LOSS_RX = re.compile(
    r"\bloss(?!_?scal)\w*['\"]?\s*(?:[:=]|\bis\b|\bwas\b|\bbecame\b)\s*['\"]?\s*(?:tensor\()?"
    r"[-+]?(?:nan|inf(?:inity)?)\b"
    r"|\b(?:nan|inf)\s+(?:in\s+)?loss\b|\bnon-finite loss\b"
    r"|number of nan iterations:\s*[1-9]",
    re.I)
_STEP = re.compile(r"\b(?:step|iter(?:ation)?|global_step)\s*[:=]?\s*\[?\s*(\d+)", re.I)
_RDZV_RX = re.compile(_RENDEZVOUS)
_IMPORT_RX = re.compile(_IMPORT)
_RDZV_FINAL = re.compile(r"timed out|TimeoutError")
_RUN_END_RX = re.compile(_RUN_END, re.I)
_RUN_START_RX = re.compile(_RUN_START, re.I)
# A line the program printed as a warning, not a failure: Python's warnings ("file.py:12:
# UserWarning: ..."), logging's "WARNING:" / "[WARNING]", and the glog-style severity letter of
# c10 (PyTorch's C++ side: "[W socket.cpp:663]", "[W1120 10:18:26.557 12345 TCPStore.cpp:131]")
# and TensorFlow ("... W tensorflow/.../dso_loader.cc:64]"). torchvision's "Failed to load image
# Python extension: ... cannot open shared object file" and TensorFlow's "Could not load
# dynamic library ... cannot open shared object file" are such warnings on healthy runs, and
# c10d prints "The client socket has failed to connect to ..." as a warning while it retries
# (torch/csrc/distributed/c10d/socket.cpp: C10D_WARNING) until it connects or times out.
_WARNING_LINE = re.compile(
    r"\[W(?:\d{4} [\d:.]+(?: +\d+)?)? ?[\w./-]+:\d+\]"
    r"|(?:^|[\s:\]])W(?:\d{4} [\d:.]+ +\d+)? ?[\w./-]+\.(?:cc|cpp|c|h):\d+\]"
    r"|\b[A-Z][A-Za-z]*Warning:|\bWARNING\b|\[WARN(?:ING)?\]")
_ALLOC_LOG = re.compile(r"PYTORCH_CUDA_ALLOC_CONF=['\"]?([A-Za-z0-9_:.,]+)")
_ALLOC_ENV = re.compile(r"^\s*\d+\s+PYTORCH_CUDA_ALLOC_CONF=(.*)$")


def _short(line: str, n: int = 240) -> str:
    line = line.strip()
    return line if len(line) <= n else line[: n - 3] + "..."


def _before_run_end(lines: list[str]) -> list[str]:
    """*lines* without those between a run's successful end and the next run's start."""
    kept, ended = [], False
    for line in lines:
        if _RUN_START_RX.search(line):
            ended = False
        elif _RUN_END_RX.search(line):
            ended = True
        elif not ended:
            kept.append(line)
    return kept


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "logfiles" not in sections:
        raise ParseError("joblog: no logfiles section (not the output of the joblog probe)")
    facts: dict[str, Any] = {
        "oom_tried_bytes": None, "oom_capacity_bytes": None, "oom_free_bytes": None,
        "oom_reserved_unallocated_bytes": None, "alloc_conf": None, "nan_steps": None,
        "log_files": None, "oom_count": 0, "oom_gpu": None, "oom_line": None,
        "nan_lines": [], "rendezvous_errors": [], "import_errors": [], "stale_log_files": []}
    files = sections["logfiles"].text
    if files.strip() == "diag: no log param":
        return facts
    facts["log_files"] = [ln for ln in files.splitlines() if ln.strip()]
    stale = sections.get("stalefiles")  # absent from older recordings: none known
    for line in (stale.text if stale is not None and not stale.missing else "").splitlines():
        age, _, path = line.partition(" ")
        if age.isdecimal() and path:
            facts["stale_log_files"].append({"path": path, "age_s": int(age)})
    lines = (sections["log"].text if "log" in sections else "").splitlines()
    oom_lines = [ln for ln in lines if _OOM_RX.search(ln)]
    if oom_lines:
        # The most recent message with sizes; the parser reads the first message it is given.
        sized = [ln for ln in oom_lines if "Tried to allocate" in ln] or oom_lines
        try:
            oom = parse_kind("cuda-oom", sized[-1])
        except ParseError:
            oom = {}
        unalloc = oom.get("reserved_unallocated_bytes")
        if unalloc is None and oom.get("reserved_by_pytorch_bytes") is not None \
                and oom.get("allocated_by_pytorch_bytes") is not None:
            unalloc = oom["reserved_by_pytorch_bytes"] - oom["allocated_by_pytorch_bytes"]
        facts.update(oom_tried_bytes=oom.get("tried_to_allocate_bytes"),
                     oom_capacity_bytes=oom.get("total_capacity_bytes"),
                     oom_free_bytes=oom.get("free_bytes"),
                     oom_reserved_unallocated_bytes=unalloc, oom_gpu=oom.get("gpu"),
                     oom_count=len(oom_lines), oom_line=_short(sized[-1]))
    nan = [ln for ln in lines if _LOSS_RX.search(ln)]
    steps = {m.group(1) for ln in nan if (m := _STEP.search(ln))}
    facts["nan_steps"] = len(steps) if steps else len(nan)
    facts["nan_lines"] = [_short(ln) for ln in nan[:3]]
    # A connect retry printed as a warning is not a failure; a time-out is the end of the
    # retries at whatever level it is printed. Neither is anything the store's teardown prints
    # after the run succeeded (until a next run starts).
    facts["rendezvous_errors"] = [_short(ln) for ln in _before_run_end(lines)
                                  if _RDZV_RX.search(ln)
                                  and (not _WARNING_LINE.search(ln) or _RDZV_FINAL.search(ln))
                                  ][-5:]
    # NCCL's INFO lines report optional plugins it did not find (libnccl-net.so: cannot open
    # shared object file) on every healthy run; they are not the job failing to load, nor are
    # the warnings of optional extensions (torchvision's image library, TensorFlow's TensorRT).
    facts["import_errors"] = [_short(ln) for ln in lines
                              if _IMPORT_RX.search(ln) and "NCCL INFO" not in ln
                              and not _WARNING_LINE.search(ln)][:5]
    for line in reversed(lines):
        if m := _ALLOC_LOG.search(line):
            facts["alloc_conf"] = m.group(1)
            break
    alloc = sections.get("allocconf")
    if alloc is not None and not alloc.missing:
        for line in alloc.text.splitlines():
            if m := _ALLOC_ENV.match(line):
                facts["alloc_conf"] = m.group(1).strip()  # the running process beats the log
                break
    return facts


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    log = ctx.params.get("log")
    if facts.get("log_files") is None:
        return [not_measured(NAME, host, "job log",
                             "no log given (param log=PATH or glob of the job's log)")]
    if not facts["log_files"]:
        stale = facts.get("stale_log_files") or []
        why = (f"only files of an earlier run match {log} on {host} (last written before the "
               "job started, or not within window_minutes): "
               + ", ".join(f"{f['path']} ({f['age_s'] / 3600:.1f} h ago)" for f in stale[:3])
               if stale else f"no file matches {log} on {host}")
        return [not_measured(NAME, host, "job log", why)]
    return []  # what the log says: check_fleet (log_findings), the same text read on several
    # hosts being the job's log, not each host's


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    """Each host's log findings; one that several hosts read word for word (a shared log
    directory every node greps, or the same failure of every rank) is one finding of the
    job's log, naming no host: the text does not say which node it happened on."""
    from probes.hostfold import fold_counted

    groups: dict[tuple[str, str], list[Finding]] = {}
    for host, facts in facts_by_host.items():
        if facts.get("log_files"):
            for f in log_findings(host, facts, ctx):
                text = str(f.evidence.get("line") or f.evidence.get("lines") or f.message)
                groups.setdefault((f.code, text), []).append(f)
    out: list[Finding] = []
    for found in groups.values():
        if len(found) < 2:
            out += found
            continue
        hosts = [h for f in found for h in f.hosts]
        first = found[0]
        message = first.message.replace(first.hosts[0], "the job") if first.hosts \
            else first.message
        out.append(Finding(first.code, first.severity, (),
                           f"in the job's log, read the same on {fold_counted(hosts)}: "
                           f"{message}", NAME, {**first.evidence, "job_wide": True,
                                                "raised_on": fold_counted(hosts),
                                                "hosts_raised": len(hosts)}))
    return out


def log_findings(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    """What this host's reading of the job log says went wrong."""
    findings: list[Finding] = []
    if facts.get("oom_count"):
        tried, cap, free = (facts.get(k) for k in ("oom_tried_bytes", "oom_capacity_bytes",
                                                   "oom_free_bytes"))
        findings.append(finding(
            "cuda-oom", [host],
            f"CUDA out of memory in the job log ({facts['oom_count']} line(s)): tried "
            f"{_gib(tried)} on GPU {facts.get('oom_gpu')} with {_gib(free)} free of {_gib(cap)}",
            NAME, tried_bytes=tried, capacity_bytes=cap, free_bytes=free,
            alloc_conf=facts.get("alloc_conf"), line=facts.get("oom_line")))
        unalloc = facts.get("oom_reserved_unallocated_bytes")
        if unalloc is not None and (
                unalloc > ctx.threshold("oom_fragmentation_bytes")
                or (cap and unalloc > cap * ctx.threshold("oom_fragmentation_pct") / 100)):
            findings.append(finding(
                "oom-fragmentation", [host],
                f"{_gib(unalloc)} was reserved by PyTorch but unallocated at the OOM "
                f"(capacity {_gib(cap)}): fragmentation — try "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
                + (f" (now {facts['alloc_conf']})" if facts.get("alloc_conf") else ""),
                NAME, reserved_unallocated_bytes=unalloc, capacity_bytes=cap,
                alloc_conf=facts.get("alloc_conf")))
    if facts.get("nan_steps"):
        findings.append(finding(
            "loss-nan", [host], f"the loss became NaN/inf ({facts['nan_steps']} step(s))",
            NAME, nan_steps=facts["nan_steps"], lines=facts.get("nan_lines", [])[:3]))
    if facts.get("rendezvous_errors"):
        findings.append(finding(
            "rendezvous-failed", [host],
            f"the launcher's rendezvous failed: {facts['rendezvous_errors'][-1][:160]}",
            NAME, lines=facts["rendezvous_errors"][-3:]))
    if facts.get("import_errors"):
        findings.append(finding(
            "import-error", [host],
            f"the job failed to import or load a library: {facts['import_errors'][0][:160]}",
            NAME, lines=facts["import_errors"][:3]))
    return findings


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**30:.2f} GiB"


PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=60.0)
