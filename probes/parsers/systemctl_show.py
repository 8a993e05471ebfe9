"""``systemctl show UNIT... [-p PROP,...]``: unit properties as ``Name=Value`` lines.

systemctl prints one block of ``Name=Value`` lines per unit named, blocks separated by an empty
line (src/systemctl/systemctl-show.c: show_one -> bus_print_all_properties). Properties come in
the order of the unit's D-Bus interfaces, not in the order ``-p`` names them, and an empty
property (``UnitFileState=`` of a unit that does not exist) is left out unless ``--all``; a
property an older systemd does not know (``NRestarts`` before v235) is simply absent. So every
unit is a map of what was printed, and nothing is assumed present.

A host without systemd as PID 1 (a container) prints no block, only systemctl's refusal
("System has not been booted with systemd as init system (PID 1). Can't operate."): that is
returned as ``error``, with no units, so a caller can tell "not measured" from "no unit".
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, text_lines

WHAT = "systemctl show"

# systemd property names are CamelCase identifiers (Id, LoadState, NRestarts, ExecMainStatus).
_PROPERTY = re.compile(r"^([A-Z][A-Za-z0-9]*)=(.*)$")
# Properties every unit type has, or every service: one of them is in any real block.
_KNOWN = {"Id", "Names", "Description", "LoadState", "ActiveState", "SubState",
          "UnitFileState", "FragmentPath", "Result", "NRestarts", "MainPID", "ExecMainStatus",
          "ExecMainPID", "Type", "Restart", "ActiveEnterTimestampMonotonic", "InvocationID"}
# What systemctl itself prints when it cannot answer.
_ERROR = re.compile(
    r"has not been booted with systemd|Failed to (?:connect to bus|get properties|list units)"
    r"|Unit \S+ could not be found|Access denied|Transport endpoint is not connected"
    r"|Unknown (?:operation|command verb)|Invalid unit name|is neither a valid invocation ID",
    re.I)


def parse(text: str) -> dict[str, Any]:
    """``units``: one {property: value} map per block, in the order printed; ``error``: what
    systemctl said instead when it printed no block (else None)."""
    units: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    errors: list[str] = []
    for raw in text_lines(text):
        line = raw.rstrip()
        if not line.strip():
            current = None  # the empty line between two units' blocks
            continue
        m = _PROPERTY.match(line)
        if m:
            if current is None:
                current = {}
                units.append(current)
            current.setdefault(m.group(1), m.group(2))
        elif _ERROR.search(line):
            errors.append(line.strip())
    if not units and not errors:
        fail(WHAT, "no 'Property=value' line and no systemctl error message")
    if units and not any(_KNOWN & set(unit) for unit in units):
        # other tools print Key=value too (scontrol); a unit always has some of these
        fail(WHAT, "no systemd unit property (Id, LoadState, ActiveState, Type, ...)")
    return {"units": units, "error": " ".join(errors)[:300] if errors and not units else None}
