"""Where ``diag correlate`` reads its host-incidents: the store's kept rows, or rows derived once.

Recurrence, placement concentration, version cohorts and XID repeats all count
host-incidents (``hostincidents``). A store keeps them, written with the walks, and a question
reads ``host_incidents`` and ``host_incident_codes`` directly, filtering on ``ts`` for its
window. Two readers cannot: a pool of exports (Parquet views of the history; derived rows are
not exported) and ``--include-simulated`` (the kept rows are the real sessions'). They derive
the same rows, with the same SQL, into temporary tables — the expensive part (de-duplicating a
year's findings), so it is done once per ``evidence`` block: ``diag correlate`` opens one
around all its reports; a report asked alone opens its own and drops what it derived on
leaving.
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
        if not simulated and hostincidents.kept(con):
            names = [hostincidents.HINC, hostincidents.CODES]
            gaps = hostincidents.uncovered(con)
            if gaps:  # a pool: the incidents whose rows no export has whole, derived
                hostincidents.derive(con, gaps, *DERIVED)
                names = [f"(SELECT * FROM {kept} UNION ALL BY NAME SELECT * FROM {temp})"
                         for kept, temp in zip(names, DERIVED, strict=True)]
        else:
            hostincidents.derive(con, counted_sessions(simulated), *DERIVED)
            names = list(DERIVED)
        _SCOPES[id(con)] = (simulated, names)
    return names[0], names[1]
