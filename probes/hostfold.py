"""Host lists folded for humans: ``gpu[001-031]`` instead of thirty-one names.

One helper for every layer (probe messages, the fleet's errors, terminal and post-mortem
reports, the TUI), so a host list reads the same everywhere. It lives in ``probes``, the
bottom layer, because probe checks print host lists too and probes import nothing above
them. The folding itself is python-hostlist's ``collect_hostlist``, the inverse of the
expansion every host expression goes through. A name it cannot represent (one holding ``[``,
``]`` or ``,``) must not take a report down: the list then falls back to its sorted names,
comma-separated.
"""

from __future__ import annotations

from collections.abc import Iterable

import hostlist


def fold_hosts(names: Iterable[str], empty: str = "") -> str:
    """``gpu[001-031],login1`` for *names* (any order, duplicates dropped); *empty* for none."""
    names = list(names)
    if not names:
        return empty
    try:
        return hostlist.collect_hostlist(names)
    except hostlist.BadHostlist:
        return ",".join(sorted(set(names)))


def fold_counted(names: Iterable[str], empty: str = "-") -> str:
    """``gpu[001-031] (31)``: the folded list and how many hosts, as ``clush -b`` heads a
    group; *empty* for none."""
    names = list(names)
    return f"{fold_hosts(names)} ({len(names)})" if names else empty
