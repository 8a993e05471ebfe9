"""``scontrol show job [-o] [ID]``: what Slurm knows about a job, as key=value records.

``diag ... --job ID`` starts here: the job's state, partition, start time, GRES and node list
are the incident's context, and its node list is the set of hosts to probe. Both spellings
are read: the one-line form (``-o``, one job per line) that diag runs, and the indented
multi-line form operators paste (jobs separated by blank lines).

Values may contain spaces (``Command=``, ``WorkDir=``, a reason such as
``ReqNodeNotAvail,_May_be_reserved_for_other_job`` in newer releases, with spaces in older
ones), so a record is cut at every `` Key=`` boundary rather than at whitespace. The same
reader serves ``scontrol show reservation -o`` and ``scontrol show partition -o``
(:func:`records`), whose lines have the same shape.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, none_if_na, text_lines, to_int

WHAT = "scontrol show job"

# A key starts a word: letters, then letters, digits, '_', ':' or '/' (AllocNode:Sid,
# CPUs/Task, ReqB:S:C:T). Anything else up to the next key is the value.
_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_:/]*)=")
_NULL = {"(null)", "none", "n/a", "unknown", ""}

# Job states after which the job holds no nodes any more (Slurm's "completed" family).
ENDED_STATES = ("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT", "SPECIAL_EXIT", "REVOKED")


def pairs(line: str) -> dict[str, str]:
    """One ``Key=value Key2=value two`` line as a dict (values stripped, order kept)."""
    found = list(_KEY.finditer(line))
    result: dict[str, str] = {}
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(line)
        result[match.group(1)] = line[match.end():end].strip()
    return result


def records(text: str, first_key: str) -> list[dict[str, str]]:
    """Records of ``scontrol show ENTITY`` output, one-line or multi-line, each starting at
    *first_key* (``JobId``, ``ReservationName``, ``PartitionName``)."""
    out: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    start = re.compile(rf"^\s*{re.escape(first_key)}=\S")
    for raw in text_lines(text):
        line = raw.rstrip()
        if not line.strip():
            current = None  # a blank line ends a multi-line record
            continue
        if start.match(line):
            current = pairs(line.strip())
            out.append(current)
        elif current is not None and line[:1].isspace() and _KEY.search(line.strip()):
            current.update(pairs(line.strip()))  # continuation of a multi-line record
        else:
            current = None
    return out


def value(record: dict[str, str], key: str) -> str | None:
    """A field, with Slurm's placeholders ((null), None, N/A, Unknown, empty) as None."""
    raw = record.get(key)
    if raw is None or raw.strip().lower() in _NULL:
        return None
    return none_if_na(raw)


def _user(raw: str | None) -> str | None:
    """``UserId=alice(1234)`` -> ``alice``."""
    if not raw:
        return None
    return raw.split("(", 1)[0] or None


def _nodes(raw: str | None) -> tuple[int | None, int | None]:
    """``NumNodes=4`` or a pending job's range ``NumNodes=2-4`` -> (min, max)."""
    if not raw:
        return None, None
    low, _, high = raw.partition("-")
    return to_int(low), to_int(high) if high else to_int(low)


def job_facts(record: dict[str, str]) -> dict[str, Any]:
    """The fields diag uses, named once; the whole record is kept under ``fields``."""
    nodes_min, nodes_max = _nodes(value(record, "NumNodes"))
    state = (value(record, "JobState") or "").upper() or None
    reason = value(record, "Reason")
    return {
        "job_id": record.get("JobId", "").strip(),
        "name": value(record, "JobName"),
        "user": _user(value(record, "UserId")),
        "state": state,
        "ended": state in ENDED_STATES if state else False,
        "reason": reason.replace("_", " ") if reason else None,
        "partition": value(record, "Partition"),
        "qos": value(record, "QOS"),
        "account": value(record, "Account"),
        "nodelist": value(record, "NodeList"),
        "num_nodes": nodes_min,
        "num_nodes_max": nodes_max,
        "submit_time": value(record, "SubmitTime"),
        "start_time": value(record, "StartTime"),
        "end_time": value(record, "EndTime"),
        "time_limit": value(record, "TimeLimit"),
        "gres": value(record, "TresPerNode") or value(record, "Gres"),
        "tres_per_job": value(record, "TresPerJob"),
        "tres": value(record, "TRES") or value(record, "AllocTRES"),
        "batch_host": value(record, "BatchHost"),
        "fields": dict(record),
    }


def parse(text: str) -> dict[str, Any]:
    """Every job record in the output; at least one, each with a job id and a state."""
    found = records(text, "JobId")
    if not found:
        fail(WHAT, "no 'JobId=...' record found")
    jobs = [job_facts(r) for r in found]
    broken = [j["job_id"] or "?" for j in jobs if not j["job_id"] or j["state"] is None]
    if broken and len(broken) == len(jobs):
        fail(WHAT, f"job record(s) {', '.join(broken[:3])} have no JobState")
    return {"jobs": [j for j in jobs if j["job_id"] and j["state"] is not None]}
