"""Rank logs on this machine, read within a memory bound: the ``ranks`` analysis for logs the
operator has at hand (``diag parse rank-logs``, a shared file system mounted where diag runs).

The node-side script keeps a node's output small; this is its counterpart on the operator's
machine, where 1,024 logs of 100 KB or one combined log of gigabytes may be handed in. Memory
stays bounded whatever the size or number of files:

- a file is streamed line by line, each line read at most ``LINE_BYTES`` at a time (a 1 GB
  "line" of binary junk is never held), and only the lines the node's grep would let through
  are kept: init lines among the first ``HEAD_LINES`` (at most ``HEAD_KEEP``) and the last
  ``KEEP_PER_FILE`` watchdog lines;
- a file bigger than ``WHOLE_FILE_BYTES`` is read from both ends: its head, and its last
  ``TAIL_BYTES`` for the hang lines (they are the last ones a rank prints);
- what is kept of each file is its scan (rows per rank), not its text;
- a file that is not text (NUL bytes in its first block, as grep decides) or not a regular file
  is skipped, and named in ``skipped_files``.
"""

from __future__ import annotations

import glob
import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any

from probes import ranks
from probes.rankprogress.grammar import HEAD_RE, TAIL_RE, find_lines, head_text
from probes.rankprogress.hosts import evidence_lines, rank_host_map
from probes.rankprogress.scan import merge_sources, scan_file
from probes.rankprogress.verdict import analyse

LINE_BYTES = 4096  # read per line; the rest of a longer line is skipped (lines are cut at 1000)
BLOCK_BYTES = 1 << 20  # read at a time when a whole file is searched
LINE_CHARS = 1000  # what is kept of a line, as on the node (cut -c1-1000)
SNIFF_BYTES = 8192  # NUL bytes here make a file binary (grep looks at its first buffer)
TAIL_BYTES = 32 << 20  # of a big file, this much of its end is read for the hang lines
MAX_SKIPPED = 64  # skipped files named in the result
HOST_LINES = 8  # lines naming the file's node kept per file (NCCL's prefix, torch's table)


def lines_of(stream: IO[bytes], limit: int = LINE_BYTES) -> Iterator[str]:
    """The stream's lines, decoded, each at most *limit* bytes: the rest of a longer line is
    read and dropped in *limit*-sized pieces, so no line is ever held whole."""
    while True:
        raw = stream.readline(limit)
        if not raw:
            return
        if len(raw) == limit and not raw.endswith(b"\n"):
            while (rest := stream.readline(limit)) and not rest.endswith(b"\n"):
                pass
        yield raw.decode("utf-8", "replace").rstrip("\r\n")


def blocks_of(stream: IO[bytes], size: int = BLOCK_BYTES) -> Iterator[str]:
    """The stream as decoded blocks of whole lines (about *size* bytes each, "\n"-joined, no
    trailing newline), a line longer than LINE_BYTES cut there: the keyword search of
    ``find_lines`` then runs over a block at a time, ~3x faster than a regex per line, with
    memory bounded by the block."""
    carry = b""
    dropping = False  # inside a line already cut at LINE_BYTES
    while data := stream.read(size):
        if dropping:
            newline = data.find(b"\n")
            if newline < 0:
                continue
            data, dropping = data[newline:], False
        buf = carry + data
        end = buf.rfind(b"\n")
        if end < 0:
            carry = buf
            if len(carry) > LINE_BYTES:
                carry, dropping = carry[:LINE_BYTES], True
            continue
        carry = buf[end + 1:]
        if len(carry) > LINE_BYTES:
            carry, dropping = carry[:LINE_BYTES], True
        yield buf[:end].decode("utf-8", "replace")
    if carry:
        yield carry.decode("utf-8", "replace")


def not_text(path: str) -> str | None:
    """Why *path* cannot be read as a log ("not text (binary data)", "not a regular file"),
    or None."""
    try:
        if not os.path.isfile(path):
            return "not a regular file"
        with open(path, "rb") as f:
            if b"\0" in f.read(SNIFF_BYTES):
                return "not text (binary data)"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    return None


def relevant(lines: Iterable[str], head_lines: int | None = None) -> list[str]:
    """The lines the node's grep lets through: init lines among the first *head_lines*
    (HEAD_KEEP at most), and the last KEEP_PER_FILE watchdog / progress lines; and a few
    lines naming the file's node (``hosts.evidence_lines``)."""
    head_lines = ranks.HEAD_LINES if head_lines is None else head_lines
    head: list[str] = []
    tail: deque[str] = deque(maxlen=ranks.KEEP_PER_FILE)
    named: list[str] = []
    for i, line in enumerate(lines):
        if TAIL_RE.search(line):
            tail.append(line[:LINE_CHARS])
        elif i < head_lines and len(head) < ranks.HEAD_KEEP and HEAD_RE.search(line):
            head.append(line[:LINE_CHARS])
        elif len(named) < HOST_LINES:
            named.extend(evidence_lines(line, 1))
    return head + list(tail) + named


def relevant_blocks(blocks: Iterable[str], head_lines: int | None = None) -> list[str]:
    """``relevant`` over ``blocks_of``'s blocks: the same lines, found block by block."""
    head_lines = ranks.HEAD_LINES if head_lines is None else head_lines
    head: list[str] = []
    tail: deque[str] = deque(maxlen=ranks.KEEP_PER_FILE)
    named: list[str] = []
    seen = 0
    for block in blocks:
        if len(named) < HOST_LINES:
            named.extend(evidence_lines(block, HOST_LINES - len(named)))
        count = block.count("\n") + 1
        if seen < head_lines and len(head) < ranks.HEAD_KEEP:
            part = block if seen + count <= head_lines else head_text(block, head_lines - seen)
            room = ranks.HEAD_KEEP - len(head)
            head.extend(ln[:LINE_CHARS] for ln in find_lines(part, tail=False)[:room])
        tail.extend(ln[:LINE_CHARS] for ln in find_lines(block, head=False))
        seen += count
    return head + list(tail) + named


def read_log(path: str, tail_lines: int = ranks.TAIL_LINES) -> list[str]:
    """The relevant lines of one log file, read within the bounds above (OSError passes)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= ranks.WHOLE_FILE_BYTES:
            return relevant_blocks(blocks_of(f))
        head: list[str] = []
        named: list[str] = []
        seen = 0
        for block in blocks_of(f):
            named.extend(evidence_lines(block, max(0, HOST_LINES - len(named))))
            count = block.count("\n") + 1
            part = block if seen + count <= ranks.HEAD_LINES else head_text(
                block, ranks.HEAD_LINES - seen)
            head.extend(ln[:LINE_CHARS] for ln in find_lines(part, tail=False))
            seen += count
            if seen >= ranks.HEAD_LINES or len(head) >= ranks.HEAD_KEEP:
                break
        start = max(0, size - TAIL_BYTES)
        f.seek(start)
        # the watchdog lines among the last *tail_lines* lines, as `tail -n | grep` keeps them
        kept: deque[tuple[int, str]] = deque(maxlen=ranks.KEEP_PER_FILE)
        count = 0
        for i, block in enumerate(blocks_of(f)):
            if i == 0 and start > 0:  # the partial line the seek landed in
                block = block.partition("\n")[2]
            named.extend(evidence_lines(block, max(0, HOST_LINES - len(named))))
            at = index = 0
            for line in find_lines(block, head=False):  # in order: one pass to number them
                found = block.find(line, at)
                index += block.count("\n", at, found)
                at = found + 1  # identical lines: the next one is further on
                kept.append((count + index, line[:LINE_CHARS]))
            count += block.count("\n") + 1
        return (head[:ranks.HEAD_KEEP] + [ln for i, ln in kept if i >= count - tail_lines]
                + named)


def local_files(patterns: Iterable[str], max_files: int = ranks.MAX_FILES) -> list[str]:
    """The newest *max_files* regular files matching the globs, like the node-side ``ls -t``."""
    found = {p for pattern in patterns for p in glob.glob(os.path.expanduser(pattern))
             if os.path.isfile(p)}
    return sorted(found, key=lambda p: -os.stat(p).st_mtime)[:max_files]


def analyse_files(paths: Sequence[str], rank_hosts: Any = None, peers: Sequence[str] = (),
                  world_size: int | None = None, tail_lines: int = ranks.TAIL_LINES,
                  stdin: IO[bytes] | None = None, name_pattern: str | None = None
                  ) -> dict[str, Any]:
    """The rank analysis of these files ("-" is *stdin*), each read within the bounds above;
    files that are not text are skipped and named, unreadable ones counted. *name_pattern* is
    the Slurm output pattern the files were written with (``%x-%j-%N.out``): its %N names
    each file's node."""
    scans = []
    skipped: list[dict[str, str]] = []
    unreadable = 0
    for path in paths:
        if path == "-" and stdin is not None:
            scans.append(scan_file(path, relevant_blocks(blocks_of(stdin))))
            continue
        why = not_text(path)
        if why is not None:
            if why.startswith("unreadable"):
                unreadable += 1
            else:
                skipped.append({"path": path, "why": why})
            continue
        try:
            scans.append(scan_file(path, read_log(path, tail_lines), name_pattern))
        except OSError:
            unreadable += 1
    result = analyse(merge_sources((None, s) for s in scans),
                     rank_host_map(rank_hosts), peers, world_size)
    result.update(unreadable_files=unreadable, skipped_files=skipped[:MAX_SKIPPED],
                  skipped_total=len(skipped),
                  lines_read=sum(int(s.get("lines") or 0) for s in scans))
    return result


def read_local(patterns: Sequence[str], rank_hosts: Any = None, peers: Sequence[str] = (),
               world_size: int | None = None, max_files: int = ranks.MAX_FILES,
               tail_lines: int = ranks.TAIL_LINES, name_pattern: str | None = None
               ) -> dict[str, Any]:
    """The analysis of the newest files matching the globs, bounded as on a node."""
    return analyse_files(local_files(patterns, max_files), rank_hosts, peers, world_size,
                         tail_lines, name_pattern=name_pattern)
