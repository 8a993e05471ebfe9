"""Rank progress: which rank of a hung NCCL job holds everyone else up, read from its logs.

When a 1,024-rank job hangs, 1,023 ranks wait in the same collective for one rank that never
arrived. PyTorch's ProcessGroupNCCL says enough in each rank's log to find it: the watchdog's
``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE ...)``,
``... detected by watchdog at work: 7753, last enqueued NCCL work: 7755, last completed NCCL
work: 7752`` (and its other spellings), the heartbeat monitor's ``Received a dump signal ...
Last enqueued NCCL work: 166, last completed NCCL work: 166`` on ranks that did *not* time out,
and ``watchdog got stuck for 480 seconds`` when a CUDA/NCCL call hung the watchdog itself.
Comparing those numbers across ranks, per process group, names:

- the straggler: a rank that timed out at an earlier sequence number, completed fewer
  collectives than the majority, or never timed out (never enqueued the collective) while the
  others did;
- a collective mismatch: ranks waiting in different ops at the same sequence number, i.e. the
  code path diverged (an application bug, not a node fault);
- a stuck watchdog: a CUDA/NCCL call hung in that rank.

This module is pure (text in, dicts out) so the ``ranks`` probe (lines grepped on every node,
merged across hosts), ``diag parse rank-logs`` and the benchmark share one implementation.
Ranks are mapped to hosts from NCCL's ``host:pid:tid`` line prefix, NCCL's init lines
(``comm 0x.. rank 37 nranks 64``), the node a node-local log was read on, or an operator map.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

MAX_LISTED = 20  # ranks named in one finding or fact list
LINE_CHARS = 300  # evidence lines are cut here
TABLE_ROWS = 64  # per-rank table rows kept in facts (flagged ranks first)
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

# File boundaries: the probe's own marker, and what `tail -n +1 a b` / `head` print.
FILE_MARK = "=== diag:file "
_FILE_HEADER = re.compile(r"^(?:=== diag:file (.*)|==> (.*) <==)\s*$")

# Launcher prefixes, stripped in a loop (srun can wrap torchrun: "0: [rank3]:...").
_RAY = re.compile(r"^\((?:[^()]|\([^()]*\))*\)\s+")  # "(Worker[rank=9] pid=12) "
_SRUN = re.compile(r"^\s*(\d{1,6}): ")
_MPI = re.compile(r"^\[\d+,(\d{1,18})\]<(?:stdout|stderr)>:\s?")
_TORCHRUN = re.compile(r"^\[(rank|default)(\d{1,18})\]:\s?")
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
_FILE_RANK = re.compile(r"(?:^|[^a-z])rank[-_.]?(\d{1,6})(?!\d)", re.I)

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
    tagged_rank: int | None = None  # torchrun [rankN]: / mpirun [1,N]<stderr>:
    task: int | None = None  # srun --label "N: " (a rank, or a node index under torchrun)
    host: str | None = None  # NCCL's host:pid:tid prefix
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
    tagged = task = None
    for _ in range(4):
        if m := _RAY.match(body):
            body = body[m.end():]
        elif m := _TORCHRUN.match(body):
            if m.group(1) == "rank" and tagged is None:
                tagged = int(m.group(2))
            body = body[m.end():]
        elif m := _MPI.match(body):
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


# --- rows: what is known about one rank in one process group ---------------------------------

@dataclass
class Row:
    """One rank in one process group, merged over every line (and file, and host) about it."""

    pg: str
    rank: int | None  # global rank when known
    group_rank: int | None = None
    pg_desc: str | None = None
    timed_out: bool = False
    seq: int | None = None  # the work it timed out at
    op: str | None = None
    numel_in: int | None = None
    timeout_ms: int | None = None
    enqueued: int | None = None
    completed: int | None = None
    stuck: bool = False
    stuck_s: int | None = None
    signal_from: int | None = None
    host: str | None = None  # from the logs
    line: str | None = None
    read_on: str | None = None  # the node a node-local file holding it was read on

    @property
    def key(self) -> tuple[str, str]:
        who = str(self.rank) if self.rank is not None else f"g{self.group_rank}"
        return self.pg, who

    def to_dict(self) -> dict[str, Any]:
        """Compact: unset fields are left out (thousands of rows travel in facts)."""
        return {k: v for k in _ROW_FIELDS if (v := getattr(self, k)) is not None
                and v is not False}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Row:
        names = set(_ROW_FIELDS) - {"pg", "rank"}
        return cls(str(data.get("pg", UNKNOWN_PG)), data.get("rank"),
                   **{k: v for k, v in data.items() if k in names})

    def add(self, event: Event) -> None:
        self.pg_desc = self.pg_desc or event.pg_desc
        if self.group_rank is None:
            self.group_rank = event.group_rank
        self.host = self.host or event.host
        if event.kind in ("timeout", "failure"):
            self._timed(event.seq, event.op, event.numel_in, event.timeout_ms)
        if event.kind == "dump" and event.self_timeout:
            self.timed_out = True
        if event.enqueued is not None:
            self.enqueued = max(self.enqueued if self.enqueued is not None else -2,
                                event.enqueued)
        if event.completed is not None:
            self.completed = max(self.completed if self.completed is not None else -2,
                                 event.completed)
        if event.signal_from is not None:
            self.signal_from = event.signal_from
        if event.kind == "stuck":
            self.stuck = True
            if event.stuck_s is not None:
                self.stuck_s = max(self.stuck_s or 0, event.stuck_s)
        if self.line is None or (event.kind in ("timeout", "stuck") and "Watchdog caught"
                                 not in self.line and "stuck" not in self.line):
            self.line = event.line

    def _timed(self, seq: int | None, op: str | None, numel: int | None,
               timeout_ms: int | None) -> None:
        self.timed_out = True
        if seq is not None and (self.seq is None or seq < self.seq):
            if self.seq is not None and seq < self.seq:
                self.op = self.numel_in = None  # an older work: its op replaces the newer's
            self.seq = seq
        if seq is None or seq == self.seq:
            self.op = self.op or op
            self.numel_in = self.numel_in if self.numel_in is not None else numel
        self.timeout_ms = self.timeout_ms or timeout_ms

    def merge(self, other: Row) -> None:
        """Fold another row about the same rank and group into this one (order-free)."""
        self.pg_desc = self.pg_desc or other.pg_desc
        if self.group_rank is None:
            self.group_rank = other.group_rank
        if other.timed_out:
            self._timed(other.seq, other.op, other.numel_in, other.timeout_ms)
        for name in ("enqueued", "completed", "stuck_s"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs is not None and (mine is None or theirs > mine):
                setattr(self, name, theirs)
        self.stuck = self.stuck or other.stuck
        self.signal_from = self.signal_from if self.signal_from is not None else other.signal_from
        self.host = self.host or other.host
        self.line = self.line or other.line
        self.read_on = self.read_on or other.read_on

    @property
    def done(self) -> int | None:
        """Last completed work: as logged, else the one before the work it timed out at (the
        watchdog reports the oldest incomplete work of the group)."""
        if self.completed is not None:
            return self.completed
        if self.timed_out and self.seq is not None:
            return self.seq - 1
        return None


_ROW_FIELDS = tuple(f.name for f in fields(Row))


# --- one file --------------------------------------------------------------------------------

def rank_from_name(path: str) -> int | None:
    """The rank a per-rank log file names (``rank37.log``, ``train_rank_037.out``), or None."""
    name = path.rsplit("/", 1)[-1]
    found = _FILE_RANK.findall(name)
    return int(found[-1]) if len(found) == 1 else None


def _default_pg(event: Event) -> bool:
    return event.pg is None or event.pg == "0" or event.pg_desc == "default_pg"


def scan_file(path: str, lines: Iterable[str]) -> dict[str, Any]:
    """One log file's rows, the ranks it shows alive, and what maps them to hosts.

    A file is read in two passes: the first collects events and the maps (NCCL host:pid ->
    rank from init lines, torch's "global rank" per process group), the second resolves
    each event's global rank with them, so a line's order in the file does not matter.
    """
    events: list[Event] = []
    seen: set[str] = set()
    digest = hashlib.sha1()
    for raw in lines:
        line = raw.rstrip("\r\n")
        if line in seen:  # head and tail of a short file overlap
            continue
        seen.add(line)
        digest.update(line.encode("utf-8", "replace") + b"\n")
        event = parse_line(line)
        if event is not None:
            events.append(event)
    world = max((e.nranks for e in events if e.nranks and e.nranks <= MAX_WORLD and (
        e.kind == "init" or (e.kind == "options" and _default_pg(e)))), default=None)
    by_pid: dict[tuple[str, int], int | None] = {}
    for e in events:
        if e.kind == "init" and e.host and e.pid is not None and e.nranks == world:
            key = (e.host, e.pid)
            by_pid[key] = e.comm_rank if by_pid.get(key, e.comm_rank) == e.comm_rank else None
    by_group: dict[tuple[str | None, int | None], int | None] = {}
    for e in events:
        if e.kind == "options" and e.comm_rank is not None:
            key = (e.pg, e.group_rank)
            global_rank = e.tagged_rank if e.tagged_rank is not None else e.comm_rank
            by_group[key] = global_rank if by_group.get(key, global_rank) == global_rank else None
    tags = {e.tagged_rank for e in events if e.tagged_rank is not None}
    file_rank = rank_from_name(path)
    if file_rank is None and len(tags) == 1:
        file_rank = next(iter(tags))

    def global_rank(e: Event) -> int | None:
        if e.tagged_rank is not None:
            return e.tagged_rank
        if e.host and e.pid is not None and by_pid.get((e.host, e.pid)) is not None:
            return by_pid[(e.host, e.pid)]
        if e.kind == "options" and _default_pg(e):
            return e.comm_rank
        if by_group.get((e.pg, e.group_rank)) is not None:
            return by_group[(e.pg, e.group_rank)]
        if e.group_rank is not None and _default_pg(e):
            return e.group_rank
        if e.task is not None:
            return e.task
        return file_rank

    rows: dict[tuple[str, str], Row] = {}
    present: dict[int, str | None] = {}
    hosts_in_file: set[str] = set()
    desync: list[int] = []
    for e in events:
        g = global_rank(e)
        if e.host:
            hosts_in_file.add(e.host)
        if g is not None:
            present[g] = present.get(g) or e.host
        if e.kind in ("init", "options"):
            continue
        if e.kind == "desync":
            desync.extend(r for r in e.ranks if r not in desync)
            continue
        if g is None and e.group_rank is None:
            continue  # a watchdog line naming no rank, in a file naming none either
        row = Row(e.pg or UNKNOWN_PG, g)
        row.group_rank = e.group_rank
        row.add(e)
        if row.key in rows:
            rows[row.key].merge(row)
        else:
            rows[row.key] = row
    if file_rank is not None:
        present.setdefault(file_rank, None)
        if len(hosts_in_file) == 1 and len(present) == 1:  # a per-rank file on one node
            present[file_rank] = present[file_rank] or next(iter(hosts_in_file))
    folded = _fold_unknown_pg(list(rows.values()))
    for row in folded:
        if row.rank is not None and row.host is None:
            row.host = present.get(row.rank)
    return {"path": path, "digest": digest.hexdigest()[:16], "lines": len(seen),
            "rows": [r.to_dict() for r in folded],
            "present": {str(r): h for r, h in sorted(present.items())},
            "world": world, "desync": desync[:MAX_LISTED]}


def split_files(text: str) -> list[tuple[str, list[str]]]:
    """Concatenated logs split at the probe's file marks or ``==> path <==`` headers."""
    files: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if m := _FILE_HEADER.match(line):
            current = []
            files.append(((m.group(1) or m.group(2) or "-").strip(), current))
            continue
        if current is None:
            current = []
            files.append(("-", current))
        current.append(line)
    return files


# --- across files and hosts ------------------------------------------------------------------

def rank_host_map(spec: Any) -> dict[int, str]:
    """An operator's rank -> host map: a mapping, or text such as ``gpu001:0-7 gpu002:8-15``.

    Invalid entries are skipped rather than failing the walk: the logs may map the ranks anyway.
    """
    result: dict[int, str] = {}
    if isinstance(spec, Mapping):
        for rank, host in spec.items():
            if str(rank).strip().isdecimal() and host:
                result[int(str(rank).strip())] = str(host)
        return result
    if not isinstance(spec, str):
        return result
    for item in re.split(r"[\s,;]+", spec.strip()):
        host, sep, ranks = item.rpartition(":")
        if not sep or not host:
            continue
        for part in ranks.split("+"):
            lo, _, hi = part.partition("-")
            if lo.isdecimal() and (not hi or hi.isdecimal()) and len(lo + hi) < 12:
                first, last = int(lo), int(hi or lo)
                if last - first <= MAX_WORLD:
                    result.update(dict.fromkeys(range(first, last + 1), host))
    return result


def _inventory_name(host: str | None, peers: Sequence[str]) -> str | None:
    """NCCL prints gethostname(); the inventory may use the short or the long form."""
    if not host or not peers:
        return host
    if host in peers:
        return host
    short = host.split(".")[0]
    for peer in peers:
        if peer.split(".")[0] == short:
            return peer
    return host


def merge_sources(sources: Iterable[tuple[str | None, Mapping[str, Any]]]) -> dict[str, Any]:
    """Files read on hosts -> one view: rows, present ranks and world size, deduplicated.

    *sources* are (host it was read on, scan_file result). The same file on shared storage is
    read by every node: identical copies are folded into one. A path whose copies on different
    hosts show overlapping ranks is shared (no host from the file); otherwise each copy is
    node-local and the node that read it is the host of the ranks it holds.
    """
    copies: dict[str, dict[str, tuple[set[str], Mapping[str, Any]]]] = {}
    for host, scan in sources:
        by_digest = copies.setdefault(str(scan.get("path", "-")), {})
        readers, _ = by_digest.setdefault(str(scan.get("digest", "")), (set(), scan))
        if host:
            readers.add(host)
    rows: dict[tuple[str, str], Row] = {}
    present: dict[int, str | None] = {}
    read_on: dict[int, str] = {}
    world: int | None = None
    desync: list[int] = []
    files = 0
    for versions in copies.values():
        rank_sets = [set(scan.get("present") or {}) | {str(r.get("rank")) for r in
                     scan.get("rows") or []} for _, scan in versions.values()]
        readers_all = set().union(*(readers for readers, _ in versions.values()))
        overlapping = len(versions) > 1 and any(
            a & b for i, a in enumerate(rank_sets) for b in rank_sets[i + 1:])
        shared = overlapping or (len(readers_all) > 1 and len(versions) == 1)
        for readers, scan in versions.values():
            files += 1
            file_host = next(iter(readers)) if len(readers) == 1 and not shared else None
            for data in scan.get("rows") or []:
                row = Row.from_dict(data)
                row.read_on = file_host
                if row.key in rows:
                    rows[row.key].merge(row)
                else:
                    rows[row.key] = row
            for rank, host in (scan.get("present") or {}).items():
                if str(rank).isdecimal():
                    present[int(rank)] = present.get(int(rank)) or host
                    if file_host:
                        read_on.setdefault(int(rank), file_host)
            if scan.get("world"):
                world = max(world or 0, int(scan["world"]))
            desync.extend(r for r in scan.get("desync") or [] if r not in desync)
    for row in rows.values():
        if row.rank is not None and row.read_on:
            read_on.setdefault(row.rank, row.read_on)
    return {"rows": list(rows.values()), "present": present, "read_on": read_on,
            "world": world, "desync": desync, "files": files}


def _fold_unknown_pg(rows: list[Row]) -> list[Row]:
    """Attach "[Rank N] Watchdog caught ..." lines (no group named) to the group whose
    "[PG p Rank N] ... at work: S" line reports the same rank and work; failing that, to the
    only group the logs name, if its ranks timed out at that same work or not at all (one
    torch version prints one format, so a lone named group is the one these lines mean)."""
    known = [r for r in rows if r.pg != UNKNOWN_PG]
    kept = list(known)
    seqs_by_pg: dict[str, set[int]] = {}
    for r in known:
        if r.timed_out and r.seq is not None:
            seqs_by_pg.setdefault(r.pg, set()).add(r.seq)
    index = {r.key: r for r in known}
    for row in rows:
        if row.pg != UNKNOWN_PG:
            continue
        matches = [k for k in known if k.rank == row.rank and (k.group_rank == row.group_rank
                   or row.rank is not None) and (k.seq == row.seq or k.seq is None)]
        groups = [pg for pg, seqs in seqs_by_pg.items() if row.seq in seqs]
        named = {k.pg for k in known}
        if len(named) == 1 and not seqs_by_pg:  # the one group named, none of it timed out
            groups = list(named)
        if len(matches) == 1:
            matches[0].merge(row)
        elif not matches and len(named) == 1 and len(groups) == 1:
            row.pg = groups[0]
            if row.key in index:
                index[row.key].merge(row)
            else:
                index[row.key] = row
                kept.append(row)
        else:
            kept.append(row)
    return kept


def _mode(values: Iterable[int]) -> int | None:
    """The most common value; ties go to the largest (stragglers are behind, not ahead)."""
    counts = Counter(values)
    if not counts:
        return None
    top = max(counts.values())
    return max(v for v, n in counts.items() if n == top)


def _ranks_text(ranks: Sequence[Any], total: int | None = None) -> str:
    """At most MAX_LISTED names, and how many more there are (*total*: all of them)."""
    shown = ", ".join(str(r) for r in ranks[:MAX_LISTED])
    more = (total if total is not None else len(ranks)) - min(len(ranks), MAX_LISTED)
    return shown + (f" and {more} more" if more > 0 else "")


def analyse(merged: Mapping[str, Any], rank_hosts: Mapping[int, str] | None = None,
            peers: Sequence[str] = (), world_size: int | None = None) -> dict[str, Any]:
    """The verdict over every rank: stragglers, mismatches, stuck watchdogs, and the facts.

    *merged* is ``merge_sources``' result. Hosts come from the logs first, then *rank_hosts*
    (the operator's map), then the node a node-local file was read on.
    """
    rank_hosts = dict(rank_hosts or {})
    rows = _fold_unknown_pg(list(merged.get("rows") or []))
    present: dict[int, str | None] = dict(merged.get("present") or {})
    read_on: dict[int, str] = dict(merged.get("read_on") or {})
    world = world_size or merged.get("world")
    world = world if isinstance(world, int) and 0 < world <= MAX_WORLD else None

    def host_of(logged: str | None, rank: int | None, node: str | None = None) -> str | None:
        """The logs first, then the operator's map, then where a node-local file was read."""
        if rank is not None:
            logged = logged or present.get(rank) or rank_hosts.get(rank) or read_on.get(rank)
        return _inventory_name(logged or node, peers)

    for row in rows:
        row.host = host_of(row.host, row.rank, row.read_on)
    seen = {r.rank for r in rows if r.rank is not None} | set(present)
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.pg, []).append(row)

    stragglers: list[dict[str, Any]] = []
    mismatches: list[dict[str, Any]] = []
    stuck: list[dict[str, Any]] = []
    flagged: dict[tuple[str, str], str] = {}
    pg_summary: list[dict[str, Any]] = []
    for pg, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        timed = [r for r in members if r.timed_out]
        seq_major = _mode(r.seq for r in timed if r.seq is not None)
        done_major = _mode(d for r in members if (d := r.done) is not None)
        desc = next((r.pg_desc for r in members if r.pg_desc), None)
        world_like = pg in ("0", UNKNOWN_PG) or desc == "default_pg" or (
            world is not None and len(members) >= world)
        pg_summary.append({"pg": pg, "desc": desc, "ranks": len(members),
                           "timed_out": len(timed), "majority_seq": seq_major,
                           "majority_last_completed": done_major})
        for row in members:
            if row.stuck:
                stuck.append(_entry(row, "watchdog stuck" + (
                    f" for {row.stuck_s} s" if row.stuck_s else "")))
                flagged.setdefault(row.key, "stuck")
        if not timed:
            continue
        # mismatch: different ops at the same sequence number
        by_seq: dict[int, dict[str, list[Row]]] = {}
        for row in timed:
            if row.seq is not None and row.op:
                by_seq.setdefault(row.seq, {}).setdefault(row.op, []).append(row)
        for seq, ops in sorted(by_seq.items()):
            if len(ops) < 2:
                continue
            majority_op = max(ops, key=lambda op: len(ops[op]))
            mismatches.append({
                "pg": pg, "pg_desc": desc, "seq": seq,
                "ops": {op: [_who(r) for r in rs[:MAX_LISTED]] for op, rs in ops.items()},
                "counts": {op: len(rs) for op, rs in ops.items()},
                # the ranks in the less common op(s) are the ones whose code path differs
                "hosts": sorted({r.host for op, rs in ops.items() if op != majority_op
                                 for r in rs if r.host})[:MAX_LISTED],
                "lines": [next(r.line for r in rs if r.line) for rs in ops.values()
                          if any(r.line for r in rs)][:4]})
            for rs in ops.values():
                for r in rs:
                    flagged.setdefault(r.key, "mismatch")
        # behind: an earlier timeout, fewer completed works, or no timeout at all
        behind: list[tuple[Row, str]] = []
        quiet: list[tuple[Row, str]] = []
        for row in members:
            if row.stuck and not row.timed_out:
                continue
            if row.timed_out and row.seq is not None and seq_major is not None \
                    and row.seq < seq_major:
                behind.append((row, f"timed out at work {row.seq}, the majority at {seq_major}"))
            elif row.done is not None and done_major is not None and row.done < done_major:
                behind.append((row, f"last completed work {row.done}, the majority's "
                                    f"{done_major}"))
            elif not row.timed_out and seq_major is not None and (
                    row.enqueued is None or row.enqueued < seq_major):
                enq = ("" if row.enqueued is None else
                       f"; last enqueued work {row.enqueued}")
                quiet.append((row, f"never timed out while {len(timed)} rank(s) timed out at "
                                   f"work {seq_major}{enq}: it never issued that collective"))
        if world_like:
            in_group = {r.rank for r in members if r.rank is not None}
            for rank in sorted(set(present) - in_group):
                ghost = Row(pg, rank, host=host_of(present.get(rank), rank))
                quiet.append((ghost, f"its log shows it alive but no timeout while "
                                     f"{len(timed)} rank(s) timed out at work {seq_major}"))
            if world:
                for rank in range(world):
                    if rank not in seen and rank not in in_group:
                        ghost = Row(pg, rank, host=host_of(None, rank))
                        quiet.append((ghost, "no log line from this rank at all"))
        if quiet and len(quiet) * 2 >= len(timed) + len(quiet):
            quiet = []  # most ranks silent: the logs are incomplete, not one rank behind
        for row, why in behind + quiet:
            entry = _entry(row, why)
            entry.update(majority_seq=seq_major, majority_last_completed=done_major)
            stragglers.append(entry)
            flagged.setdefault(row.key, "behind")

    desync = [int(r) for r in merged.get("desync") or []]
    timed_rows = [r for r in rows if r.timed_out]
    dones = [d for r in rows if (d := r.done) is not None]
    if mismatches:
        verdict = "collective-mismatch"
    elif stragglers:
        verdict = "straggler"
    elif stuck:
        verdict = "watchdog-stuck"
    elif len(timed_rows) >= 2:
        verdict = "all-waiting"
    elif timed_rows:
        verdict = "one-timeout"
    else:
        verdict = "no-timeouts"
    # the furthest behind first, then by rank
    stragglers.sort(key=lambda s: (s["last_completed"] if s["last_completed"] is not None
                                   else 1 << 62, s["rank"] if s["rank"] is not None else 1 << 62))
    table = sorted(rows, key=lambda r: (r.key not in flagged, r.rank if r.rank is not None
                                        else 1 << 30, r.pg))
    missing = sorted(set(range(world)) - seen) if world else []
    return {
        "ranks_seen": len(seen) + len({r.key for r in rows if r.rank is None}),
        "world_size": world,
        "max_last_completed_seq": max(dones) if dones else None,
        "min_last_completed_seq": min(dones) if dones else None,
        "timed_out_ranks": len({r.rank if r.rank is not None else r.key for r in timed_rows}),
        "verdict": verdict,
        "summary": _summary(verdict, stragglers, mismatches, stuck, timed_rows),
        "stragglers": stragglers[:MAX_LISTED],
        "stragglers_total": len(stragglers),
        "mismatches": mismatches[:8],
        "stuck": stuck[:MAX_LISTED],
        "stuck_total": len(stuck),
        "missing_ranks": missing[:MAX_LISTED],
        "missing_total": len(missing),
        "desync_lagging": desync[:MAX_LISTED],
        "process_groups": pg_summary[:16],
        "table": [_table_row(r, flagged.get(r.key)) for r in table[:TABLE_ROWS]],
        "table_total": len(table),
        "files_read": merged.get("files", 0),
    }


def _who(row: Row) -> int | str:
    return row.rank if row.rank is not None else f"group rank {row.group_rank}"


def _entry(row: Row, why: str) -> dict[str, Any]:
    return {"rank": row.rank, "group_rank": row.group_rank, "pg": row.pg, "host": row.host,
            "timed_out": row.timed_out, "seq": row.seq, "op": row.op,
            "last_enqueued": row.enqueued, "last_completed": row.done, "reason": why,
            "line": row.line}


def _table_row(row: Row, flag: str | None) -> dict[str, Any]:
    state = flag or ("timed-out" if row.timed_out else "no-timeout")
    return {"rank": _who(row), "pg": row.pg, "host": row.host, "state": state,
            "seq": row.seq, "op": row.op, "last_enqueued": row.enqueued,
            "last_completed": row.done}


def _summary(verdict: str, stragglers: list[dict[str, Any]], mismatches: list[dict[str, Any]],
             stuck: list[dict[str, Any]], timed: list[Row]) -> str:
    if verdict == "collective-mismatch":
        m = mismatches[0]
        ops = ", ".join(f"{op} on {n} rank(s)" for op, n in m["counts"].items())
        return f"ranks wait in different collectives at work {m['seq']}: {ops}"
    if verdict == "straggler":
        names = _ranks_text([f"{s['rank']}" + (f" ({s['host']})" if s["host"] else "")
                             for s in stragglers])
        return f"rank(s) {names} behind the majority: {stragglers[0]['reason']}"
    if verdict == "watchdog-stuck":
        return f"the NCCL watchdog got stuck on {len(stuck)} rank(s)"
    if verdict == "one-timeout":
        return "one rank's timeout is all the logs show: nothing to compare it with"
    if verdict == "all-waiting":
        return (f"{len(timed)} rank(s) timed out in the same collective and none is behind: "
                "the hang is below Python (a GPU, link or NCCL fault); check the nodes")
    return "no NCCL watchdog timeout in the logs"


def analyse_text(text: str, rank_hosts: Mapping[int, str] | None = None,
                 peers: Sequence[str] = (), world_size: int | None = None) -> dict[str, Any]:
    """Whole logs (one, or several concatenated) -> the analysis. Filters like the host."""
    scans = [scan_file(path, find_lines("\n".join(lines)))
             for path, lines in split_files(text)]
    return analyse(merge_sources((None, s) for s in scans), rank_hosts, peers, world_size)


# --- findings ----------------------------------------------------------------------------------

def findings(result: Mapping[str, Any], probe: str = "ranks") -> list[Any]:
    """straggler-rank, collective-mismatch and watchdog-stuck findings of an analysis."""
    from probes.base import finding

    out = []
    for m in result.get("mismatches") or []:
        ops = "; ".join(f"{op} on rank(s) {_ranks_text(ranks)}" + (
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
        hosts = sorted({s["host"] for s in stragglers if s["host"]})
        first = stragglers[0]
        total = result.get("stragglers_total", len(stragglers))
        names = _ranks_text([str(s["rank"] if s["rank"] is not None else
                                 f"group rank {s['group_rank']}")
                             + (f" on {s['host']}" if s["host"] else " (host unknown)")
                             for s in stragglers], total)
        out.append(finding(
            "straggler-rank", hosts,
            f"rank {names} {'is' if total == 1 else 'are'} behind the majority in process "
            f"group {first['pg']}: {first['reason']}" + (
                "" if hosts else "; map ranks to hosts with params.rank_hosts "
                "(e.g. 'gpu001:0-7 gpu002:8-15') or NCCL_DEBUG=INFO logs"),
            probe, ranks=[{k: s[k] for k in ("rank", "host", "pg", "last_completed",
                                              "majority_last_completed", "seq",
                                              "majority_seq", "reason", "line")}
                          for s in stragglers[:MAX_LISTED]],
            total=total, majority_seq=first.get("majority_seq"),
            majority_last_completed=first.get("majority_last_completed")))
    stuck = result.get("stuck") or []
    if stuck:
        hosts = sorted({s["host"] for s in stuck if s["host"]})
        names = _ranks_text([str(s["rank"]) + (f" on {s['host']}" if s["host"] else "")
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
