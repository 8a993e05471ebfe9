"""scheduler: Slurm's own view of why jobs pend while GPUs look idle.

Unlike every other probe this one reads the *scheduler*, not a node: ``sinfo``, ``squeue`` and
``scontrol`` answer the same cluster-wide question wherever they run. So its ``PROBE`` says
``runs_on="client"``: the fleet runs its script once, on the machine diag runs on (where the
Slurm client and ``SLURM_CONF`` are), whatever the walk's hosts and transport. The reading is
credited to one host of the walk; the others get a short ``shared`` marker
(:func:`shared_output`) so a 512-node walk neither asks slurmctld 512 times nor stores its
answer 512 times. A transport that does not know about client-side probes (the replay of a
scenario) simply gives every host the full output; the checks read the first full one.

What it reads, each call bounded by ``timeout`` (a hung slurmctld makes ``scontrol`` retry for
a minute; after the first call times out the rest are skipped):

- node states, drain/down reasons (who, when), GPUs total and in use per node (``sinfo -N -O``);
- pending jobs with their GPU request and reason (``squeue -t PD -O``);
- reservations (``scontrol show reservation -o``);
- with ``--job ID``, that job (``scontrol show job -o ID``).

The checks name what holds jobs back: drained nodes (and whether a health check drained
them), down nodes, a reservation holding idle GPUs or a maintenance window, QOS/association
and partition limits, GPUs free in total but scattered so no pending job fits (fragmentation),
and plain priority/resources waits.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    failure_text,
    finding,
    not_measured,
    script,
    section_reader,
    split_sections,
)
from probes.drain_reasons import hardware_fault
from probes.hostfold import fold_hosts
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind
from probes.parsers.scontrol_job import job_facts, records
from probes.scheduler_reservations import (
    jobs_text,
    mark_maintenance,
    reservation_findings,
    reservations,
)

# The reason Slurm gives a node that rebooted without being asked to (Slurm FAQ, "Node
# unexpectedly rebooted"): the catalogue's slurm-node-unexpected-reboot names such a node.
_UNEXPECTED_REBOOT = re.compile(r"^Node unexpectedly rebooted")
# The reasons slurmctld writes for a reboot an admin asked for (proc_req.c: "Reboot ASAP" with
# the DRAIN flag and next state RESUME+UNDRAIN, or "reboot requested"; controller.c appends
# "reboot issued" when it sends it): such a drained node returns to service by itself after
# the reboot. Any other reason was there before the reboot and stays (the drain is kept).
_REQUESTED_REBOOT = re.compile(
    r"^(?:Reboot ASAP|reboot requested|reboot issued)(?: : reboot issued)?$", re.IGNORECASE)
# `scontrol reboot nextstate=DOWN` (node_mgr.c): back from the reboot, the node is left DOWN on
# purpose with "... : reboot complete" for an admin or NHC to resume - planned, not broken.
_REBOOTED_TO_DOWN = re.compile(r"(?:^|: )reboot complete$", re.IGNORECASE)

NAME = "scheduler"

# StateLong before StateComplete: Slurm 20.11's sinfo has no StateComplete (added in 21.08,
# src/sinfo/opts.c) - it prints "Invalid job format specification", an empty column, and goes
# on - so the node's state comes from StateLong there; where both exist the later column,
# StateComplete (every flag spelled out), is the one read (probes/parsers/sinfo.py).
SINFO_FORMAT = ("NodeList:|,Partition:|,StateLong:|,StateComplete:|,Gres:|,GresUsed:|,"
                "CPUsState:|,Timestamp:|,UserLong:|,Reason:|")
SQUEUE_FORMAT = ("JobID:|,Partition:|,UserName:|,State:|,NumNodes:|,QOS:|,Reservation:|,"
                 "tres-per-node:|,tres-per-job:|,Reason:|")
DEFAULT_SLURM_TIMEOUT = 10
PENDING_KEPT = 50  # pending jobs listed in the facts; counts cover all of them
_JOB_ID = re.compile(r"^\d+(?:_\d+)?$")

# Drain reasons written by health checks or by Slurm itself, as opposed to an admin's note.
HEALTH_CHECK = re.compile(
    r"health|\bnhc\b|dcgm|\bxid\b|\becc\b|kill task failed|not responding|prolog|epilog|"
    r"nvidia|gres/gpu count|unexpectedly rebooted|low realmemory|low tmpdisk|"
    r"batch job complete failure|node_fail", re.IGNORECASE)


# --- the script ----------------------------------------------------------------------------------

# What a Slurm client prints when slurmctld does not answer (src/common/slurm_errno.c
# SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT, SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR): it fails
# after MessageTimeout, often just inside diag's own limit, and every later call would too.
_CONTROLLER_SILENT = ('*"Socket timed out on send/recv operation"*|'
                      '*"Unable to contact slurm controller"*')


def _guarded(command: str, first: bool = False) -> str:
    """*command* bounded in time; the first call records a timeout, or Slurm's own word that
    slurmctld did not answer, so later ones are skipped (a dead controller should cost one
    timeout, not four, and never the probe's whole time limit)."""
    if first:
        return (f"diag_out=$({command} 2>&1); rc=$?; printf '%s\\n' \"$diag_out\"; "
                f"[ $rc -eq 124 ] && diag_slurm_hung=1; "
                f'if [ $rc -ne 0 ]; then case "$diag_out" in {_CONTROLLER_SILENT}) '
                f"diag_slurm_hung=1;; esac; fi; (exit $rc)")
    return (f'if [ -n "$diag_slurm_hung" ]; then echo "diag: skipped: Slurm did not answer '
            f'the first call"; (exit 124); else {command}; fi')


def command(params: Mapping[str, Any]) -> str:
    limit = int(params.get("slurm_timeout", DEFAULT_SLURM_TIMEOUT))
    bound = f"timeout -k 2 {limit}"
    sections = [
        ("version", "sinfo --version"),
        ("nodes", _guarded(f"{bound} sinfo -N -O {shlex.quote(SINFO_FORMAT)}", first=True)),
        ("pending", _guarded(f"{bound} squeue -t PD -O {shlex.quote(SQUEUE_FORMAT)}")),
        ("reservations", _guarded(f"{bound} scontrol show reservation -o")),
    ]
    requires = {"version": "sinfo", "nodes": "sinfo", "pending": "squeue",
                "reservations": "scontrol"}
    job = str(params.get("job") or "")
    if _JOB_ID.match(job):
        sections.append(("job", _guarded(f"{bound} scontrol show job -o {job}")))
        requires["job"] = "scontrol"
    return script(sections, requires)


def shared_output(reader: str) -> str:
    """What hosts other than the reader get: the script's shape, naming who holds the facts."""
    return f"=== diag:section shared\n{reader}\n=== diag:rc shared 0\n"


# --- parse ---------------------------------------------------------------------------------------

def _error(text: str, rc: int | None) -> str:
    if rc == 124:
        return "Slurm did not answer in time (is slurmctld up? is SLURM_CONF right?)"
    return failure_text(text, rc)


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "shared" in sections and "nodes" not in sections:
        return {"shared": True, "read_on": sections["shared"].text.strip() or None}
    if "nodes" not in sections:
        raise ParseError("scheduler: no nodes section (not the scheduler probe's output)")
    facts: dict[str, Any] = {
        "slurm_version": None, "nodes_total": None, "nodes_idle": None, "nodes_mixed": None,
        "nodes_allocated": None, "nodes_drained": None, "nodes_down": None,
        "nodes_usable": None, "gpus_total": None, "gpus_used": None, "gpus_free": None,
        "gpus_idle_unusable": None, "largest_free_block": None, "pending_jobs": None,
        "pending_gpus": None, "pending_reasons": {}, "drained": [], "down": [], "nodes": [],
        "pending": [], "reservations": [], "job": None, "missing": [], "errors": {}}

    section = section_reader(sections, facts["missing"], errors=facts["errors"], describe=_error)

    if (text_ := section("version")) is not None:
        version = re.search(r"(\d+\.\d+\.\d+)", text_)
        facts["slurm_version"] = version.group(1) if version else None
    if (text_ := section("nodes")) is not None:
        nodes = parse_kind("sinfo", text_)["nodes"]
        _node_facts(facts, nodes)
    if (text_ := section("pending")) is not None:
        jobs = [j for j in parse_kind("squeue", text_)["jobs"] if j["state"] == "PENDING"]
        facts["pending_jobs"] = len(jobs)
        facts["pending_gpus"] = sum(j["gpus"] for j in jobs)
        for job in jobs:
            word = (job["reason"] or "None").split(",")[0].strip()
            facts["pending_reasons"][word] = facts["pending_reasons"].get(word, 0) + 1
        facts["pending"] = [{k: job.get(k) for k in (
            "job_id", "partition", "user", "nodes", "qos", "gpus_per_node", "gpus_per_job",
            "gpus", "reason", "reason_kind", "reservation")} for job in jobs[:PENDING_KEPT]]
        facts["pending_truncated"] = len(jobs) > PENDING_KEPT
        if facts["pending_truncated"]:
            # the fragmentation check needs every Resources/Priority job, not just the first 50
            facts["pending"] += [{k: job.get(k) for k in (
                "job_id", "partition", "nodes", "gpus_per_node", "gpus_per_job", "gpus",
                "reason", "reason_kind")} for job in jobs[PENDING_KEPT:]
                if job["reason_kind"] in ("resources", "priority") and job["gpus"]][:500]
    if (text_ := section("reservations")) is not None:
        facts["reservations"] = reservations(text_)
        mark_maintenance(facts)
    if (text_ := section("job")) is not None:
        found = records(text_, "JobId")
        if found:
            job = job_facts(found[0])
            job.pop("fields", None)
            facts["job"] = job
    return facts


def _node_facts(facts: dict[str, Any], nodes: list[dict[str, Any]]) -> None:
    base = [n["base_state"] for n in nodes]
    usable = [n for n in nodes if n["usable"]]
    facts.update({
        "nodes_total": len(nodes),
        "nodes_idle": sum(1 for n, b in zip(nodes, base, strict=True)
                          if b == "idle" and n["usable"]),
        "nodes_mixed": base.count("mixed"),
        "nodes_allocated": base.count("allocated"),
        "nodes_drained": sum(1 for n in nodes if n["drain"]),
        "nodes_down": sum(1 for n in nodes if n["down"]),
        "nodes_usable": len(usable),
        "gpus_total": sum(n["gpus_total"] or 0 for n in nodes),
        "gpus_used": sum(n["gpus_used"] or 0 for n in nodes),
        "gpus_free": sum(n["gpus_free"] or 0 for n in usable),
        "gpus_idle_unusable": sum(n["gpus_free"] or 0 for n in nodes if not n["usable"]),
        "largest_free_block": max((n["gpus_free"] or 0 for n in usable), default=0),
    })
    for key, flag in (("drained", "drain"), ("down", "down")):
        facts[key] = [{"node": n["node"], "state": n["state"], "reason": n["reason"],
                       "planned_reboot": _planned_reboot(n),
                       "since": n["reason_time"], "by": n["reason_user"],
                       "gpus_idle": n["gpus_free"],
                       "health_check": bool(n["reason"] and HEALTH_CHECK.search(n["reason"])),
                       "hardware_fault": hardware_fault(n["reason"]),
                       "maintenance": n["maintenance"]}
                      for n in nodes if n[flag]]
    # every node once, with its state and reason: what the fault catalogue's scheduler
    # signatures read per node (probes/faults/scheduler.yaml)
    facts["nodes"] = [{"node": n["node"], "state": n["state"], "base_state": n["base_state"],
                       "usable": n["usable"], "drain": n["drain"], "down": n["down"],
                       "not_responding": n["not_responding"], "maintenance": n["maintenance"],
                       "rebooting": n.get("rebooting", False), "partitions": n["partitions"],
                       "gpus_total": n["gpus_total"], "gpus_free": n["gpus_free"],
                       "reason": n["reason"], "since": n["reason_time"], "by": n["reason_user"],
                       "hardware_fault": hardware_fault(n["reason"])}
                      for n in nodes]


def _planned_reboot(node: Mapping[str, Any]) -> bool:
    """Drained only for a reboot an admin asked for (`scontrol reboot ASAP`: back by itself),
    or left DOWN after one on purpose (`nextstate=DOWN`) and answering."""
    reason = node.get("reason") or ""
    if node.get("down") and not node.get("not_responding"):
        return bool(_REBOOTED_TO_DOWN.search(reason))
    return bool((node.get("rebooting") or node.get("reboot_pending"))
                and _REQUESTED_REBOOT.match(reason))


# --- checks --------------------------------------------------------------------------------------

def _reader(facts_by_host: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """The host whose facts hold the reading (the others share it)."""
    for host, facts in facts_by_host.items():
        if "nodes_total" in facts:
            return host, facts
    return None


def _by_reason(entries: list[dict[str, Any]]) -> str:
    groups: dict[str, list[str]] = {}
    for e in entries:
        groups.setdefault(e["reason"] or "no reason given", []).append(e["node"])
    return "; ".join(f"{fold_hosts(nodes, empty='-')}: '{reason}'"
                     for reason, nodes in groups.items())


def fragmented_jobs(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """Pending jobs (Resources/Priority) whose GPUs are free in total but not where they fit.

    A job asking G GPUs on each of N nodes fits when N usable nodes of its partition each have
    G free; a job asking G GPUs in all (``--gpus``) over N nodes fits when the N emptiest nodes
    together have G free. Fragmented: it does not fit, yet the partition's free GPUs cover it.
    """
    out = []
    for job in facts.get("pending") or []:
        if job.get("reason_kind") not in ("resources", "priority") or not job.get("gpus"):
            continue
        candidates = [n for n in facts.get("nodes") or [] if n["usable"] and (
            not job.get("partition") or job["partition"] in n["partitions"])]
        free = sorted((n["gpus_free"] or 0 for n in candidates), reverse=True)
        count = job.get("nodes") or 1
        per_node = job.get("gpus_per_node")
        need = job["gpus"]
        if per_node:
            fits = sum(1 for f in free if f >= per_node) >= count
            scattered = [n["node"] for n in candidates if 0 < (n["gpus_free"] or 0) < per_node]
        else:
            fits = sum(free[:count]) >= need
            scattered = [n["node"] for n in candidates if (n["gpus_free"] or 0) > 0]
        if not fits and sum(free) >= need:
            out.append({**job, "free_in_partition": sum(free),
                        "largest_free_block": free[0] if free else 0, "scattered": scattered})
    return out


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    found = _reader(facts_by_host)
    if found is None:
        return []
    reader, facts = found
    findings: list[Finding] = []
    for section in facts.get("missing") or []:
        if section == "nodes":
            findings.append(not_measured(NAME, reader, "Slurm's node states",
                                         "sinfo not found where diag runs (the scheduler probe "
                                         "reads Slurm from this machine)"))
    for section, why in (facts.get("errors") or {}).items():
        what = {"nodes": "Slurm's node states", "pending": "pending jobs",
                "reservations": "reservations", "job": "the job"}.get(section, section)
        findings.append(not_measured(NAME, reader, what, why))
    if facts.get("nodes_total") is None:
        return findings
    pending = facts.get("pending") or []
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for job in pending:
        by_kind.setdefault(job.get("reason_kind") or "none", []).append(job)

    drained = [d for d in facts.get("drained") or [] if not d.get("planned_reboot")]
    if drained:
        names = [d["node"] for d in drained]
        health = [d["node"] for d in drained if d["health_check"]]
        waiting = by_kind.get("nodes", [])
        message = (f"{len(names)} node(s) drained, taking no new jobs: {_by_reason(drained)}"
                   + (f"; {len(health)} drained by a health check or Slurm itself"
                      if health else "")
                   + (f"; {len(waiting)} pending job(s) ask for unavailable nodes"
                      if waiting else ""))
        findings.append(finding(
            "nodes-drained", names, message, NAME,
            nodes={d["node"]: {k: d[k] for k in ("state", "reason", "since", "by")}
                   for d in drained},
            health_check=health, gpus_idle=sum(d["gpus_idle"] or 0 for d in drained),
            jobs_waiting=[j["job_id"] for j in waiting]))
        hardware = {d["node"]: d["hardware_fault"] for d in drained if d.get("hardware_fault")}
        if hardware:  # passive checks cannot clear these: acceptance validation first
            findings.append(finding(
                "drained-for-hardware", hardware,
                f"{len(hardware)} node(s) drained for a hardware fault: "
                + "; ".join(f"{n} ({k})" for n, k in sorted(hardware.items())[:12])
                + " - resume only after acceptance validation, not on passive checks",
                NAME, faults=dict(sorted(hardware.items())),
                reasons={d["node"]: d["reason"] for d in drained if d["node"] in hardware}))
    # a node DOWN inside an active maintenance reservation, or left DOWN by `scontrol reboot
    # nextstate=DOWN`, is planned work, not a fault; one
    # DOWN because it rebooted unasked is slurm-node-unexpected-reboot's (its action is to
    # find why, not to reboot it again)
    down = [d for d in facts.get("down") or [] if not d.get("maintenance")
            and not d.get("planned_reboot")
            and not _UNEXPECTED_REBOOT.match(d.get("reason") or "")]
    if down:
        findings.append(finding(
            "nodes-down", [d["node"] for d in down],
            f"{len(down)} node(s) down or not responding: {_by_reason(down)}", NAME,
            nodes={d["node"]: {k: d[k] for k in ("state", "reason", "since", "by")}
                   for d in down}))
    findings.extend(reservation_findings(facts, by_kind.get("reservation", [])))
    for kind, code, what in (("qos", "qos-limit", "a QOS or association limit"),
                             ("partition", "partition-limit", "a partition limit")):
        jobs = by_kind.get(kind, [])
        if jobs:
            reasons = sorted({j["reason"] for j in jobs if j["reason"]})
            users = sorted({j["user"] for j in jobs if j.get("user")})
            findings.append(finding(
                code, [], f"{len(jobs)} pending job(s) held by {what}: {jobs_text(jobs)}"
                + (f" (users: {', '.join(users[:5])})" if users else ""), NAME,
                reasons=reasons, jobs=[j["job_id"] for j in jobs], users=users))
    fragmented = fragmented_jobs(facts)
    if fragmented:
        scattered = sorted({n for j in fragmented for n in j["scattered"]})
        first = fragmented[0]
        ask = (f"{first['gpus_per_node']} GPUs on each of {first['nodes']} node(s)"
               if first.get("gpus_per_node") else f"{first['gpus']} GPUs")
        findings.append(finding(
            "gpus-fragmented", scattered,
            f"{len(fragmented)} pending job(s) do not fit although enough GPUs are free: job "
            f"{first['job_id']} asks {ask}, {first['free_in_partition']} GPUs are free in its "
            f"partition but at most {first['largest_free_block']} on any one node "
            f"(scattered over {fold_hosts(first['scattered'], empty='-')})", NAME,
            jobs=[{k: j.get(k) for k in ("job_id", "partition", "nodes", "gpus_per_node",
                                         "gpus", "free_in_partition", "largest_free_block")}
                  for j in fragmented],
            free_gpus={n["node"]: n["gpus_free"] for n in facts.get("nodes") or []
                       if n["node"] in scattered}))
    # Jobs that gpus-fragmented explains are not "the queue is simply full".
    explained = {j["job_id"] for j in fragmented}
    waiting = [j for j in by_kind.get("resources", []) + by_kind.get("priority", [])
               if j["job_id"] not in explained]
    if waiting:
        findings.append(finding(
            "priority-wait", [],
            f"{len(waiting)} job(s) pend on Resources or Priority ({facts.get('gpus_free')} "
            f"GPUs free on {facts.get('nodes_usable')} usable node(s), largest free block "
            f"{facts.get('largest_free_block')})", NAME,
            jobs=[j["job_id"] for j in waiting][:20]))
    return findings


# runs_on="client": read once where diag runs (see the module doc), not on each node
PROBE = Probe(NAME, command, parse, check_fleet=check_fleet, timeout_s=45.0, runs_on="client",
              shared_output=shared_output)
