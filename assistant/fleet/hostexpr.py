"""Host expressions: how an operator writes host names, and the one error for naming hosts.

An operator names hosts with Slurm hostlist expressions (``gpu[001-016,020]``) and jump hosts
the way ProxyJump writes them (``user@bastion:2222``). Expressions are expanded by the
``python-hostlist`` library, never by hand: its syntax is the one Slurm, pdsh and clush users
already type, including padding and multiple ranges. Folding names back into an expression
for display is ``probes.hostfold``.

Every problem with a host expression, an inventory or an ssh_config raises
:class:`InventoryError`, whose ``str()`` is one line naming the file and line when there is
one — the command line prints it and exits 2, no traceback. It lives here, below
``inventory``, so that expanding ``--hosts`` needs neither YAML nor paramiko.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import hostlist


class InventoryError(ValueError):
    """A bad inventory, ssh_config or host expression. ``str()`` is ``FILE:LINE: message``."""

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None,
                 line: int | None = None) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        where = self.path or ""
        if where and line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}" if where else message)


def expand_hosts(expr: str | Iterable[str]) -> list[str]:
    """Expand a hostlist expression (``gpu[001-004],login1``) into names, in order, deduplicated.

    Several expressions may be given as an iterable, or separated by whitespace.
    """
    parts = expr.split() if isinstance(expr, str) else [p for e in expr for p in e.split()]
    if not parts:
        raise InventoryError("empty host expression")
    names: list[str] = []
    for part in parts:
        try:
            names.extend(hostlist.expand_hostlist(part))
        except hostlist.BadHostlist as exc:
            raise InventoryError(f"bad host expression {part!r}: {exc}") from None
    return list(dict.fromkeys(n for n in names if n))


def parse_hop(hop: str) -> dict[str, Any]:
    """``[user@]host[:port]`` (or ``ssh://user@host:port``) as ProxyJump writes a hop."""
    hop = hop.strip().removeprefix("ssh://")
    fields: dict[str, Any] = {}
    if "@" in hop:
        fields["user"], hop = hop.rsplit("@", 1)
    if hop.startswith("[") and "]" in hop:  # [::1]:2222
        host, _, rest = hop[1:].partition("]")
        port = rest.removeprefix(":")
    elif hop.count(":") == 1:
        host, port = hop.split(":")
    else:
        host, port = hop, ""
    if port:
        if not port.isdigit():
            raise InventoryError(f"bad ProxyJump hop {hop!r}: port {port!r}")
        fields["port"] = int(port)
    fields["name"] = host
    return fields
