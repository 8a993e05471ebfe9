"""Which node a rank ran on, from everything but the NCCL lines themselves.

The logs name a rank's node in NCCL's ``host:pid:tid`` prefix and in a journald / syslog
line's host field (``scan`` reads those), and a file whose lines name one node only (NCCL's
prefix, torch elastic's failure table, srun's and slurmstepd's errors: ``content_hosts``) is
that node's. When they do not, the node comes from, in order of trust: the operator's rank ->
host map, the log's own name (Slurm's %N in ``train-48213-gpu-c05.out``, ``gpu005.log``,
``/logs/gpu005/stderr.log``; matched against the inventory when there is one, never the whole
stem of a composite name), and the node a node-local log was read on. Each answer says where
it came from, so a verdict can say how sure it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from probes.rankprogress.grammar import MAX_WORLD

# A per-node log names its node: gpu005.log, /logs/gpu005/stderr.log, and Slurm's output
# patterns (man sbatch, "filename pattern"): %x-%j-%N.out as train-48213-gpu-c05.out, %N-%j.out
# as gpu-c05-48213.out. The node is the part of the name that is neither the job's name nor its
# id: after the job id (a number of 4+ digits, or any number after a word such as "slurm" or
# "job"), else before it, else the name without its generic words ("train-gpu005"). Without an
# inventory only a part shaped like a host counts (letters, then digits at the end: "gpu005",
# "gpu-c05", "node-12.cluster"), never a generic word, a rank or a job id.
_LOG_SUFFIXES = (".log", ".out", ".err", ".txt", ".gz", ".stdout", ".stderr", ".json")
_HOSTLIKE = re.compile(r"[A-Za-z][A-Za-z0-9\-]*[0-9](?:\.[A-Za-z][A-Za-z0-9\-]*)*")
_GENERIC = re.compile(r"^(?:slurm|job|log|logs|train|run|out|output|std|stdout|stderr|attempt"
                      r"|rank|task|node_?rank|local_?rank|worker_?rank|messages|syslog|journal"
                      r"|err|error|errors|debug|nccl|torch|torchrun|srun|sbatch|batch)"
                      r"(?:[-_.]?\d+)?$", re.I)
_RANKISH = re.compile(r"^(?:rank|task|proc|local_?rank|node_?rank|worker)\d*$", re.I)
_SEPARATORS = re.compile(r"([-_.])")
MAX_RANKS_PER_NODE = 16  # a file with more ranks than one node runs is not one node's log
MAX_TOKENS = 32

# Hosts a line names as the one it was printed on: NCCL's "host:pid:tid [dev] NCCL" prefix
# (getHostName(), cut at the first "."; WARN lines put "file.cc:123" and, since 2.28,
# "(func)" before "NCCL": debug.cc), srun's "srun: error: host: task 3: ...". The logs
# component's host-side awk reads the same two (probes/logs_script.py).
_LINE_HOST = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*):\d{1,10}:\d{1,10} \[\d{1,4}\] "
                        r"(?:[^ ]+ ){0,3}NCCL "
                        r"|srun: error: ([A-Za-z0-9][A-Za-z0-9._-]*): task")
# ... and, for a whole file: torch elastic's failure table ("  host      : gpu005", the node of
# the rank on the next line) and slurmstepd's "*** STEP 48213.0 ON gpu005 CANCELLED AT ...".
_TABLE_HOST = re.compile(r"^\s*host\s*: ([A-Za-z0-9][A-Za-z0-9._-]*)\s*$")
_STEPD_HOST = re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON ([A-Za-z0-9][A-Za-z0-9._-]*) ")
HOST_KEYS = (" NCCL ", "srun: error:", "host ", "*** JOB ", "*** STEP ")


def host_in_line(line: str) -> str | None:
    """The host a line says it was printed on (NCCL's prefix, srun's error), or None."""
    m = _LINE_HOST.search(line)
    return (m.group(1) or m.group(2)) if m else None


def content_hosts(lines: Iterable[str], limit: int = 2) -> set[str]:
    """The hosts the lines of one file name as theirs (short names; reading stops at *limit*
    of them): a file naming exactly one is that node's output, whatever its name."""
    found: set[str] = set()
    for line in lines:
        if not any(key in line for key in HOST_KEYS):
            continue
        m = _LINE_HOST.search(line) or _TABLE_HOST.match(line) or _STEPD_HOST.search(line)
        if m:
            found.add(next(g for g in m.groups() if g).split(".")[0])
            if len(found) >= limit:
                break
    return found


def evidence_lines(text: str, limit: int = 4, tries: int = 4) -> list[str]:
    """A few lines of *text* (a block of a log) that name their host, found by keyword as
    ``grammar.find_lines`` does: what a rank-log reader keeps so a file's node is known even
    when its rank lines do not say it."""
    found: list[str] = []
    for key in HOST_KEYS:
        pos, tried = text.find(key), 0
        while pos >= 0 and tried < tries and len(found) < limit:
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            line = text[start:end]
            if content_hosts([line]):
                found.append(line[:1000])
                break
            pos, tried = text.find(key, end), tried + 1
    return found


def _stem(name: str) -> str:
    while True:
        lower = name.lower()
        cut = next((sfx for sfx in _LOG_SUFFIXES if lower.endswith(sfx) and len(name) > len(sfx)),
                   None)
        if cut is None:
            return name
        name = name[: -len(cut)]


def _is_host(candidate: str) -> bool:
    return bool(candidate and _HOSTLIKE.fullmatch(candidate) and not _GENERIC.match(candidate)
                and "rank" not in candidate.lower())


def _trim(pieces: list[str]) -> str:
    """Words (even indexes) and separators (odd) -> the text without generic words, ranks and
    numbers at either end ("train-gpu005" -> "gpu005", "gpu005-rank3" -> "gpu005")."""
    words = pieces[0::2]
    lo, hi = 0, len(words)

    def junk(word: str, before: str | None) -> bool:
        return bool(_GENERIC.match(word) or _RANKISH.match(word) or (
            word.isdecimal() and before is not None and (
                _GENERIC.match(before) or _RANKISH.match(before))))

    while lo < hi and junk(words[lo], None):
        lo += 1
        if lo < hi and words[lo].isdecimal():  # "job_12-gpu005": the 12 went with "job"
            lo += 1
    while hi > lo and junk(words[hi - 1], words[hi - 2] if hi - 2 >= lo else None):
        hi -= 1
    return "".join(pieces[2 * lo: 2 * hi - 1]) if hi > lo else ""


def _host_in_stem(stem: str) -> str | None:
    pieces = _SEPARATORS.split(stem)
    words = pieces[0::2]
    ids = [i for i, w in enumerate(words) if w.isdecimal() and (
        len(w) >= 4 or (i > 0 and _GENERIC.match(words[i - 1])))]
    if ids:
        i = ids[-1]
        j = i + 1
        if j < len(words) and words[j].isdecimal() and pieces[2 * i + 1] == "_":
            j += 1  # an array job's task id: 48213_7
        for candidate in (_trim(pieces[2 * j:]), _trim(pieces[: max(0, 2 * i - 1)])):
            if _is_host(candidate):
                return candidate
        return None
    candidate = _trim(pieces)
    return candidate if _is_host(candidate) else None


_SLURM_FIELD = {"N": r"(?P<host>[A-Za-z0-9][A-Za-z0-9-]*)", "j": r"\d+", "A": r"\d+",
                "a": r"\d+", "b": r"\d", "n": r"\d+", "t": r"\d+", "r": r"\d+",
                "s": r"(?:\d+|batch)", "J": r"\d+(?:\.(?:\d+|batch))?", "x": r".+?",
                "u": r"[^/]+?", "S": r"\S+?"}


def slurm_name_regex(pattern: str) -> re.Pattern[str] | None:
    """Slurm's output filename pattern (``man sbatch``: %x-%j-%N.out) as a regex whose group
    ``host`` is %N; None when it has no %N (it names no node)."""
    if "%N" not in re.sub(r"%%", "", pattern):
        return None
    out = []
    pos = 0
    for m in re.finditer(r"%(\d*)([%A-Za-z])", pattern):
        out.append(re.escape(pattern[pos:m.start()]))
        pos = m.end()
        letter = m.group(2)
        if letter == "%":
            out.append("%")
        elif letter == "N" and "(?P<host>" in "".join(out):
            out.append(r"[A-Za-z0-9][A-Za-z0-9-]*")  # a second %N: the same node
        else:
            out.append(_SLURM_FIELD.get(letter, re.escape(m.group(0))))
    out.append(re.escape(pattern[pos:]))
    body = "".join(out)
    return re.compile(("^" if pattern.startswith("/") else "(?:^|/)") + body + "$")


def host_from_name(path: str, pattern: str | None = None) -> str | None:
    """The node a log's name gives without an inventory: the %N of Slurm's output *pattern*
    when one is given (None when it has no %N or does not match); else the host-shaped part
    of its name (see above), or else its directory's name ("/logs/gpu005/stderr.log")."""
    if pattern:  # the operator said how the files were named: no guessing
        regex = slurm_name_regex(pattern)
        m = regex.search(path) if regex else None
        return m.group("host") if m else None
    parts = path.rstrip("/").split("/")
    host = _host_in_stem(_stem(parts[-1]))
    if host:
        return host
    directory = parts[-2] if len(parts) > 1 else ""
    return directory if _is_host(directory) else None


def name_tokens(path: str) -> list[str]:
    """Every part of a log's path that could name its node, matched against an inventory:
    the part ``host_from_name`` picks, the stem, every run of its words between "-", "_" and
    "." ("gpu-c05" of train-48213-gpu-c05.out) and the directory it is in."""
    parts = path.rstrip("/").split("/")
    stem = _stem(parts[-1])
    pieces = _SEPARATORS.split(stem)
    words = len(pieces[0::2])
    runs = ["".join(pieces[2 * a: 2 * b - 1]) for size in range(words, 0, -1)
            for a in range(0, words - size + 1) for b in [a + size]]
    tokens = [host_from_name(path) or "", stem, *runs]
    if len(parts) > 1 and parts[-2]:
        tokens.append(parts[-2])
    return [t for t in dict.fromkeys(tokens) if t and not t.isdecimal()][:MAX_TOKENS]


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


def inventory_name(host: str | None, peers: Sequence[str]) -> str | None:
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


def _peer_of(token: str, peers: Sequence[str]) -> str | None:
    short = token.split(".")[0].lower()
    return next((p for p in peers if p.lower() == token.lower()
                 or p.split(".")[0].lower() == short), None)


class Locator:
    """Where each rank ran, with the source of the answer ("logs", "operator map", "node that
    read its log", "log file name") so findings can say how sure they are."""

    def __init__(self, merged: Mapping[str, Any], rank_hosts: Mapping[int, str],
                 peers: Sequence[str]) -> None:
        self.present: dict[int, str | None] = dict(merged.get("present") or {})
        self.read_on: dict[int, str] = dict(merged.get("read_on") or {})
        self.named: dict[int, tuple[str | None, tuple[str, ...]]] = dict(
            merged.get("named") or {})
        self.rank_hosts = dict(rank_hosts)
        self.peers = list(peers)

    def locate(self, rank: int | None, logged: str | None = None,
               node: str | None = None) -> tuple[str | None, str | None]:
        """(host, source) of a rank; (None, None) when nothing says."""
        if logged:
            return inventory_name(logged, self.peers), "logs"
        if rank is not None:
            if self.present.get(rank):
                return inventory_name(self.present[rank], self.peers), "logs"
            if rank in self.rank_hosts:
                return inventory_name(self.rank_hosts[rank], self.peers), "operator map"
            # a log named after a node (gpu005.log) is that node's, wherever it was read
            if rank in self.named and (host := self._from_name(*self.named[rank])):
                return host, "log file name"
            if rank in self.read_on:
                return inventory_name(self.read_on[rank], self.peers), "node that read its log"
        if node:
            return inventory_name(node, self.peers), "node that read its log"
        return None, None

    def between(self, below: int, above: int) -> tuple[str | None, str | None]:
        """The node of a silent rank whose nearest ranks below and above ran on the same node:
        launchers place consecutive ranks on one node (torchrun, srun's block distribution),
        so it ran there too. (None, None) when they differ or are unknown."""
        low, high = self.locate(below)[0], self.locate(above)[0]
        if low and low == high:
            return low, "node of the ranks around it"
        return None, None

    def _from_name(self, name_host: str | None, tokens: Sequence[str]) -> str | None:
        if self.peers:  # with an inventory, only a name it knows
            return next((p for t in tokens if (p := _peer_of(t, self.peers))), None)
        return name_host
