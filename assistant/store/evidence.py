"""Where ``diag correlate`` reads its host-incidents: the kept rows, and rows derived once.

Recurrence, placement concentration, version cohorts and XID repeats all count
host-incidents (``hostincidents``). A store keeps them, written with the walks, and a question
reads ``host_incidents`` and ``host_incident_codes`` directly, filtering on ``ts`` for its
window. Some rows must be derived at question time, with the same SQL, into temporary tables:

- in a pool of exports, the sessions no clean export holds whole (``pool``: an older copy of a
  store, an incident continued in two stores, an export from before schema 9);
- with ``--include-simulated``, the incidents a simulated walk touched (the kept rows are the
  real walks');
- everything, where nothing is kept (a pool without the rows at all).

Deriving is the expensive part (de-duplicating findings), so it is done once per ``evidence``
block: ``diag correlate`` opens one around all its reports; a report asked alone opens its own
and drops what it derived on leaving.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from probes.catalog import load_catalog

from . import hostincidents
from .base import Connection, counted_sessions, window

__all__ = ["evidence", "not_evidence", "sources", "window"]

DERIVED = ("c_hinc", "c_hcodes")
_SCOPES: dict[int, tuple[bool, list[str] | None]] = {}  # id(con) -> (simulated, sources)


def not_evidence() -> tuple[str, ...]:
    """Codes that say diag could not look, not that a host is bad: never evidence."""
    return load_catalog().category("not-evidence")


@contextlib.contextmanager
def evidence(con: Connection, simulated: bool) -> Iterator[None]:
    """Inside the block, ``sources`` names the host-incident tables, derived at most once.

    An enclosing block on the same connection that counts the same sessions is reused; a
    nested block for the other choice derives its own, and the outer block derives again
    on its next question.
    """
    scope = _SCOPES.get(id(con))
    if scope is not None and scope[0] == simulated:
        yield
        return
    _SCOPES[id(con)] = (simulated, None)
    try:
        yield
    finally:
        if scope is None:
            del _SCOPES[id(con)]
        else:
            _SCOPES[id(con)] = (scope[0], None)
        for temp in DERIVED:
            with contextlib.suppress(Exception):
                con.execute(f"DROP TABLE IF EXISTS {temp}")


def sources(con: Connection) -> tuple[str, str]:
    """(host-incidents, host-incident codes): table names for the current ``evidence`` block."""
    simulated, names = _SCOPES[id(con)]
    if names is None:
        names = _sources(con, simulated)
        _SCOPES[id(con)] = (simulated, names)
    return names[0], names[1]


def _sources(con: Connection, simulated: bool) -> list[str]:
    kept = [hostincidents.HINC, hostincidents.CODES]
    if not hostincidents.kept(con):
        hostincidents.derive(con, counted_sessions(simulated), *DERIVED)
        return list(DERIVED)
    gaps = hostincidents.uncovered(con)  # a pool: incidents no export holds whole
    if gaps and simulated:
        hostincidents.derive(con, counted_sessions(simulated), *DERIVED)
        return list(DERIVED)
    if gaps:
        hostincidents.derive(con, gaps, *DERIVED)
        return [f"(SELECT * FROM {k} UNION ALL BY NAME SELECT * FROM {d})"
                for k, d in zip(kept, DERIVED, strict=True)]
    if simulated:
        # The kept rows are the real walks'; the incidents with a simulated walk (a
        # replayed scenario's, or one it joined) are derived whole, with all their walks.
        touched = ("(SELECT incident_id FROM sessions WHERE coalesce(simulated, false))")
        hostincidents.derive(con, f"(SELECT * FROM sessions WHERE incident_id IN {touched})",
                             *DERIVED)
        return [f"(SELECT * FROM {k} WHERE incident_id NOT IN {touched} "
                f"UNION ALL BY NAME SELECT * FROM {d})" for k, d in zip(kept, DERIVED,
                                                                        strict=True)]
    return kept
