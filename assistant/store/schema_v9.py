"""Schema version 9: host-incidents kept as data (see ``hostincidents`` for why and how).

The migration creates the two tables and fills them from the history already there; from
then on every writer keeps them (``hostincidents.refresh``). They are derived, so
``diag export`` leaves them out and ``diag import`` computes them again for what it adds.
"""

from __future__ import annotations

from .hostincidents import CODES, CREATE_CODES, CREATE_HINC, HINC, REAL, statements

V9_STATEMENTS: tuple[str, ...] = (
    CREATE_HINC,
    CREATE_CODES,
    *statements(REAL, HINC, CODES, create=False),
)

_DIMS = {
    "leaf": "leaf switch as of the host's latest walk of the incident (hosts.leaf)",
    "rack": "rack, likewise",
    "rail": "rail, likewise",
    "driver_version": "NVIDIA driver as of the host's latest versions run in the incident "
                      "(its session's last versions step), NULL if none",
    "nccl_version": "NCCL version, likewise",
    "kernel": "kernel release, likewise",
}

V9_DOC: dict[str, tuple[str, dict[str, str]]] = {
    HINC: ("Derived, kept by diag: one row per host in an incident (a host-incident) of the "
           "real, not simulated, sessions — what `diag correlate` counts a fleet in.", {
        "incident_id": "the incident (incidents.id)",
        "host": "the host",
        "ts": "the host's latest time in the incident: a walk listing it, a versions run, or "
              "an evidence finding (what --since windows filter on)",
        "listed": "whether a walk of the incident listed the host (hosts); false for a host "
                  "only a versions run saw",
        **_DIMS,
    }),
    CODES: ("Derived, kept by diag: one row per finding code a host raised in an incident "
            "(not `info`), with its host-incident's placement and versions beside it: "
            "the units `diag correlate` counts.", {
        "incident_id": "the incident (incidents.id)",
        "host": "the host the findings named",
        "code": "the finding code (findings.code)",
        "ts": "the latest of those findings (findings.ts)",
        "listed": "whether a walk of the incident listed the host",
        **_DIMS,
    }),
}
