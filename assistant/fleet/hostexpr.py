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

**Host names are checked before anything uses them.** A name reaches ssh_config, whose
``Match exec "... %h"`` runs a local shell command with the name pasted in: a "host" called
``gpu7;touch${IFS}/tmp/x;true`` (from a job's node list, a pasted line, a shared inventory)
would run a command on the operator's machine — the class of CVE-2023-51385, which OpenSSH
9.6 closed by refusing shell metacharacters in names given on its command line. Here a name is
what DNS, /etc/hosts and Slurm accept (letters, digits, ``.``, ``-``, ``_``, not starting with
``-``, at most 253 characters) or an IPv6 address; an expression may add hostlist brackets,
commas and spaces. Everything else is refused before expansion, with the character named.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

import hostlist

# A host name as DNS (RFC 1123: letters, digits, hyphens; dots between labels) and Slurm
# NodeName (underscores are common) write it; never starting with "-" (an ssh option).
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")
_IPV6 = re.compile(r"[0-9A-Fa-f]*:[0-9A-Fa-f:.]*(%[A-Za-z0-9_.-]+)?")  # ::1, fe80::1%eth0
# What a hostlist expression adds to names: ranges in brackets, lists, whitespace.
_EXPR_CHARS = re.compile(r"[A-Za-z0-9._\-\[\],:%\s]*")


def check_host_name(name: str, where: str = "host name") -> str:
    """*name* itself if it is a host name diag may use (see the module doc); InventoryError
    naming the offending character otherwise."""
    if _HOST_NAME.fullmatch(name) or (len(name) <= 64 and _IPV6.fullmatch(name)):
        return name
    raise InventoryError(f"bad {where} {_shown(name)}: {_why(name)}")


def _why(text: str) -> str:
    if not text:
        return "empty"
    if text.startswith("-"):
        return "it starts with '-'"
    if len(text) > 253:
        return "longer than 253 characters"
    bad = next((ch for ch in text if not re.fullmatch(r"[A-Za-z0-9._\-\[\],:%\s]", ch)), None)
    if bad is not None:
        return (f"{bad!r} is not allowed in a host name (letters, digits, '.', '-', '_'; "
                "ranges in brackets)")
    return "not a host name (letters, digits, '.', '-', '_')"


def _shown(text: str) -> str:
    """The name as typed, shortened and with control characters escaped (it is hostile)."""
    return repr(text if len(text) <= 80 else text[:77] + "...")


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
        names.extend(expand_part(part))
    if not names:
        raise InventoryError(f"host expression {_shown(' '.join(parts))} names no host")
    return list(dict.fromkeys(names))


def expand_part(part: str, where: str = "host expression") -> list[str]:
    """One hostlist expression expanded, every character checked before expansion and every
    name after it (``check_host_name``)."""
    if not _EXPR_CHARS.fullmatch(part):
        raise InventoryError(f"bad {where} {_shown(part)}: {_why(part)}")
    try:
        names = [n for n in hostlist.expand_hostlist(part) if n]
    except hostlist.BadHostlist as exc:
        raise InventoryError(f"bad {where} {_shown(part)}: {exc}") from None
    for name in names:
        check_host_name(name, f"host name in {_shown(part)}:" if name != part else "host name")
    return names


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
    fields["name"] = check_host_name(host, "ProxyJump host")
    return fields
