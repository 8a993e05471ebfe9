"""The store's schema, its migrations, and the documentation ``diag query --schema`` prints.

The file carries its own version in ``schema_version`` (one row per applied step), so any diag
can tell what it is looking at: an empty file gets every step, an older file is upgraded in
place step by step (each step in its own transaction, so a crash leaves a consistent version),
and a file written by a newer diag is refused — an old diag must never write rows a newer
schema does not expect.

Design choices that the correlation queries rely on:

- Every child table carries ``session_id`` and a timestamp ``ts`` copied from its step, so
  a ``--since`` window filters one table without joins, and rows appended in time order give
  DuckDB zone maps that skip old row groups.
- ``findings`` has one row per host of a finding (a fleet finding over 40 hosts is 40 rows), so
  "findings per leaf / rack / rail / version" is a join on ``(session_id, host)`` and a GROUP
  BY, never a JSON unnest.
- ``hosts`` keeps rack / leaf / rail as of each run (a node that moved racks is counted where
  it was), and the inventory's other attributes as JSON.
- No foreign keys and no primary-key indexes: ids are random (uuid4) so rows from many
  operators' stores can be pooled, and DuckDB's constraint indexes would slow the bulk paths
  while the tables are scanned, not probed by key, in every heavy query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .schema_v6 import V6_DOC, V6_STATEMENTS
from .schema_v8 import V8_COLUMNS, V8_DOC, V8_STATEMENTS
from .schema_v9 import V9_DOC, V9_STATEMENTS


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


# --- version 1: the tables ------------------------------------------------------------------

V1_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE schema_version (
        version     INTEGER NOT NULL,
        applied     TIMESTAMP NOT NULL,
        description VARCHAR NOT NULL)""",
    """CREATE TABLE incidents (
        id          VARCHAR NOT NULL,
        title       VARCHAR NOT NULL,
        symptom     VARCHAR,
        job_id      VARCHAR,
        status      VARCHAR NOT NULL,
        opened      TIMESTAMP NOT NULL,
        closed      TIMESTAMP,
        root_cause  VARCHAR,
        conclusion  VARCHAR,
        tags        VARCHAR[] NOT NULL DEFAULT [])""",
    """CREATE TABLE sessions (
        id          VARCHAR NOT NULL,
        incident_id VARCHAR NOT NULL,
        runbook     VARCHAR NOT NULL,
        operator    VARCHAR NOT NULL,
        started     TIMESTAMP NOT NULL,
        updated     TIMESTAMP NOT NULL,
        ended       TIMESTAMP,
        status      VARCHAR NOT NULL,
        conclusion  VARCHAR,
        outcome     VARCHAR,
        severity    VARCHAR,
        hosts_n     INTEGER NOT NULL,
        target      JSON,
        walk_state  JSON)""",
    """CREATE TABLE hosts (
        session_id  VARCHAR NOT NULL,
        host        VARCHAR NOT NULL,
        ts          TIMESTAMP NOT NULL,
        rack        VARCHAR,
        leaf        VARCHAR,
        rail        VARCHAR,
        attrs       JSON)""",
    """CREATE TABLE steps (
        session_id  VARCHAR NOT NULL,
        seq         INTEGER NOT NULL,
        idx         INTEGER NOT NULL,
        node        VARCHAR NOT NULL,
        kind        VARCHAR NOT NULL,
        answer      VARCHAR,
        goto        VARCHAR,
        because     VARCHAR,
        started     TIMESTAMP NOT NULL,
        ended       TIMESTAMP NOT NULL,
        undone      BOOLEAN NOT NULL DEFAULT false)""",
    """CREATE TABLE probe_runs (
        session_id  VARCHAR NOT NULL,
        step_seq    INTEGER NOT NULL,
        step_index  INTEGER NOT NULL,
        ts          TIMESTAMP NOT NULL,
        host        VARCHAR NOT NULL,
        probe       VARCHAR NOT NULL,
        state       VARCHAR NOT NULL,
        reason      VARCHAR,
        duration_s  DOUBLE,
        raw         VARCHAR,
        raw_bytes   INTEGER,
        facts       JSON)""",
    """CREATE TABLE findings (
        session_id  VARCHAR NOT NULL,
        step_seq    INTEGER NOT NULL,
        step_index  INTEGER NOT NULL,
        finding_no  INTEGER NOT NULL,
        ts          TIMESTAMP NOT NULL,
        code        VARCHAR NOT NULL,
        severity    VARCHAR NOT NULL,
        host        VARCHAR,
        hosts_n     INTEGER NOT NULL,
        probe       VARCHAR,
        message     VARCHAR,
        evidence    JSON)""",
    """CREATE TABLE actions (
        session_id   VARCHAR NOT NULL,
        step_seq     INTEGER NOT NULL,
        step_index   INTEGER NOT NULL,
        ts           TIMESTAMP NOT NULL,
        node         VARCHAR NOT NULL,
        command      VARCHAR,
        hosts        VARCHAR[] NOT NULL DEFAULT [],
        confirmed    BOOLEAN NOT NULL,
        confirmed_by VARCHAR,
        result       VARCHAR)""",
)

# --- version 2: XID codes as a column ---------------------------------------------------------
# Version 1 kept an XID finding's codes only inside its evidence JSON, so "repeat offenders by
# XID" parsed JSON over every xid-* row. Version 2 lifts them into a list column, backfilled
# from the evidence of the rows already there.
# (No index on findings.host: DuckDB 2 answers `host = ?` on a million findings with a
# zone-mapped scan in ~5 ms and did not use an ART index for it, which only slowed ingest.)

V2_STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE findings ADD COLUMN xids INTEGER[]",
    """UPDATE findings SET xids = TRY_CAST(json_extract(evidence, '$.xids') AS INTEGER[])
       WHERE code LIKE 'xid-%' AND evidence IS NOT NULL""",
)

# --- version 3: drill scores ----------------------------------------------------------------
# A trainee's drills (``diag drill``): one row per finished drill, so the score screen can show
# progress. Kept apart from sessions: a drill walks a simulated fleet, it is not an incident.

V3_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE drills (
        id          VARCHAR NOT NULL,
        trainee     VARCHAR NOT NULL,
        scenario    VARCHAR NOT NULL,
        runbook     VARCHAR NOT NULL,
        conclusion  VARCHAR,
        expected    VARCHAR,
        correct     BOOLEAN NOT NULL,
        steps       INTEGER NOT NULL,
        shortest    INTEGER,
        hints       INTEGER NOT NULL,
        seconds     DOUBLE NOT NULL,
        finished    TIMESTAMP NOT NULL)""",
)

# --- version 4: host keys accepted -----------------------------------------------------------
# A key recorded in known_hosts because the operator ran with --accept-new-host-keys is a trust
# decision: which host, which key (fingerprint), into which file, by whom, in which session.

V4_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE host_keys (
        session_id  VARCHAR NOT NULL,
        ts          TIMESTAMP NOT NULL,
        host        VARCHAR NOT NULL,
        name        VARCHAR NOT NULL,
        key_type    VARCHAR NOT NULL,
        fingerprint VARCHAR NOT NULL,
        known_hosts VARCHAR NOT NULL,
        operator    VARCHAR NOT NULL)""",
)

# --- version 5: incidents as the unit -------------------------------------------------------
# `diag incident close | reopen | merge | tag` change incidents after their walks: who closed
# one, which incident absorbed a merged one, and when the row last changed (so pooled exports
# that hold two copies of one incident keep the newer).

V5_STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE incidents ADD COLUMN updated TIMESTAMP",
    "ALTER TABLE incidents ADD COLUMN closed_by VARCHAR",
    "ALTER TABLE incidents ADD COLUMN merged_into VARCHAR",
    "UPDATE incidents SET updated = coalesce(closed, opened)",
)

# --- version 7: simulated runs kept out of the real history ----------------------------------
# `diag --demo`, `--scenario` and drills replay made-up incidents; recorded like real ones they
# showed up in history, correlate and the report's similar incidents. Sessions and incidents
# now say whether they were simulated (a replayed scenario), and those readers leave them out
# unless asked (--include-simulated). Older rows are marked from the target they recorded.

V7_STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE sessions ADD COLUMN simulated BOOLEAN NOT NULL DEFAULT false",
    "ALTER TABLE incidents ADD COLUMN simulated BOOLEAN NOT NULL DEFAULT false",
    """UPDATE sessions SET simulated = true
       WHERE json_extract_string(target, '$.scenario') IS NOT NULL""",
    """UPDATE incidents SET simulated = true WHERE id IN (SELECT incident_id FROM sessions
       GROUP BY incident_id HAVING bool_and(simulated))""",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "tables: incidents, sessions, hosts, steps, probe_runs, findings, actions",
              V1_STATEMENTS),
    Migration(2, "findings.xids: XID codes lifted out of the evidence JSON", V2_STATEMENTS),
    Migration(3, "drills: trainees' drill scores", V3_STATEMENTS),
    Migration(4, "host_keys: host keys accepted with --accept-new-host-keys", V4_STATEMENTS),
    Migration(5, "incidents.updated, closed_by, merged_into: incidents managed after their "
                 "walks", V5_STATEMENTS),
    Migration(6, "acceptance, samples: acceptance figures and soak/watch samples",
              V6_STATEMENTS),
    Migration(7, "sessions/incidents.simulated: replayed scenarios kept out of history",
              V7_STATEMENTS),
    Migration(8, "raw_blobs: raw outputs once per content; steps.record", V8_STATEMENTS),
    Migration(9, "host_incidents, host_incident_codes: what correlate counts, kept",
              V9_STATEMENTS),
)
CURRENT_VERSION = MIGRATIONS[-1].version
TABLES = ("incidents", "sessions", "hosts", "steps", "probe_runs", "findings", "actions",
          "host_keys", "drills", "acceptance", "samples", "raw_blobs", "schema_version")
# Derived from the tables above and kept by every writer (``hostincidents``): exported beside
# the history (a pool reads them where an export holds its incidents whole), never imported
# (``diag import`` derives them again for what it adds), and documented like the others.
DERIVED = ("host_incidents", "host_incident_codes")


def pending(version: int) -> list[Migration]:
    """The steps that take a file at *version* to the current one, in order."""
    return [m for m in MIGRATIONS if m.version > version]


# --- what `diag query --schema` prints --------------------------------------------------------

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
                  "mid-step: `diag run --resume ID` continues) | concluded",
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
