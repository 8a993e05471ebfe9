"""The line grammar of rank logs: which lines matter, and what one line says about one rank.

The EREs here are what the node's grep lets through, so the host, the parser and the benchmark
filter alike; ``parse_line`` turns one such line (under any launcher's prefix) into an Event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_LISTED = 20  # ranks named in one finding or fact list
LINE_CHARS = 300  # evidence lines are cut here
MAX_WORLD = 1 << 17  # a world size above this is a garbled line, not a job

# What the node lets through. POSIX ERE (grep -E) and valid Python regex alike, so the
# benchmark and the parser filter exactly like the host does.
TAIL_ERE = ("Watchdog caught|detected by watchdog|Timeout at NCCL work|last completed"
            "|watchdog got stuck|Heartbeat monitor timed out|Received a dump signal"
            "|joined but didn't finish|didn't join collective|lagging ranks")
# Init lines, printed once near the top of a log (read from the head of each file).
HEAD_ERE = "initialization options: size|NCCL INFO.*[Rr]ank [0-9]+ n[Rr]anks [0-9]+"
HEAD_RE, TAIL_RE = re.compile(HEAD_ERE), re.compile(TAIL_ERE)
RELEVANT = re.compile(f"{TAIL_ERE}|{HEAD_ERE}")

# Prefixes put in front of each line by whatever collected it, stripped in a loop, outermost
# first (a journald line of an srun task of torchrun: "<stamp> gpu5 srun[9]: 3: [rank27]:..."):
# - kubectl logs --timestamps: RFC 3339 with nanoseconds, "2025-01-20T18:44:12.715298746Z "
_KUBECTL = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d) ")
# - journalctl (short, short-precise, short-iso, short-iso-precise) and RFC 3164 syslog files
#   ("Jan 20 18:44:12 gpu005 python3[48230]: "), RFC 5424 ("<14>1 2025-01-20T18:44:12.7Z
#   gpu005 python3 48230 - - "): the host field says which node logged the line
_JOURNAL = re.compile(
    r"^(?:<\d{1,3}>)?(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,9})?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)"
    r" (?P<host>[A-Za-z0-9][\w.\-]{0,252}) [\w.@/\-]{1,64}(?:\[\d{1,10}\])?: ")
_SYSLOG5424 = re.compile(
    r"^<\d{1,3}>1 \S+ (?P<host>[A-Za-z0-9][\w.\-]{0,252}) \S+ \S+ \S+ (?:-|\[.*?\]) ")
_RAY = re.compile(r"^\((?:[^()]|\([^()]*\))*\)\s+")  # "(Worker[rank=9] pid=12) "
# - srun --label: "%*d: " (the task id, right-aligned to the widest one)
_SRUN = re.compile(r"^\s*(\d{1,6}): ")
# - Open MPI --tag-output "[1,37]<stderr>:"; MPICH/Hydra -prepend-rank and Intel MPI -l "[37] "
_MPI = re.compile(r"^\[\d+,(\d{1,18})\]<(?:stdout|stderr)>:\s?")
_HYDRA = re.compile(r"^\[(\d{1,6})\] (?=\S)")
# - torchrun: "[rank37]:" (torch 2.2+, the global rank) and, with --tee / --redirects,
#   "[<role><local rank>]:" ("[default5]:", or "[trainer5]:" under --role trainer)
_TORCHRUN = re.compile(r"^\[(rank|[A-Za-z_][\w\-]{0,30}?)(\d{1,18})\]:\s?")
_NCCL_HOST = re.compile(r"^([A-Za-z0-9][\w.\-]*):(\d{1,18}):(\d{1,18}) \[\d+\] NCCL ")

# ProcessGroupNCCL's log prefixes, every spelling since torch 1.x:
#   [Rank 3]  [PG 1 Rank 0]  [PG 3 (pg_name) Rank 5]  [PG ID 0 PG GUID 0(default_pg) Rank 5]
_PG = re.compile(r"\[PG (?:ID )?(\d{1,18})(?: PG GUID (\d{1,18}))?\s*(?:\(([^)]*)\))?"
                 r" Rank (\d{1,18})\]")
_RANK = re.compile(r"\[Rank (\d{1,18})\]")

_TIMEOUT = re.compile(r"Watchdog caught collective operation timeout")
_SEQ = re.compile(r"\bSeqNum=(\d{1,18})")
_OP = re.compile(r"\bOpType=(\w+)")
_NUMEL_IN = re.compile(r"\bNumelIn=(\d{1,18})")
_TIMEOUT_MS = re.compile(r"\bTimeout\(ms\)=(\d{1,18})")
_RAN_FOR = re.compile(r"\bran for\s+(\d{1,18})\s+milliseconds")
_FAILURE = re.compile(
    r"(?:detected by watchdog at work(?: sequence id)?|Timeout at NCCL work):?\s*(-?\d{1,18})")
_STATUS = re.compile(
    r"last enqueued (?:NCCL )?work:\s*(-?\d{1,18}),"
    r"(?:\s*last started (?:NCCL )?work:\s*-?\d+[^,]*,)?"
    r"\s*last completed (?:NCCL )?work:\s*(-?\d{1,18})", re.I)
_DUMP = re.compile(r"Received a dump signal due to a collective timeout from\s+"
                   r"(this local rank|rank\s+(-?\d{1,18}))")
_STUCK = re.compile(r"watchdog got stuck for (\d{1,18}) seconds|Heartbeat monitor timed out")
_INIT_NCCL = re.compile(r"\brank\s+(\d{1,18})\s+nranks\s+(\d{1,18})\b", re.I)
_INIT_TORCH = re.compile(r"initialization options: size: (\d{1,18}), global rank: (\d{1,18})")
_DESYNC = re.compile(r"\[([\d, ]+)\] joined but didn't finish collective #\d+"
                     r"|\[([\d, ]+)\] finished collective #\d+, but didn't join"
                     r"|ranks \[([\d, ]+)\] are the lagging ranks")

UNKNOWN_PG = "?"


def cut(line: str, limit: int = LINE_CHARS) -> str:
    """A log line bounded for evidence (the interesting part of these lines comes first)."""
    line = line.strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _keys(ere: str) -> list[str]:
    return [k for k in ere.split("|") if not re.search(r"[\\.*+?()\[\]{}^$]", k)]


# Literal alternatives of the EREs: str.find over a whole file is ~3x faster than a regex per
# line, which matters for 100 MB of logs (bench/ranks.py). Every hit is confirmed by the regex.
_TAIL_KEYS = _keys(TAIL_ERE)
_HEAD_KEYS = ["initialization options: size", "nranks", "nRanks"]
assert len(_TAIL_KEYS) == TAIL_ERE.count("|") + 1, "TAIL_ERE must stay a list of literals"


def find_lines(text: str, head: bool = True, tail: bool = True) -> list[str]:
    """The lines of *text* matching HEAD_ERE (when *head*) or TAIL_ERE (when *tail*), in order:
    what the node's grep lets through."""
    starts: set[int] = set()
    for key in (_HEAD_KEYS if head else []) + (_TAIL_KEYS if tail else []):
        pos = text.find(key)
        while pos >= 0:
            starts.add(text.rfind("\n", 0, pos) + 1)
            end = text.find("\n", pos)
            if end < 0:
                break
            pos = text.find(key, end)
    lines = []
    for start in sorted(starts):
        end = text.find("\n", start)
        line = text[start:] if end < 0 else text[start:end]
        if (tail and TAIL_RE.search(line)) or (head and HEAD_RE.search(line)):
            lines.append(line)
    return lines


def head_text(text: str, lines: int) -> str:
    """The first *lines* lines of *text* (without splitting all of it)."""
    if text.count("\n") < lines:
        return text
    pos = 0
    for _ in range(lines):
        pos = text.find("\n", pos) + 1
        if pos == 0:
            return text
    return text[:pos]


def relevant_lines(text: str) -> list[str]:
    """The lines of *text* the host-side grep would let through (head and tail EREs)."""
    return find_lines(text)


# --- one line --------------------------------------------------------------------------------

@dataclass
class Event:
    """What one log line says about one rank; ``kind`` is timeout, failure, dump, stuck,
    init (NCCL comm init), options (torch PG init) or desync."""

    kind: str
    line: str
    pg: str | None = None
    pg_desc: str | None = None
    group_rank: int | None = None
    tagged_rank: int | None = None  # torchrun [rankN]: / mpirun [1,N]<stderr>: / hydra [N]
    task: int | None = None  # srun --label "N: " (a rank, or a node index under torchrun)
    local_rank: int | None = None  # torchrun --tee "[default5]:"
    host: str | None = None  # NCCL's host:pid:tid prefix
    logged_on: str | None = None  # the host field of a journald / syslog line
    pid: int | None = None
    seq: int | None = None
    op: str | None = None
    numel_in: int | None = None
    timeout_ms: int | None = None
    ran_for_ms: int | None = None
    enqueued: int | None = None
    completed: int | None = None
    signal_from: int | None = None
    self_timeout: bool = False
    stuck_s: int | None = None
    comm_rank: int | None = None
    nranks: int | None = None
    ranks: list[int] = field(default_factory=list)  # desync report


def _int(m: re.Match[str] | None, group: int = 1) -> int | None:
    return int(m.group(group)) if m and m.group(group) is not None else None


def _rank_list(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d{1,9}", text)][:4096]


def parse_line(raw: str) -> Event | None:
    """The rank-progress event in one log line, or None when it holds none."""
    line = raw.rstrip("\r\n")
    if not RELEVANT.search(line):
        return None
    body = line
    tagged = task = local = logged_on = None
    for _ in range(6):
        if m := _JOURNAL.match(body) or _SYSLOG5424.match(body):  # before kubectl's stamp
            logged_on = logged_on or m.group("host")
            body = body[m.end():]
        elif (m := _KUBECTL.match(body)) or (m := _RAY.match(body)):
            body = body[m.end():]
        elif m := _TORCHRUN.match(body):
            if m.group(1) == "rank":
                tagged = int(m.group(2)) if tagged is None else tagged
            elif local is None:
                local = int(m.group(2))
            body = body[m.end():]
        elif (m := _MPI.match(body)) or (m := _HYDRA.match(body)):
            tagged = int(m.group(1)) if tagged is None else tagged
            body = body[m.end():]
        elif m := _SRUN.match(body):
            task = int(m.group(1)) if task is None else task
            body = body[m.end():]
        else:
            break
    host = pid = None
    if m := _NCCL_HOST.match(body):
        host, pid = m.group(1), int(m.group(2))
    pg = desc = None
    group_rank = None
    if m := _PG.search(body):
        pg = m.group(2) if m.group(2) is not None else m.group(1)
        desc = m.group(3) or None
        group_rank = int(m.group(4))
    elif m := _RANK.search(body):
        group_rank = int(m.group(1))
    event = _event_of(body)
    if event is None:
        return None
    event.line = cut(line)
    event.pg, event.pg_desc, event.group_rank = pg, desc, group_rank
    event.tagged_rank, event.task, event.host, event.pid = tagged, task, host, pid
    event.local_rank, event.logged_on = local, logged_on
    if event.kind == "timeout" and pg is None:
        where = _TIMEOUT.search(body)
        if where and (m := _RANK.search(body, 0, where.start())):
            event.group_rank = int(m.group(1))  # "[Rank N] Watchdog caught": this PG's rank
    return event


def _event_of(body: str) -> Event | None:
    if _TIMEOUT.search(body):
        return Event("timeout", "", seq=_int(_SEQ.search(body)), op=(m.group(1) if (
            m := _OP.search(body)) else None), numel_in=_int(_NUMEL_IN.search(body)),
            timeout_ms=_int(_TIMEOUT_MS.search(body)), ran_for_ms=_int(_RAN_FOR.search(body)))
    status = _STATUS.search(body)
    if m := _FAILURE.search(body):
        return Event("failure", "", seq=int(m.group(1)), enqueued=_int(status, 1),
                     completed=_int(status, 2))
    if m := _DUMP.search(body):
        return Event("dump", "", signal_from=_int(m, 2),
                     self_timeout=m.group(1) == "this local rank",
                     enqueued=_int(status, 1), completed=_int(status, 2))
    if m := _STUCK.search(body):
        return Event("stuck", "", stuck_s=_int(m))
    if m := _INIT_TORCH.search(body):
        return Event("options", "", nranks=int(m.group(1)), comm_rank=int(m.group(2)))
    if "NCCL INFO" in body and (m := _INIT_NCCL.search(body)):
        return Event("init", "", comm_rank=int(m.group(1)), nranks=int(m.group(2)))
    if m := _DESYNC.search(body):
        return Event("desync", "", ranks=_rank_list(next(g for g in m.groups() if g)))
    return None
