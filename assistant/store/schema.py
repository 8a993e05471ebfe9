"""The store's schema and its migrations (the documentation ``diag query --schema`` prints of
it is in ``schema_doc``).

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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .schema_v6 import V6_STATEMENTS
from .schema_v8 import V8_STATEMENTS
from .schema_v9 import V9_STATEMENTS
from .schema_v10 import redact_typed
from .schema_v11 import V11_STATEMENTS
from .schema_v12 import V12_STATEMENTS


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]
    # Work SQL cannot do, run after the statements in the same transaction (an empty store
    # has no rows for it: a schema built from the statements alone is the same schema).
    run: Callable[[Any], object] | None = None


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
    Migration(10, "what a person typed (symptom, title, cause, tags, job, answers, actions) "
                  "redacted in rows written before diag redacted it", (), redact_typed),
    Migration(11, "incident_actions: what was done about an incident outside diag",
              V11_STATEMENTS),
    Migration(12, "one conclusion id per fault: four runbook-specific ids renamed to the "
                  "shared one (link-physical-fault -> ib-link-fault, ...)", V12_STATEMENTS),
)
CURRENT_VERSION = MIGRATIONS[-1].version
TABLES = ("incidents", "sessions", "hosts", "steps", "probe_runs", "findings", "actions",
          "host_keys", "drills", "acceptance", "samples", "raw_blobs", "incident_actions",
          "schema_version")
# Derived from the tables above and kept by every writer (``hostincidents``): exported beside
# the history (a pool reads them where an export holds its incidents whole), never imported
# (``diag import`` derives them again for what it adds), and documented like the others.
DERIVED = ("host_incidents", "host_incident_codes")


def pending(version: int) -> list[Migration]:
    """The steps that take a file at *version* to the current one, in order."""
    return [m for m in MIGRATIONS if m.version > version]
