"""A finding's evidence as each of its hosts' rows in ``findings`` keep it.

The table has one row per (finding, host), so a finding about every host of the walk whose
evidence also has an entry per host (each host's reason for a parse error, each host's
version) was written whole into every host's row: its size times the number of hosts, a
square. At 1,000 hosts one step's 16 such findings were 16,000 rows of 100 KB, 1.6 GB of JSON
that DuckDB's cast held several times over (7.7 GB resident, 18 s: ``bench/walkmem.py
--record``); at 10,000 hosts, a hundred times that. Now the first host's row keeps the
evidence whole (the report shows it) and every other host's row keeps its own view: maps
keyed by the finding's hosts cut to that host's entry, lists of the finding's hosts to the
host itself. Small evidence (most findings) is kept whole on every row, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .prepared import to_json

WHOLE_UP_TO = 2048  # characters of JSON kept whole on every host's row


def host_rows(evidence: Any, text: str | None,
              hosts: Sequence[str | None]) -> Iterator[str | None]:
    """The evidence JSON for each of *hosts*' rows in order (*text* is *evidence* as JSON)."""
    if text is None or len(text) <= WHOLE_UP_TO or len(hosts) < 2:
        for _ in hosts:
            yield text
        return
    names = frozenset(hosts)
    yield text
    for host in hosts[1:]:
        yield to_json(host_view(evidence, host, names))


def host_view(value: Any, host: str | None, hosts: frozenset[str | None]) -> Any:
    """*value* as *host* sees it: the other hosts' entries left out."""
    if isinstance(value, dict):
        if len(value) > 1 and all(isinstance(k, str) and k in hosts for k in value):
            return {host: host_view(value[host], host, hosts)} if host in value else {}
        return {k: host_view(v, host, hosts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if len(value) > 1 and all(isinstance(v, str) and v in hosts for v in value):
            return [host] if host in value else []
        return [host_view(v, host, hosts) for v in value]
    return value
