"""Schema version 6: the acceptance figures and soak samples, with their `diag query --schema`
descriptions (apart from schema.py, which lists the migration and the tables, to keep it
readable)."""

from __future__ import annotations

# An acceptance test's figures (per node and GPU, with the criterion and its source) are what a
# hardware ticket quotes and what "has this node failed dcgmi before?" asks; they were only
# inside probe_runs.facts JSON. A soak or `diag watch` records each round as it is taken, so
# an interrupted one keeps what it saw.

V6_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE acceptance (
        session_id  VARCHAR NOT NULL,
        step_seq    INTEGER NOT NULL,
        ts          TIMESTAMP NOT NULL,
        host        VARCHAR NOT NULL,
        level       INTEGER NOT NULL,
        test        VARCHAR NOT NULL,
        gpu         INTEGER,
        metric      VARCHAR NOT NULL,
        value       DOUBLE,
        unit        VARCHAR,
        op          VARCHAR,
        threshold   DOUBLE,
        verdict     VARCHAR NOT NULL,
        source      VARCHAR,
        detail      JSON)""",
    """CREATE TABLE samples (
        session_id  VARCHAR NOT NULL,
        probe       VARCHAR NOT NULL,
        seq         INTEGER NOT NULL,
        ts          TIMESTAMP NOT NULL,
        host        VARCHAR NOT NULL,
        state       VARCHAR NOT NULL,
        reason      VARCHAR,
        counters    JSON)""",
)


V6_DOC: dict[str, tuple[str, dict[str, str]]] = {
    "acceptance": ("One figure of an acceptance test (`diag accept`): per node, per GPU where "
                   "the test is per GPU, with the criterion it was judged by.", {
        "session_id": "the acceptance walk (sessions.id)",
        "step_seq": "the step that ran the test (steps.seq)",
        "ts": "when the step finished (UTC)",
        "host": "node",
        "level": "0 fitness, 1 per GPU, 2 per node, 3 multi-node, 4 soak",
        "test": "the probe: dcgm-diag, gpu-burn, nvbandwidth, nccl-node, ib-loopback, ...",
        "gpu": "GPU index for per-GPU figures, else NULL",
        "metric": "what was measured, e.g. busbw, failed_tests, h2d_gb_s",
        "value": "the measured value (NULL: not measured)",
        "unit": "e.g. GB/s",
        "op": "how the value is compared with the threshold (>=, <=, ==)",
        "threshold": "the criterion's value, NULL when none applies",
        "verdict": "pass | fail | recorded (no criterion) | not-run",
        "source": "where the criterion comes from (NVIDIA, DCGM, a health checker, the site)",
        "detail": "JSON: the test's context (model, port, run, message size)",
    }),
    "samples": ("One round of a soak or `diag watch` on one host: its counters at that time.", {
        "session_id": "the walk (sessions.id)",
        "probe": "the sampling probe (soak)",
        "seq": "round number, from 0",
        "ts": "when the round started (UTC)",
        "host": "host name",
        "state": "ok, or why the host gave no sample (timeout, unreachable, ...)",
        "reason": "the reason for a state other than ok",
        "counters": "JSON: counter name -> value; a host's first row of a run holds every "
                    "counter, later rows only those that changed since its previous row (null: "
                    "no longer read), so a counter's value at a round is its latest row up to "
                    "it",
    }),
}
