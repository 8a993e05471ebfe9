"""One log file's lines folded into per-rank rows, and files read on many hosts merged.

A Row is what is known about one rank in one process group; ``scan_file`` builds them from one
file (resolving each line's global rank from the file's own maps), ``merge_sources`` folds the
files every node read into one view, one copy of a shared file counted once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from probes.rankprogress.grammar import MAX_LISTED, MAX_WORLD, UNKNOWN_PG, Event, parse_line
from probes.rankprogress.hosts import (
    MAX_RANKS_PER_NODE,
    content_hosts,
    host_from_name,
    name_tokens,
)

# File boundaries: the probe's own marker, and what `tail -n +1 a b` / `head` print.
FILE_MARK = "=== diag:file "
_FILE_HEADER = re.compile(r"^(?:=== diag:file (.*)|==> (.*) <==)\s*$")

# A per-rank log file names its rank: rank37.log, train_rank_037.out.
_FILE_RANK = re.compile(r"(?:^|[^a-z])rank[-_.]?(\d{1,6})(?!\d)", re.I)


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
        self.host = self.host or event.host or event.logged_on
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


def scan_file(path: str, lines: Iterable[str], name_pattern: str | None = None
              ) -> dict[str, Any]:
    """One log file's rows, the ranks it shows alive, and what maps them to hosts.

    A file is read in two passes: the first collects events and the maps (NCCL host:pid ->
    rank from init lines, torch's "global rank" per process group), the second resolves
    each event's global rank with them, so a line's order in the file does not matter. A file
    whose lines name one host only (NCCL's prefix, torch elastic's failure table, srun's and
    slurmstepd's errors) is that node's: its ranks are placed there. Its name may name the node
    too (Slurm's %N: *name_pattern*, else the host-shaped part of the name), when it holds
    one node's ranks.
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
            group = (e.pg, e.group_rank)
            rank = e.tagged_rank if e.tagged_rank is not None else e.comm_rank
            by_group[group] = rank if by_group.get(group, rank) == rank else None
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
        host = e.host or e.logged_on
        if host:
            hosts_in_file.add(host)
        if g is not None:
            present[g] = present.get(g) or host
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
    named_hosts = {h.split(".")[0] for h in hosts_in_file} | content_hosts(seen)
    if len(named_hosts) == 1 and len(present) <= MAX_RANKS_PER_NODE:  # one node's output
        only = next(iter(named_hosts))
        for rank in present:
            present[rank] = present[rank] or only
    folded = fold_unknown_pg(list(rows.values()))
    for row in folded:
        if row.rank is not None and row.host is None:
            row.host = present.get(row.rank)
    # One node's file (few ranks, at most one host named inside): its name may name the node.
    one_node = len(present) <= MAX_RANKS_PER_NODE and len(named_hosts) <= 1
    return {"path": path, "digest": digest.hexdigest()[:16], "lines": len(seen),
            "rows": [r.to_dict() for r in folded],
            "present": {str(r): h for r, h in sorted(present.items())},
            "world": world, "desync": desync[:MAX_LISTED],
            "name_host": host_from_name(path, name_pattern) if one_node else None,
            "name_tokens": name_tokens(path) if one_node and not name_pattern else []}


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
    named: dict[int, tuple[str | None, tuple[str, ...]]] = {}  # what a file's name says
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
            name = (scan.get("name_host"), tuple(scan.get("name_tokens") or ()))
            for rank, host in (scan.get("present") or {}).items():
                if str(rank).isdecimal():
                    present[int(rank)] = present.get(int(rank)) or host
                    if file_host:
                        read_on.setdefault(int(rank), file_host)
                    if name[0] or name[1]:
                        named.setdefault(int(rank), name)
            if scan.get("world"):
                world = max(world or 0, int(scan["world"]))
            desync.extend(r for r in scan.get("desync") or [] if r not in desync)
    for row in rows.values():
        if row.rank is not None and row.read_on:
            read_on.setdefault(row.rank, row.read_on)
    return {"rows": list(rows.values()), "present": present, "read_on": read_on,
            "named": named, "world": world, "desync": desync, "files": files}


def fold_unknown_pg(rows: list[Row]) -> list[Row]:
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
