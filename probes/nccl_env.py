"""NCCL's environment variables read exactly as NCCL reads them.

Most NCCL trouble on a healthy fabric is a variable that does not mean what its author
thought. NCCL's rules (its "Environment Variables" docs and src/misc/utils.cc, src/os/linux.cc,
src/transport/net_ib/init.cc):

- NCCL_SOCKET_IFNAME and NCCL_IB_HCA are lists of *prefixes*: ``mlx5_1`` also selects mlx5_10
  to mlx5_17, ``eth`` every ethN. A leading ``^`` excludes the listed names, a leading ``=``
  matches names exactly, and they combine only in that order: ``^=docker0``. NCCL takes the
  ``^`` first, then the ``=``; written ``=^mlx5_8`` the ``^`` is part of the name, which
  matches no device. ``name:port`` restricts an HCA to one port.
- A user list replaces NCCL's own choice entirely: NCCL_SOCKET_IFNAME=^docker0 leaves ``lo``
  eligible, and NCCL takes interfaces in the kernel's order, where lo comes first (NCCL's
  default, used only when the variable is unset, skips docker and lo). A value of one character
  is ignored (socket.cc: ``strlen(env) > 1``).
- The list only filters. Which GPU uses which NIC is decided by NCCL's topology search (PCI
  distance), never by the order of NCCL_IB_HCA; NCCL_TOPO_FILE describes a topology NCCL cannot
  detect.
- Other variables are read by value (probes/nccl_env.yaml): a level word NCCL does not know
  (NCCL_P2P_LEVEL=PCI) is ignored, a word where NCCL expects a number (NCCL_IB_DISABLE=true)
  is read as its leading number or 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from probes import shipped

TABLE_FILE = Path(__file__).with_name("nccl_env.yaml")
# A whole value strtoll(value, NULL, 0) reads completely: decimal, 0x hex, 0 octal.
_CLEAN_INT = re.compile(r"^\s*[+-]?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)\s*$")
_LEADING_INT = re.compile(r"^\s*([+-]?(?:0[xX][0-9a-fA-F]+|\d+))")

Entry = tuple[str, int | None]  # (name prefix, port or None)


@cache
def table() -> dict[str, Any]:
    return dict(shipped.data(TABLE_FILE))


# --- NCCL's list syntax ----------------------------------------------------------------------

def nccl_list(spec: str) -> tuple[bool, bool, list[Entry]]:
    """NCCL's interface/HCA list as NCCL parses it: (exclude '^', exact '=', [(name, port)]).

    Only one ``^`` then one ``=`` are prefixes; anything after them belongs to the first name
    (so ``=^mlx5_8`` is the exact name "^mlx5_8").
    """
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    entries: list[Entry] = []
    for item in spec.split(","):
        name, _, port = item.partition(":")
        if name:  # parseStringList skips empty names
            entries.append((name, int(port) if port.strip().isdecimal() else None))
    return exclude, exact, entries


def hit(name: str, port: int | None, entry: Entry, exact: bool) -> bool:
    """Whether device/interface *name* (and *port*) matches one list *entry*."""
    ref, ref_port = entry
    named = name == ref if exact else name.startswith(ref)  # NCCL matches prefixes by default
    return named and (ref_port is None or port is None or ref_port == port)


def selects(spec: str, name: str, port: int | None = None) -> bool:
    """Whether the list *spec* lets NCCL use *name* (and *port*)."""
    exclude, exact, entries = nccl_list(spec)
    matched = any(hit(name, port, e, exact) for e in entries)
    return not matched if exclude else matched


def ifname_selection(spec: str, interfaces: list[dict[str, Any]]) -> list[str]:
    """The up interfaces with an address that NCCL_SOCKET_IFNAME=*spec* selects, lo excepted
    (NCCL may select it, but it never reaches another host)."""
    usable = [i for i in interfaces if i["up"] and i["addrs"]]
    return [i["name"] for i in usable if i["name"] != "lo" and selects(spec, i["name"])]


def _reversed_prefixes(spec: str) -> str | None:
    if spec.startswith("=^"):
        return (f"'{spec}' puts '=' before '^': NCCL reads the '^' as part of the name, so "
                f"nothing matches; to exclude write '^={spec[2:]}'")
    return None


def hca_problems(spec: str, hcas: list[dict[str, Any]]) -> list[str]:
    """What makes NCCL_IB_HCA=*spec* unusable on a host with *hcas* (empty: nothing)."""
    exclude, exact, entries = nccl_list(spec)
    if exclude:
        left = [h for h in hcas if not any(hit(h["name"], h["port"], e, exact) for e in entries)]
        if not any(h["state"] == "ACTIVE" for h in left):
            return [f"'{spec}' excludes every HCA with an active port"]
        return []
    problems = []
    reversed_note = _reversed_prefixes(spec)
    for entry in entries:
        label = entry[0] + (f":{entry[1]}" if entry[1] is not None else "")
        matched = [h for h in hcas if hit(h["name"], h["port"], entry, exact)]
        if not matched:
            problems.append(reversed_note if reversed_note and entry == entries[0]
                            else f"{label}: no such HCA/port")
        elif not any(h["state"] == "ACTIVE" for h in matched):
            problems.append(f"{label}: port " + ", ".join(
                f"{h['name']}:{h['port']} {h['state']}" for h in matched[:4]))
    return problems


def list_misreadings(var: str, spec: str, names: list[str]) -> list[str]:
    """Ways NCCL reads list *spec* differently from how it reads to a person, given the device
    or interface *names* of the host (problems that break selection are reported elsewhere)."""
    notes = []
    if var == "NCCL_SOCKET_IFNAME" and len(spec) <= 1:
        notes.append(f"{var}='{spec}': NCCL ignores a value of one character and picks the "
                     "interface itself")
        return notes
    if (note := _reversed_prefixes(spec)) and var == "NCCL_SOCKET_IFNAME":
        notes.append(f"{var}={note}")
    exclude, exact, entries = nccl_list(spec)
    if not exact:
        for name, port in entries:
            wider = sorted({n for n in names if n != name and n.startswith(name)})
            if name in names and wider:
                verb = "excludes" if exclude else "selects"
                notes.append(f"{var}: '{name}' is a prefix, so it also {verb} "
                             f"{', '.join(wider[:6])}; write '{'^' if exclude else ''}="
                             f"{name}{f':{port}' if port else ''}' for that one only")
    if var == "NCCL_SOCKET_IFNAME" and exclude and "lo" in names \
            and not any(hit("lo", None, e, exact) for e in entries):
        notes.append(f"{var}='{spec}' leaves lo eligible: a user list replaces NCCL's own "
                     "choice (which skips lo), and NCCL takes interfaces in kernel order, lo "
                     f"first; write '{spec},lo'")
    return notes


# --- values ----------------------------------------------------------------------------------

def value_misreadings(env: Mapping[str, str]) -> list[str]:
    """NCCL_* values NCCL ignores or reads as something else (probes/nccl_env.yaml)."""
    data = table()
    notes = []
    levels = data["levels"]
    for var in levels["variables"]:
        value = env.get(var)
        if value is None or value in levels["words"] or value[:1].isdigit():
            continue
        hint = f" (did you mean {value.upper()}?)" if value.upper() in levels["words"] else ""
        notes.append(f"{var}={value} is not a level NCCL knows ({', '.join(levels['words'])} or "
                     f"0-5); NCCL ignores it and keeps its default{hint}")
    for var in data["integers"]:
        value = env.get(var)
        if value is None or value == "" or _CLEAN_INT.match(value):
            continue
        m = _LEADING_INT.match(value)
        read = int(m.group(1), 0) if m and not re.match(r"^\s*[+-]?0\d", m.group(1)) else 0
        notes.append(f"{var}={value} is not a number: NCCL reads it as {read}")
    for var, words in data["choices"].items():
        value = env.get(var)
        if value is not None and value not in words:
            notes.append(f"{var}={value} is not one of {', '.join(words)}: NCCL ignores it")
    return notes
