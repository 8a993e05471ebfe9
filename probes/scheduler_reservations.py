"""Slurm reservations, as the scheduler probe reads them: their records, the nodes planned
maintenance holds, and a reservation that holds idle GPUs while jobs wait (probes/scheduler.py
reads the queue; this module, what reservations do to it)."""

from __future__ import annotations

from typing import Any

import hostlist

from probes.base import finding
from probes.hostfold import fold_hosts
from probes.model import Finding
from probes.parsers.scontrol_job import records, value

NAME = "scheduler"  # the probe these findings belong to


def reservations(text: str) -> list[dict[str, Any]]:
    out = []
    for record in records(text, "ReservationName"):
        nodelist = value(record, "Nodes")
        try:
            nodes = list(hostlist.expand_hostlist(nodelist)) if nodelist else []
        except Exception:  # a garbled node list: keep the reservation, name no node
            nodes = []
        out.append({"name": record.get("ReservationName", ""), "state": value(record, "State"),
                    "nodelist": nodelist, "nodes": nodes,
                    "start": value(record, "StartTime"), "end": value(record, "EndTime"),
                    "flags": (value(record, "Flags") or "").split(",") if value(record, "Flags")
                    else [],
                    "users": value(record, "Users"), "accounts": value(record, "Accounts"),
                    "partition": value(record, "PartitionName")})
    return out


def mark_maintenance(facts: dict[str, Any]) -> None:
    """Nodes of an ACTIVE reservation with Flags=MAINT are in planned maintenance, whether or
    not sinfo shows them the MAINT flag (Slurm 22.05 shows a reserved node's base state only)."""
    planned = {n for r in facts["reservations"]
               if (r.get("state") or "").upper() == "ACTIVE"
               and "MAINT" in {f.strip().upper() for f in r.get("flags") or []}
               for n in r["nodes"]}
    for entry in facts["nodes"] + facts["down"] + facts["drained"]:
        if entry["node"] in planned:
            entry["maintenance"] = True


def jobs_text(jobs: list[dict[str, Any]], limit: int = 3) -> str:
    shown = ", ".join(f"{j['job_id']} ({j['reason']})" for j in jobs[:limit])
    return shown + (f" and {len(jobs) - limit} more" if len(jobs) > limit else "")


def reservation_findings(facts: dict[str, Any],
                          held: list[dict[str, Any]]) -> list[Finding]:
    """A reservation holding GPUs nobody uses while jobs pend, or jobs held by one."""
    nodes = {n["node"]: n for n in facts.get("nodes") or []}
    outside = [j for j in facts.get("pending") or [] if not j.get("reservation")]
    idle: dict[str, list[str]] = {}
    for resv in facts.get("reservations") or []:
        if (resv.get("state") or "").upper() != "ACTIVE":
            continue
        free = [n for n in resv["nodes"] if nodes.get(n, {}).get("gpus_free")
                and not nodes[n]["drain"] and not nodes[n]["down"]]
        if free and outside:
            idle[resv["name"]] = free
    if not idle and not held:
        return []
    upcoming = [r for r in facts.get("reservations") or []
                if (r.get("state") or "").upper() != "ACTIVE"]
    parts = [f"reservation {name} holds {sum(nodes[n]['gpus_free'] or 0 for n in free)} idle "
             f"GPU(s) on {fold_hosts(free, empty='-')}" for name, free in idle.items()]
    hosts = {n for free in idle.values() for n in free}
    if held:
        soon = ", ".join(f"{r['name']} on {r['nodelist']} from {r['start']}"
                         for r in upcoming[:3])
        parts.append(f"{len(held)} pending job(s) wait on a reservation: {jobs_text(held)}"
                     + (f" (upcoming: {soon})" if soon else ""))
        hosts |= {n for r in upcoming for n in r["nodes"]}
    return [finding("reservation-holds-nodes", sorted(hosts), "; ".join(parts), NAME,
                    reservations={name: free for name, free in idle.items()},
                    upcoming=[r["name"] for r in upcoming],
                    jobs=[j["job_id"] for j in held])]
