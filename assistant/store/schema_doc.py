"""What ``diag query --schema`` prints: every table and column of the store with its meaning,
kept beside the migrations (``schema``) that make them; a test holds the two to each other (a
column without a meaning, or a meaning without a column, fails).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .schema import CURRENT_VERSION, DERIVED, TABLES
from .schema_v6 import V6_DOC
from .schema_v8 import V8_COLUMNS, V8_DOC
from .schema_v9 import V9_DOC
from .schema_v11 import V11_DOC

SCHEMA_DOC: dict[str, tuple[str, dict[str, str]]] = {
    "incidents": ("An incident: one problem with a job, grouping the sessions spent on it.", {
        "id": "incident id (12 hex digits); `diag report ID` takes it or a unique prefix",
        "title": "one line: the symptom's first line, or runbook and hosts",
        "symptom": "the symptom text as the operator gave it",
        "job_id": "the scheduler job id, when known",
        "status": "open | closed | merged (into merged_into)",
        "opened": "when the first session started (UTC)",
        "closed": "when it was closed (UTC), else NULL",
        "root_cause": "the explaining conclusion: 'title: cause' of the last concluded walk",
        "conclusion": "that conclusion as 'runbook/node' (what 'same root cause' compares)",
        "tags": "free labels (runbook tags, team labels)",
        "updated": "when the incident row last changed (UTC): opened, joined, closed, "
                   "reopened, merged, tagged",
        "closed_by": "who closed it ($USER), NULL while open",
        "merged_into": "for a merged incident, the incident that absorbed its sessions",
        "simulated": "true for a replayed scenario (--demo, --scenario): left out of history, "
                     "correlate and reports unless --include-simulated",
    }),
    "sessions": ("One walk of one runbook, by one operator, for one incident.", {
        "id": "session id (12 hex digits); `diag run --resume ID` continues it",
        "incident_id": "the incident it belongs to (incidents.id)",
        "runbook": "runbook id, e.g. hang",
        "operator": "who ran it ($USER)",
        "started": "when the walk started (UTC)",
        "updated": "last time a step was written (a 'running' session not updated for long "
                   "was interrupted)",
        "ended": "when a conclusion was reached (UTC), else NULL",
        "status": "running | waiting (on a question) | interrupted (Ctrl-C, or the TUI left "
                  "mid-step: `diag run --resume ID` continues) | concluded | "
                  "closed-while-waiting (its incident was closed while it waited or was "
                  "interrupted; `diag incident reopen` brings it back to waiting)",
        "conclusion": "the conclusion node id reached, else NULL",
        "outcome": "the conclusion as 'title: cause'",
        "severity": "the conclusion's severity (info | warning | error | critical)",
        "hosts_n": "how many hosts the walk covered",
        "target": "how the hosts were reached (scenario / inventory / transport options, JSON): "
                  "what --resume needs to reach them again",
        "simulated": "true when the walk replayed a scenario (a demo, a drill, --scenario)",
    }),
    "hosts": ("Each host of each session, with where it sat at the time of the run.", {
        "session_id": "sessions.id",
        "host": "host name",
        "ts": "when the session started (UTC)",
        "rack": "rack, from the inventory (NULL when unknown)",
        "leaf": "leaf switch, from the inventory",
        "rail": "rail, from the inventory",
        "attrs": "every other inventory attribute, as JSON",
    }),
    "steps": ("Every step taken, in order; undone steps are kept and flagged.", {
        "session_id": "sessions.id",
        "seq": "order in which the step was recorded in its session (0, 1, ...; unique)",
        "idx": "position in the walk's path (an undone step's idx is taken again)",
        "node": "runbook node id",
        "kind": "probe | question | action | conclusion",
        "answer": "the choice id, for a question",
        "goto": "the node it led to (NULL after a conclusion)",
        "because": "the condition that held, or the answer given",
        "started": "step start (UTC)",
        "ended": "step end (UTC)",
        "undone": "true when the operator took the answer back (it is not in the path)",
    }),
    "probe_runs": ("One probe on one host during a step.", {
        "session_id": "sessions.id",
        "step_seq": "steps.seq of the step that ran it",
        "step_index": "steps.idx of that step",
        "ts": "when the step ended (UTC)",
        "host": "host name",
        "probe": "probe name, e.g. versions",
        "state": "ok | unreachable | auth-failed | host-key-refused | timeout | parse-error "
                 "| cancelled",
        "reason": "why, when not ok",
        "duration_s": "seconds the command took on that host",
        "raw_bytes": "size of the raw output before it was bounded",
        "facts": "the parsed facts (JSON); versions: driver_version, nccl_version, kernel, ...",
    }),
    "findings": ("What the checks found: one row per host of each finding.", {
        "session_id": "sessions.id",
        "step_seq": "steps.seq of the step that raised it",
        "step_index": "steps.idx of that step",
        "finding_no": "the finding's number in its step (rows of one finding share it)",
        "ts": "when the step ended (UTC)",
        "code": "stable finding code, e.g. xid-drain, ib-symbol-errors (docs/probe-catalog.md)",
        "severity": "info | warning | error | critical",
        "host": "the host this row is about (NULL for a finding that names no host)",
        "hosts_n": "how many hosts the whole finding named",
        "probe": "the probe that raised it",
        "message": "one line for the operator",
        "evidence": "the supporting data (JSON)",
        "xids": "for xid-* findings, the XID codes seen (INTEGER[]); NULL otherwise",
    }),
    "actions": ("Remediations decided during a walk: what ran, on which hosts, who said yes.", {
        "session_id": "sessions.id",
        "step_seq": "steps.seq of the action step",
        "step_index": "steps.idx of that step",
        "ts": "when the step ended (UTC)",
        "node": "runbook node id",
        "command": "the command, NULL for advice without a command",
        "hosts": "the hosts it targeted",
        "confirmed": "whether the operator confirmed it",
        "confirmed_by": "who confirmed (the session's operator), NULL if not confirmed",
        "result": "what happened (the runner's output, or why it did not run)",
    }),
    "host_keys": ("Host keys recorded in known_hosts because of --accept-new-host-keys.", {
        "session_id": "the session during which the key was accepted (sessions.id)",
        "ts": "when it was recorded (UTC)",
        "host": "host name",
        "name": "the name it was filed under in known_hosts (host, or [host]:port)",
        "key_type": "e.g. ssh-ed25519",
        "fingerprint": "SHA256:... as ssh-keygen -l prints it: compare it with the host's own",
        "known_hosts": "the file the key was written to",
        "operator": "who ran the session ($USER)",
    }),
    **V6_DOC,
    **V8_DOC,
    **V9_DOC,
    **V11_DOC,
    "drills": ("One finished drill (`diag drill`): a trainee's score on a simulated incident.", {
        "id": "drill id (12 hex digits)",
        "trainee": "who drilled ($USER)",
        "scenario": "the scenario drilled (fixtures/scenarios/NAME)",
        "runbook": "the runbook the trainee chose",
        "conclusion": "the conclusion node reached, NULL if none",
        "expected": "the scenario's expected conclusion",
        "correct": "whether the conclusion reached is the expected one",
        "steps": "steps taken (the walk's path, undone steps excluded)",
        "shortest": "steps on the shortest path from the runbook's start to the expected "
                    "conclusion (NULL when the chosen runbook cannot reach it)",
        "hints": "hints revealed during the drill",
        "seconds": "time from the symptom shown to the conclusion",
        "finished": "when the drill ended (UTC)",
    }),
    "schema_version": ("The schema steps applied to this file (highest = the file's version).", {
        "version": "schema version number",
        "applied": "when the step was applied (UTC)",
        "description": "what the step changed",
    }),
}
for _table, _columns in V8_COLUMNS.items():
    SCHEMA_DOC[_table][1].update(_columns)


def schema_text(columns: Sequence[tuple[str, str, str]]) -> str:
    """The tables as text: *columns* are (table, column, type) rows of the current schema."""
    by_table: dict[str, list[tuple[str, str]]] = {}
    for table, column, type_ in columns:
        by_table.setdefault(table, []).append((column, type_))
    lines = [f"diag incident store, schema version {CURRENT_VERSION}. All times are UTC.",
             "Join children to sessions on session_id, findings to hosts on "
             "(session_id, host), findings/probe_runs/actions to steps on "
             "(session_id, step_seq = seq).", ""]
    for table in (*TABLES, *DERIVED):
        meaning, docs = SCHEMA_DOC[table]
        cols = by_table.get(table, [])
        lines.append(f"{table} — {meaning}")
        name_w = max((len(c) for c, _ in cols), default=0)
        type_w = max((len(t) for _, t in cols), default=0)
        for column, type_ in cols:
            lines.append(f"  {column:<{name_w}}  {type_:<{type_w}}  {docs.get(column, '')}")
        lines.append("")
    return "\n".join(lines)


def schema_json(columns: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
    by_table: dict[str, list[dict[str, str]]] = {}
    for table, column, type_ in columns:
        by_table.setdefault(table, []).append(
            {"name": column, "type": type_, "meaning": SCHEMA_DOC[table][1].get(column, "")})
    return {"version": CURRENT_VERSION,
            "tables": {t: {"meaning": SCHEMA_DOC[t][0], "columns": by_table.get(t, [])}
                       for t in (*TABLES, *DERIVED)}}
