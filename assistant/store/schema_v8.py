"""Schema version 8: raw outputs kept once per content, and each step's record kept with the
step (apart from schema.py, which lists the migration and the tables, to keep it readable).

Why. A homogeneous fleet answers most probes with the same bytes on every host (versions,
topology, the same driver's ``nvidia-smi -q`` layout), and a team runs the same runbooks over
the same hosts day after day: a text column per probe run stored each copy again (9 MB per 1,000
host-probe runs with distinct outputs, 1.5 MB with identical ones, measured by
``bench/recording.py``). Now ``probe_runs.raw_hash`` names a row of ``raw_blobs``: SHA-256 of
the stored (bounded, redacted) text, so equal outputs are one row however many hosts and walks
printed them; outputs of 1 KiB or more are zlib-compressed there. And the walk state used to
be written whole after every step (every earlier step's per-host facts serialised and redacted
again: a walk quadratic in its steps); now each step's record is written once, with its row in
``steps``, and ``sessions.walk_state`` keeps only the head (where the walk is, its answers).

The migration moves what older versions stored: each distinct ``probe_runs.raw`` text becomes
a blob (uncompressed: SQL has no zlib; new ones are compressed), and each live step gets its
record from the session's saved walk state.
"""

from __future__ import annotations

V8_STATEMENTS: tuple[str, ...] = (
    # No primary key (see schema.py: no constraint indexes); writers add a hash only when it
    # is absent, inside their write transaction, and readers of pooled exports drop repeats.
    """CREATE TABLE raw_blobs (
        hash        VARCHAR NOT NULL,
        bytes       INTEGER NOT NULL,
        text        VARCHAR,
        zlib        BLOB)""",
    "ALTER TABLE probe_runs ADD COLUMN raw_hash VARCHAR",
    "ALTER TABLE steps ADD COLUMN record JSON",
    """INSERT INTO raw_blobs SELECT sha256(raw), strlen(raw), raw, NULL
       FROM (SELECT DISTINCT raw FROM probe_runs WHERE raw IS NOT NULL)""",
    "UPDATE probe_runs SET raw_hash = sha256(raw), raw = NULL WHERE raw IS NOT NULL",
    """UPDATE steps SET record = json_extract(s.walk_state, '$.steps[' || steps.idx || ']')
       FROM sessions s WHERE s.id = steps.session_id AND NOT steps.undone
       AND s.walk_state IS NOT NULL""",
)

V8_DOC: dict[str, tuple[str, dict[str, str]]] = {
    "raw_blobs": ("Raw probe outputs, one row per distinct content (redacted, bounded): "
                  "probe_runs.raw_hash points here, so the same output from many hosts and "
                  "walks is stored once.", {
        "hash": "SHA-256 (hex) of the stored text's UTF-8 bytes: probe_runs.raw_hash",
        "bytes": "size of the stored text in bytes (after redaction and bounding)",
        "text": "the output, for outputs under 1 KiB (else NULL: see zlib)",
        "zlib": "the output's UTF-8 bytes zlib-compressed, for outputs of 1 KiB or more "
                "(`diag bundle` and `diag report` read them; SQL cannot)",
    }),
}

# Columns added to older tables, with their `diag query --schema` descriptions.
V8_COLUMNS: dict[str, dict[str, str]] = {
    "probe_runs": {
        "raw": "the raw output as stored before schema 8 (NULL since: see raw_hash)",
        "raw_hash": "the raw output (redacted, bounded) in raw_blobs, by its hash; NULL when "
                    "the host printed nothing",
    },
    "sessions": {
        "walk_state": "where the walk is (Walk.to_dict() without its steps, which are in "
                      "steps.record) after the last finished step: resume",
    },
    "steps": {
        "record": "the step as the walk saw it (Walk's step record, redacted): what "
                  "`diag run --resume` rebuilds the walk from",
    },
}
