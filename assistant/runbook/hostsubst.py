"""``$HOST`` in an action's command: found with its shell quoting context, substituted quoted.

A runbook action such as ``scontrol update NodeName=$HOST State=DRAIN`` runs once per host with
the host's name in place of ``$HOST``. Pasting ``shlex.quote(name)`` is only right where the
placeholder stands bare: inside ``"..."`` a quoted ``'a$(id)'`` is still expanded by the shell
(the single quotes are literal there), and inside ``'...'`` the quote closes the string and the
name's own characters run as shell syntax. So the command is scanned the way a POSIX shell
reads quotes (backslash escapes, single and double quotes), and the name is written in the form
that is literal where it stands: bare-quoted outside quotes, backslash-escaped inside double
quotes, and as ``'`` + quoted + ``'`` inside single quotes. Host names are validated long before
(``assistant.fleet.hostexpr``); this is the second lock on the same door. The validator still
flags a template that quotes ``$HOST``: the author meant something the substitution has to
guess at.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

_PLACEHOLDER = re.compile(r"\$(?:\{HOST\}|HOST(?![A-Za-z0-9_]))")


@dataclass(frozen=True)
class Placeholder:
    start: int
    end: int
    quote: str  # "" (bare), "'" or '"': the quoting the shell is in where it stands


def placeholders(command: str) -> list[Placeholder]:
    """Every ``$HOST`` / ``${HOST}`` the shell would expand (or would have, but for quotes),
    with its quoting context. An escaped ``\\$HOST`` is text, not a placeholder."""
    found: list[Placeholder] = []
    quote = ""
    i = 0
    while i < len(command):
        ch = command[i]
        if quote == "'":
            if ch == "'":
                quote = ""
            else:
                match = _PLACEHOLDER.match(command, i)
                if match:
                    found.append(Placeholder(i, match.end(), "'"))
                    i = match.end()
                    continue
            i += 1
            continue
        if ch == "\\":
            i += 2
            continue
        if ch in "'\"" and (quote == "" or ch == quote):
            quote = "" if quote else ch
            i += 1
            continue
        match = _PLACEHOLDER.match(command, i) if ch == "$" else None
        if match:
            found.append(Placeholder(i, match.end(), quote))
            i = match.end()
            continue
        i += 1
    return found


def quoted_for(name: str, quote: str) -> str:
    """*name* written so the shell reads it literally in the given quoting context."""
    if quote == '"':
        return re.sub(r'(["\\\\$`])', r"\\\1", name)
    if quote == "'":
        return "'" + shlex.quote(name) + "'"
    return shlex.quote(name)


def substitute_host(command: str, name: str) -> str:
    """*command* with every ``$HOST`` replaced by *name*, literal wherever it stands."""
    out: list[str] = []
    done = 0
    for place in placeholders(command):
        out.append(command[done:place.start])
        out.append(quoted_for(name, place.quote))
        done = place.end
    out.append(command[done:])
    return "".join(out)
