"""``squeue``: jobs, their GPU requests and the reason the pending ones wait.

The scheduler probe runs ``squeue -t PD -O FIELDS`` with FIELDS (one argument, split here)::

    JobID:|,Partition:|,UserName:|,State:|,NumNodes:|,QOS:|,Reservation:|,
    tres-per-node:|,tres-per-job:|,Reason:|

The header names the columns, so ``squeue -o '%i|%P|%u|%D|%b|%r'`` and the default table
(``NODELIST(REASON)``, a pending job's reason in parentheses) parse too.

The pending reason is what queue-idle turns on, so it is also sorted into a ``reason_kind``:
``resources``/``priority`` (the queue is full, or GPUs are scattered), ``qos`` (QOS or
association limits: QOSMaxGRESPerUser, AssocGrpGRES...), ``partition`` (PartitionNodeLimit,
PartitionTimeLimit...), ``reservation`` (a reservation or maintenance window holds the nodes),
``nodes`` (the requested nodes are down or drained), ``dependency``, ``held``, ``other``.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, to_int
from .sinfo import gres_gpus, read_table

WHAT = "squeue"

COLUMNS: dict[str, str] = {
    "JOBID": "job_id", "JOB_ID": "job_id", "ARRAY_JOB_ID": "array_job_id",
    "PARTITION": "partition", "USER": "user", "NAME": "name", "STATE": "state", "ST": "state",
    "NODES": "nodes", "CPUS": "cpus", "QOS": "qos", "ACCOUNT": "account",
    "TRES_PER_NODE": "tres_per_node", "TRES_PER_JOB": "tres_per_job",
    "TRES_PER_TASK": "tres_per_task", "REASON": "reason", "NODELIST(REASON)": "nodelist_reason",
    "NODELIST": "nodelist", "PRIORITY": "priority", "START_TIME": "start_time",
    "SUBMIT_TIME": "submit_time", "TIME_LIMIT": "time_limit", "TIME": "time",
    "MIN_MEMORY": "min_memory", "RESERVATION": "reservation",
}

_STATE_CODES = {"PD": "PENDING", "R": "RUNNING", "CG": "COMPLETING", "CF": "CONFIGURING",
                "S": "SUSPENDED", "ST": "STOPPED", "RQ": "REQUEUED", "RH": "REQUEUE_HOLD",
                "RS": "RESIZING", "RD": "RESV_DEL_HOLD", "SE": "SPECIAL_EXIT", "SI": "SIGNALING",
                "SO": "STAGE_OUT", "RF": "REQUEUE_FED", "CD": "COMPLETED", "CA": "CANCELLED",
                "F": "FAILED", "TO": "TIMEOUT", "NF": "NODE_FAIL", "PR": "PREEMPTED",
                "BF": "BOOT_FAIL", "DL": "DEADLINE", "OOM": "OUT_OF_MEMORY"}
_JOB_ID = re.compile(r"^\d+(?:_(?:\d+|\[[\d,\-%]+\]))?(?:\+\d+)?$")


def reason_kind(reason: str | None) -> str | None:
    """Sort a pending reason into the families queue-idle distinguishes."""
    if not reason or reason.lower() == "none":
        return None
    text = reason.replace("_", " ")
    word = text.split(",")[0].strip()
    lowered = text.lower()
    if word in ("Resources", "Priority"):
        return word.lower()
    if word.startswith(("QOS", "Assoc", "MaxGRES", "MaxCpu", "MaxNode", "MaxJob")):
        return "qos"
    if word.startswith("Partition") or word in ("AccountNotAllowed", "QOSNotAllowed"):
        return "partition"
    if "reserv" in lowered or word.startswith("Resv"):
        return "reservation"
    if word in ("ReqNodeNotAvail", "NodeDown", "BadConstraints", "Licenses"):
        return "nodes"
    if word.startswith("Dependency"):
        return "dependency"
    if word.startswith("JobHeld") or word in ("BeginTime", "JobArrayTaskLimit"):
        return "held"
    return "other"


def parse(text: str) -> dict[str, Any]:
    """Jobs with their GPU request (per node, per job, total) and the pending reason."""
    rows = read_table(text, WHAT, COLUMNS, required=[("job_id",), ("state", "reason",
                                                                    "nodelist_reason")])
    jobs = []
    for row in rows:
        job_id = row.get("job_id") or ""
        if not _JOB_ID.match(job_id):
            fail(WHAT, f"{job_id[:40]!r} is not a job id")
        state = (row.get("state") or "").upper() or None
        state = _STATE_CODES.get(state, state) if state else None
        reason = row.get("reason")
        nodelist = row.get("nodelist")
        combined = row.get("nodelist_reason")
        if combined and combined.startswith("(") and combined.endswith(")"):
            reason = reason or combined[1:-1]
        elif combined:
            nodelist = nodelist or combined
        nodes = to_int((row.get("nodes") or "").split("-")[0])
        per_node = gres_gpus(row.get("tres_per_node"))
        per_job = gres_gpus(row.get("tres_per_job"))
        gpus = per_job if per_job else (per_node * nodes if per_node and nodes else per_node)
        jobs.append({
            "job_id": job_id, "partition": row.get("partition"), "user": row.get("user"),
            "state": state, "nodes": nodes, "qos": row.get("qos"),
            "gpus_per_node": per_node or None, "gpus_per_job": per_job or None,
            "gpus": gpus or 0, "reason": reason, "reason_kind": reason_kind(reason),
            "nodelist": nodelist, "reservation": row.get("reservation"),
        })
    return {"jobs": jobs, "pending": sum(1 for j in jobs if j["state"] == "PENDING")}
