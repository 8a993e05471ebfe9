"""Who blocks whom: ranks that sent nothing at all, and the groups a stuck rank holds up.

Two things the per-group comparison in ``verdict`` cannot see by itself:

- **A silent rank.** PyTorch prints nothing about a rank that never issued the collective, and
  without ``NCCL_DEBUG=INFO`` no line states the world size. When every other rank timed out
  and one rank number is missing from the middle of the sequence (0-36, 38-511 seen), that
  number is the straggler candidate: likely, not certain (its log may not have been collected,
  and a rank above the highest seen could be silent too). The same holds inside a process
  group, by group rank; Megatron lays its groups out regularly (tensor-parallel ranks 8-15,
  data-parallel ranks 5, 13, 21, ...), so the other members' global ranks give the missing
  one's (global = first + stride x group rank).
- **A rank that blocks groups it is not in.** With tensor- and data-parallel groups, the rank
  stuck in its tensor-parallel group keeps its seven peers waiting there; those peers then never
  reach the data-parallel all-reduce, so every data-parallel group holding one of them waits
  too and names *them* as behind. The stuck rank is the one behind in some group that is not
  itself waiting for anyone else; the others are blocked through it. ``order_by_blocking``
  names it first, then the groups it blocks directly and through its blocked peers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from probes.rankprogress.scan import Row

# At most one rank in this many missing from the sequence is read as stragglers: more gaps
# mean logs that were not collected, and accusing a swath of ranks would be a guess.
GAP_FRACTION = 32


def rank_gaps(seen: Iterable[int]) -> list[tuple[int, int, int]]:
    """(missing rank, nearest seen below, nearest seen above) for the numbers missing from
    0..max(seen); [] when more are missing than GAP_FRACTION allows."""
    ranks = sorted(set(seen))
    if len(ranks) < 2:
        return []
    limit = max(1, len(ranks) // GAP_FRACTION)
    gaps: list[tuple[int, int, int]] = []
    below = -1
    for rank in ranks:
        if len(gaps) + rank - below - 1 > limit:
            return []
        gaps.extend((r, below, rank) for r in range(below + 1, rank))
        below = rank
    return gaps


def progression(members: Iterable[Row]) -> tuple[int, int] | None:
    """(first, stride) with global rank = first + stride x group rank for every member whose
    both ranks are known; None when the group is not laid out regularly (or too few known)."""
    pairs = sorted({(r.group_rank, r.rank) for r in members
                    if r.group_rank is not None and r.rank is not None})
    if len(pairs) < 2 or len({g for g, _ in pairs}) != len(pairs):
        return None
    (g1, r1), (g2, r2) = pairs[0], pairs[1]
    stride, rest = divmod(r2 - r1, g2 - g1)
    if rest or stride == 0:
        return None
    first = r1 - stride * g1
    if any(first + stride * g != r for g, r in pairs) or first < 0:
        return None
    return first, stride


def group_gaps(members: list[Row]) -> list[tuple[int, int | None]]:
    """(missing group rank, its global rank when the layout gives it) for a process group whose
    members' group ranks have a hole below the highest one seen."""
    present = {r.group_rank for r in members if r.group_rank is not None}
    layout = progression(members)
    return [(g, layout[0] + layout[1] * g if layout else None)
            for g, _, _ in rank_gaps(present)]


def order_by_blocking(entries: list[dict[str, Any]], waiting: Mapping[str, set[int]],
                      descs: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """The straggler entries with the stuck ranks first, each annotated with the groups it
    blocks (``blocks``) and those it blocks through peers stuck waiting for it
    (``blocks_through``); a rank blocked that way is marked ``blocked_by`` and listed after.

    *waiting*: per process group, the global ranks that timed out in it.
    """
    behind_in: dict[int, list[str]] = {}
    for e in entries:
        if e["rank"] is not None:
            behind_in.setdefault(e["rank"], [])
            if e["pg"] not in behind_in[e["rank"]]:
                behind_in[e["rank"]].append(e["pg"])
    blockers: dict[str, set[int]] = {}
    for rank, pgs in behind_in.items():
        for pg in pgs:
            blockers.setdefault(pg, set()).add(rank)
    victims = {rank for rank in behind_in for pg, ranks in waiting.items()
               if rank in ranks and blockers.get(pg, set()) - {rank}}
    roots = [rank for rank in behind_in if rank not in victims] or list(behind_in)
    blocked_by: dict[int, int] = {}
    notes: dict[int, dict[str, Any]] = {}
    for root in roots:
        direct = list(behind_in[root])
        through: dict[str, set[int]] = {}
        seen, frontier = {root}, {root}
        while frontier:
            nxt: set[int] = set()
            for blocker in frontier:
                for pg in behind_in.get(blocker, []):
                    for waiter in waiting.get(pg, set()):
                        if waiter in behind_in and waiter not in seen:
                            seen.add(waiter)
                            nxt.add(waiter)
                            blocked_by.setdefault(waiter, root)
                            for group in behind_in[waiter]:
                                if group not in direct:
                                    through.setdefault(group, set()).add(waiter)
            frontier = nxt
        notes[root] = {
            "blocks": [_group(pg, waiting, descs) for pg in direct],
            "blocks_through": [{**_group(pg, waiting, descs), "via": sorted(via)}
                               for pg, via in sorted(through.items())],
        }
    for e in entries:
        if e["rank"] in notes:
            e.update(role="stuck", **notes[e["rank"]])
        elif e["rank"] in blocked_by:
            e.update(role="blocked", blocked_by=blocked_by[e["rank"]])
        else:
            e["role"] = "stuck"
    return ([e for e in entries if e["role"] == "stuck"]
            + [e for e in entries if e["role"] == "blocked"])


def _group(pg: str, waiting: Mapping[str, set[int]], descs: Mapping[str, str | None]
           ) -> dict[str, Any]:
    return {"pg": pg, "desc": descs.get(pg), "waiting": len(waiting.get(pg, set()))}


def blocking_text(entry: Mapping[str, Any]) -> str:
    """", blocking TENSOR_MODEL_PARALLEL_GROUP (pg 104, 7 rank(s) waiting) and, through
    rank(s) 32-36, 38-39 waiting for it, 7 DATA_PARALLEL_GROUP groups (49 rank(s) waiting)";
    "" for a rank that blocks one group and nothing through it."""
    direct = entry.get("blocks") or []
    through = entry.get("blocks_through") or []
    if len(direct) <= 1 and not through:
        return ""
    text = ", blocking " + " and ".join(_describe([g]) for g in direct)
    if through:
        via = sorted({r for g in through for r in g["via"]})
        text += (f" and, through rank(s) {_ranks(via)} waiting for it, "
                 + " and ".join(_describe([g for g in through if g["desc"] == desc])
                                for desc in dict.fromkeys(g["desc"] for g in through)))
    return text


def _describe(groups: list[Mapping[str, Any]]) -> str:
    desc = groups[0]["desc"]
    waiting = sum(g["waiting"] for g in groups)
    if len(groups) == 1:
        return f"{desc or 'process group'} (pg {groups[0]['pg']}, {waiting} rank(s) waiting)"
    return f"{len(groups)} {desc or 'process'} groups ({waiting} rank(s) waiting)"


def _ranks(ranks: list[int]) -> str:
    """0, 1, 2, 5 -> "0-2, 5" (at most 12 runs shown)."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    parts = [f"{a}-{b}" if b > a else str(a) for a, b in runs]
    return ", ".join(parts[:12]) + (f" and {len(parts) - 12} more runs" if len(parts) > 12 else "")
