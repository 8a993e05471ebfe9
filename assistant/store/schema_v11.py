"""Schema version 11: what was done about an incident outside diag — a power cycle, a reseat,
an RMA, a vendor ticket — recorded on the incident (``diag incident action``) so the report's
actions tell the whole story, not only the remediations a walk ran."""

from __future__ import annotations

from typing import Any

from .base import Connection, StoreError, new_id, now_utc
from .redact import redact_text

KINDS = ("power-cycle", "reboot", "reseat", "replace", "rma", "vendor-ticket", "drain",
         "resume", "other")

V11_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE incident_actions (
        id          VARCHAR NOT NULL,
        incident_id VARCHAR NOT NULL,
        ts          TIMESTAMP NOT NULL,
        operator    VARCHAR NOT NULL,
        kind        VARCHAR NOT NULL,
        text        VARCHAR NOT NULL)""",
)

V11_DOC: dict[str, tuple[str, dict[str, str]]] = {
    "incident_actions": ("Something done about an incident outside diag (`diag incident "
                         "action`): a power cycle, an RMA, a vendor ticket.", {
        "id": "the row's id (12 hex digits)",
        "incident_id": "the incident (incidents.id); moves with a merge",
        "ts": "when it was recorded (UTC)",
        "operator": "who recorded it ($USER)",
        "kind": " | ".join(KINDS),
        "text": "what was done, in words (redacted: a pasted ticket URL keeps no token)",
    }),
}


def record_action(con: Connection, ident: str, kind: str, text: str, operator: str,
                  path: str = "") -> dict[str, Any]:
    """Add one action taken outside diag to the incident *ident* names; returns the
    incident's row as it now is."""
    from . import incidents  # (incidents -> ... -> schema: imported when used)

    if kind not in KINDS:
        raise StoreError(f"--kind takes one of {', '.join(KINDS)}, not '{kind}'")
    incident = incidents.resolve(con, ident, path)
    now = now_utc()
    con.execute("INSERT INTO incident_actions VALUES (?, ?, ?, ?, ?, ?)",
                [new_id(), incident, now, operator, kind, redact_text(text)])
    con.execute("UPDATE incidents SET updated = ? WHERE id = ?", [now, incident])
    return incidents.show(con, incident, path)
