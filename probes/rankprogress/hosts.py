"""Which node a rank ran on, from everything but the NCCL lines themselves.

The logs name a rank's node in NCCL's ``host:pid:tid`` prefix and in a journald / syslog
line's host field (``scan`` reads those). When they do not, the node comes from, in order of
trust: the operator's rank -> host map, the log's own name (``gpu005.log``,
``/logs/gpu005/stderr.log``; matched against the inventory when there is one), and the node a
node-local log was read on. Each answer says where it came from, so a verdict can say how
sure it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from probes.rankprogress.grammar import MAX_WORLD

# A per-node log names its node: gpu005.log, /logs/gpu005/stderr.log, slurm-%N.out as
# train-gpu005.out. Without an inventory only a whole name shaped like a host counts (letters,
# then digits at the end: "gpu005", "node-12.cluster"), never a generic word or a job id.
_LOG_SUFFIXES = (".log", ".out", ".err", ".txt", ".gz", ".stdout", ".stderr", ".json")
_HOSTLIKE = re.compile(r"[A-Za-z][A-Za-z0-9\-]*[0-9](?:\.[A-Za-z][A-Za-z0-9\-]*)*")
_GENERIC = re.compile(r"^(?:slurm|job|log|logs|train|run|out|output|std|stdout|stderr|attempt"
                      r"|rank|task|node_?rank|local_?rank|worker_?rank|messages|syslog|journal)"
                      r"(?:[-_.]?\d+)?$", re.I)
MAX_RANKS_PER_NODE = 16  # a file with more ranks than one node runs is not one node's log


def _stem(name: str) -> str:
    while True:
        lower = name.lower()
        cut = next((sfx for sfx in _LOG_SUFFIXES if lower.endswith(sfx) and len(name) > len(sfx)),
                   None)
        if cut is None:
            return name
        name = name[: -len(cut)]


def name_tokens(path: str) -> list[str]:
    """Every part of a log's path that could name its node: the file's stem, the pieces of
    it between "-", "_" and "." and the directory it is in (matched against an inventory)."""
    parts = path.rstrip("/").split("/")
    stem = _stem(parts[-1])
    tokens = [stem, *re.split(r"[-_.]", stem)]
    if len(parts) > 1 and parts[-2]:
        tokens.append(parts[-2])
    return [t for t in dict.fromkeys(tokens) if t and not t.isdecimal()][:16]


def host_from_name(path: str) -> str | None:
    """The node a log's name gives without an inventory: its stem, or else its directory,
    when that is shaped like a host name and is no generic word ("slurm-1234", "rank3")."""
    parts = path.rstrip("/").split("/")
    for candidate in (_stem(parts[-1]), parts[-2] if len(parts) > 1 else ""):
        if (candidate and _HOSTLIKE.fullmatch(candidate) and not _GENERIC.match(candidate)
                and "rank" not in candidate.lower()):
            return candidate
    return None


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
