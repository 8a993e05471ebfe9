"""The verdict over every rank: stragglers, collective mismatches, stuck watchdogs.

``analyse`` compares the merged rows per process group (the majority's sequence number and
last completed work against each rank's) and says which rank the others wait for, with the
per-rank table and a one-line summary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from probes.rankprogress.blocking import blocking_text, group_gaps, order_by_blocking, rank_gaps
from probes.rankprogress.grammar import MAX_LISTED, MAX_WORLD, UNKNOWN_PG, find_lines
from probes.rankprogress.hosts import Locator
from probes.rankprogress.scan import Row, fold_unknown_pg, merge_sources, scan_file, split_files

TABLE_ROWS = 64  # per-rank table rows kept in facts (flagged ranks first)
NO_WORLD = ("NCCL_DEBUG is off, so no line states the world size: likely, not certain (its log "
            "may not have been collected; set NCCL_DEBUG=INFO or give world_size to be sure)")


def _mode(values: Iterable[int]) -> int | None:
    """The most common value; ties go to the largest (stragglers are behind, not ahead)."""
    counts = Counter(values)
    if not counts:
        return None
    top = max(counts.values())
    return max(v for v, n in counts.items() if n == top)


def ranks_text(ranks: Sequence[Any], total: int | None = None) -> str:
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
    rows = fold_unknown_pg(list(merged.get("rows") or []))
    present: dict[int, str | None] = dict(merged.get("present") or {})
    locator = Locator(merged, rank_hosts or {}, peers)
    world = world_size or merged.get("world")
    world = world if isinstance(world, int) and 0 < world <= MAX_WORLD else None
    host_from: dict[tuple[str, str], str | None] = {}

    def ghost(pg: str, rank: int | None, group_rank: int | None = None) -> Row:
        row = Row(pg, rank, group_rank=group_rank, pg_desc=descs.get(pg))
        row.host, host_from[row.key] = locator.locate(rank)
        return row

    for row in rows:
        row.host, host_from[row.key] = locator.locate(row.rank, row.host, row.read_on)
    seen = {r.rank for r in rows if r.rank is not None} | set(present)
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.pg, []).append(row)

    stragglers: list[dict[str, Any]] = []
    waiting: dict[str, set[int]] = {}
    descs: dict[str, str | None] = {}
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
        descs[pg] = desc
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
        behind: list[tuple[Row, str, str]] = []
        quiet: list[tuple[Row, str, str]] = []
        for row in members:
            if row.stuck and not row.timed_out:
                continue
            if row.timed_out and row.seq is not None and seq_major is not None \
                    and row.seq < seq_major:
                behind.append((row, f"timed out at work {row.seq}, the majority at {seq_major}",
                               "certain"))
            elif row.done is not None and done_major is not None and row.done < done_major:
                behind.append((row, f"last completed work {row.done}, the majority's "
                                    f"{done_major}", "certain"))
            elif not row.timed_out and seq_major is not None and (
                    row.enqueued is None or row.enqueued < seq_major):
                enq = ("" if row.enqueued is None else
                       f"; last enqueued work {row.enqueued}")
                quiet.append((row, f"never timed out while {len(timed)} rank(s) timed out at "
                                   f"work {seq_major}{enq}: it never issued that collective",
                              "high"))
        in_group = {r.rank for r in members if r.rank is not None}
        if world_like:
            for rank in sorted(set(present) - in_group):
                quiet.append((ghost(pg, rank), f"its log shows it alive but no timeout while "
                                               f"{len(timed)} rank(s) timed out at work "
                                               f"{seq_major}", "high"))
            if world:
                for rank in range(world):
                    if rank not in seen and rank not in in_group:
                        quiet.append((ghost(pg, rank), "no log line from this rank at all",
                                      "high"))
            elif len(timed) >= 2:
                for rank, below, above in rank_gaps(seen):
                    row = ghost(pg, rank)
                    if row.host is None and below >= 0:
                        row.host, host_from[row.key] = locator.between(below, above)
                    quiet.append((row, f"no line at all from this rank while "
                                  f"{len(timed)} rank(s) timed out at work {seq_major}; its "
                                  f"number is missing between "
                                  f"{below if below >= 0 else 'the start'} and {above}. "
                                  + NO_WORLD, "likely"))
        elif len(timed) >= 2:
            for group_rank, global_rank in group_gaps(members):
                if global_rank is not None and global_rank in in_group:
                    continue
                alive = global_rank is not None and global_rank in present
                where = ("; its global rank is not in the logs" if global_rank is None
                         else f"; by the group's layout it is rank {global_rank}")
                quiet.append((ghost(pg, global_rank, group_rank), f"group rank {group_rank} sent "
                              f"no line while {len(timed)} rank(s) of the group timed out at work "
                              f"{seq_major}{where}" + (", whose log shows it alive" if alive
                                                       else ""), "high" if alive else "likely"))
        if quiet and len(quiet) * 2 >= len(timed) + len(quiet):
            quiet = []  # most ranks silent: the logs are incomplete, not one rank behind
        for row, why, sure in behind + quiet:
            entry = _entry(row, why)
            entry.update(majority_seq=seq_major, majority_last_completed=done_major,
                         confidence=sure, host_from=host_from.get(row.key))
            stragglers.append(entry)
            flagged.setdefault(row.key, "behind")
        waiting[pg] = {r.rank for r in timed if r.rank is not None}

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
    # the furthest behind first, then by rank; then the stuck ranks before those they block
    stragglers.sort(key=lambda s: (s["last_completed"] if s["last_completed"] is not None
                                   else 1 << 62, s["rank"] if s["rank"] is not None else 1 << 62))
    stragglers = order_by_blocking(stragglers, waiting, descs)
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
    return {"rank": row.rank, "group_rank": row.group_rank, "pg": row.pg,
            "pg_desc": row.pg_desc, "host": row.host,
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
        stuck_ranks = [s for s in stragglers if s.get("role", "stuck") == "stuck"]
        names = ranks_text(list(dict.fromkeys(
            f"{s['rank']}" + (f" ({s['host']})" if s["host"] else "") for s in stuck_ranks)))
        return (f"rank(s) {names} behind the majority: {stuck_ranks[0]['reason']}"
                + blocking_text(stuck_ranks[0]))
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
