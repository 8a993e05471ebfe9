"""``sinfo -N``: every node's state, drain reason and GPUs (total and in use), per node.

The scheduler probe runs ``sinfo -N -O FIELDS`` with FIELDS (one argument, split here)::

    NodeList:|,Partition:|,StateLong:|,StateComplete:|,Gres:|,GresUsed:|,CPUsState:|,
    Timestamp:|,UserLong:|,Reason:|

(both state columns map to ``state``; the later, StateComplete, wins where Slurm has it; 20.11
prints an empty, unnamed column for it instead, so StateLong's is read there)

``-O`` with a ``|`` suffix and no width prints every field whole (a fixed width would cut a
long drain reason), and the header is kept so columns are found by name, not position: an
operator's own ``sinfo -N -o '%N|%T|%E|%G'`` paste, or the default whitespace table
(``sinfo``, ``sinfo -N``), parses too. Without ``-N`` a row stands for a node-list expression,
expanded here with python-hostlist (the library the fleet uses).

States are normalised to a base state and flags, because Slurm spells the same thing several
ways: ``draining``, ``mixed+drain``, ``drng``; ``down*`` (not responding), ``idle~`` (powered
off). ``drain``/``down``/``usable`` are what the queue-idle checks need: a node whose GPUs look
idle but will take no job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import hostlist

from ._common import fail, text_lines, to_int

WHAT = "sinfo"

# Header spellings (upper-cased) -> column key. -O and -o print different headers for the
# same field (NodeHost -> HOSTNAMES, %N -> NODELIST, StateComplete -> STATECOMPLETE).
COLUMNS: dict[str, str] = {
    "NODELIST": "node", "NODE_LIST": "node", "HOSTNAMES": "hostname", "NODEHOST": "hostname",
    "PARTITION": "partition", "STATE": "state", "STATECOMPLETE": "state",
    "STATELONG": "state", "STATECOMPACT": "state", "GRES": "gres", "GRES_USED": "gres_used",
    "CPUS(A/I/O/T)": "cpus_aiot", "CPUS": "cpus", "REASON": "reason", "TIMESTAMP": "reason_time",
    "USER": "reason_user", "NODES": "nodes", "AVAIL": "avail", "TIMELIMIT": "timelimit",
    "MEMORY": "memory", "FREE_MEM": "free_mem", "AVAIL_FEATURES": "features",
    "ACTIVE_FEATURES": "active_features",
}

# Compact (%t / StateCompact) spellings -> the long names. Every spelling is Slurm's own:
# src/common/slurm_protocol_defs.c node_state_string (%T: REBOOT, FUTURE, RESUME, BLOCKED,
# CANCEL_REBOOT, EXTERNAL, UNDRAIN, DYNAMIC_*), node_state_string_compact (%t: BOOT, FUTR,
# RESM, BLOCK, CANC_R, EXT, POWRING_DN, POWERED_DN) and node_state_flag_string
# (StateComplete's "+FLAG" names: MAINTENANCE, INVALID_REG, REBOOT_REQUESTED, REBOOT_ISSUED).
# REBOOT/BOOT is a reboot requested (not yet issued); the '^' suffix or REBOOT_ISSUED is one
# slurmctld has sent (controller.c: the node is set DOWN+REBOOT_ISSUED, reason "reboot issued").
_STATE_ALIASES = {
    "alloc": "allocated", "mix": "mixed", "drng": "draining", "drain": "drained",
    "resv": "reserved", "comp": "completing", "unk": "unknown", "failg": "failing",
    "plnd": "planned", "maint": "maint", "npc": "perfctrs", "pow_dn": "powered_down",
    "pow_up": "powering_up", "inval": "inval", "boot": "reboot_pending",
    "reboot": "reboot_pending", "futr": "future", "resm": "resume", "block": "blocked",
    "canc_r": "cancel_reboot", "ext": "external", "powring_dn": "powering_down",
    "powered_dn": "powered_down", "power_up": "powering_up", "maintenance": "maint",
    "invalid_reg": "inval", "reboot_requested": "reboot_pending",
    "reboot_issued": "rebooting",
}
# Suffix symbols sinfo appends to a state, and what they mean.
_SUFFIXES = {"*": "not_responding", "~": "powered_down", "#": "powering_up",
             "!": "power_down_pending", "%": "powering_down", "$": "maint_reservation",
             "@": "reboot_pending", "^": "rebooting", "-": "planned"}
_KNOWN_BASES = {"idle", "mixed", "allocated", "drained", "draining", "down", "reserved",
                "completing", "unknown", "failing", "fail", "planned", "maint", "perfctrs",
                "powered_down", "powering_up", "powering_down", "power_down", "inval",
                "rebooting", "future", "cloud", "blocked", "no_respond", "not_responding",
                "reboot_pending", "resume", "cancel_reboot", "external", "undrain",
                "dynamic_future", "dynamic_norm", "error", "invalid"}
# Bases that take no new job whatever the flags say.
_UNUSABLE = {"drained", "draining", "down", "fail", "failing", "inval", "unknown", "maint",
             "reserved", "future", "powered_down", "powering_down", "power_down", "rebooting",
             "perfctrs", "blocked", "reboot_pending", "resume", "cancel_reboot", "external",
             "undrain", "dynamic_future", "dynamic_norm", "error", "invalid"}
_NULLS = {"", "(null)", "n/a", "none", "unknown"}


# --- a header-driven table, shared with squeue ---------------------------------------------------

def read_table(text: str, what: str, columns: Mapping[str, str],
               required: Sequence[Sequence[str]]) -> list[dict[str, str | None]]:
    """Rows of a ``|``-delimited or whitespace-aligned table whose first line names the columns.

    *columns* maps header spellings to keys; each group in *required* must have one of its keys
    present, else the text is not this tool's output. The last column keeps everything to the
    end of the line, so a reason containing ``|`` or spaces stays whole.
    """
    lines = [line.rstrip() for line in text_lines(text) if line.strip()]
    header_at = None
    for i, line in enumerate(lines[:3]):  # `sinfo -l` / `squeue -l` print a date line first
        names = _split_header(line)
        if sum(1 for n in names if n.upper() in columns) >= 2:
            header_at = i
            break
    if header_at is None:
        fail(what, "no header line naming its columns (run it without -h/--noheader)")
    header = lines[header_at]
    piped = "|" in header
    keys = [columns.get(n.upper(), n.lower()) for n in _split_header(header)]
    for group in required:
        if not any(k in keys for k in group):
            fail(what, f"no {'/'.join(group)} column in the header")
    rows: list[dict[str, str | None]] = []
    for line in lines[header_at + 1:]:
        if piped:
            body = line[:-1] if line.endswith("|") else line
            cells = body.split("|", len(keys) - 1)
        else:
            cells = line.split(None, len(keys) - 1)
        if len(cells) != len(keys):
            fail(what, f"a row has {len(cells)} field(s), the header {len(keys)}: {line[:80]!r}")
        rows.append({k: _cell(c) for k, c in zip(keys, cells, strict=True)})
    return rows


def _split_header(line: str) -> list[str]:
    if "|" in line:
        body = line[:-1] if line.endswith("|") else line
        return [c.strip() for c in body.split("|")]
    return line.split()


def _cell(text: str) -> str | None:
    text = text.strip()
    return None if text.lower() in _NULLS else text


# --- GRES ----------------------------------------------------------------------------------------

def _gres_entries(gres: str) -> list[str]:
    """``gpu:a100:4(S:0),gpu:v100:2(IDX:0,2)`` -> entries, splitting on commas outside ()."""
    out: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in gres:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth <= 0:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return [e.strip() for e in out if e.strip()]


def gres_gpus(gres: str | None) -> int | None:
    """GPUs in a GRES or TRES string; None when it cannot be read, 0 when it names no GPU.

    Spellings: ``gpu:8``, ``gpu:h100:8(S:0-1)``, ``gpu:h100:2(IDX:0-1)``,
    ``gpu:(null):1(IDX:0)``, ``gres:gpu:8`` / ``gres/gpu=8`` (TRES), ``gpu`` (one), and lists
    of them with other GRES (``gpu:4,nic:1``).
    """
    if gres is None or gres.strip().lower() in _NULLS:
        return 0
    total = 0
    for entry in _gres_entries(gres):
        entry = re.sub(r"\(.*\)$", "", entry).strip()
        entry = re.sub(r"^gres[:/]", "", entry).replace("=", ":")
        parts = entry.split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) == 1 or (len(parts) == 2 and not parts[1].isdigit()):
            total += 1  # "gpu" or "gpu:h100": one
            continue
        count = to_int(parts[-1])
        if count is None:
            return None
        total += count
    return total


# --- node states ---------------------------------------------------------------------------------

def node_state(raw: str | None) -> dict[str, Any]:
    """``mixed+drain`` / ``down*`` / ``drng`` -> base state, flags, drain, down, usable."""
    text = (raw or "").strip().lower()
    flags: list[str] = []
    while text and text[-1] in _SUFFIXES:
        flags.append(_SUFFIXES[text[-1]])
        text = text[:-1]
    base, *plus = text.split("+")
    base = _STATE_ALIASES.get(base, base)
    flags += [_STATE_ALIASES.get(f, f) if f else "completing" for f in plus]  # ALLOC+: comp
    drain = base in ("drained", "draining") or any(f in ("drain", "drained") for f in flags)
    # A node power saving is booting for a job is NOT_RESPONDING until its slurmd registers
    # (Slurm power_save.html; recorded as ``mixed+not_responding+powering_up``): booting, not
    # broken. A powered-down node (``idle~``, ``idle+powered_down``) takes jobs: Slurm resumes
    # it on demand.
    booting = base == "powering_up" or "powering_up" in flags
    # A reboot slurmctld has issued (`scontrol reboot`: DOWN+REBOOT_ISSUED, sinfo 'boot^') is
    # planned work: slurmctld does not ping such a node (ping_nodes.c) and sets it DOWN "reboot
    # timed out" itself when it is not back within ResumeTimeout (node_mgr.c) - that one is down.
    rebooting = base == "rebooting" or "rebooting" in flags
    not_responding = not booting and not rebooting and (
        "not_responding" in flags or base in ("no_respond", "not_responding"))
    down = not rebooting and (
        base in ("down", "fail") or "down" in flags or not_responding)
    # A reboot requested without ASAP leaves the node schedulable, only weighted last
    # (select/cons_tres job_test.c _set_sched_weight); ASAP adds DRAIN, which the drain says.
    usable = not drain and not down and not booting and not rebooting and (
        base not in _UNUSABLE) and not (
        {"fail", "maint", "reserved", "powering_down", "rebooting", "inval", "blocked",
         "external", "dynamic_future"} & set(flags))
    # In a maintenance reservation (Flags=MAINT): the MAINT flag (sinfo's '$' suffix, "+maint")
    # says the node's state is planned work, not a failure (Slurm reservations.html).
    maintenance = base == "maint" or "maint" in flags or "maint_reservation" in flags
    return {"state": raw.strip() if raw else None, "base_state": base or None, "flags": flags,
            "drain": drain, "down": down, "not_responding": not_responding, "usable": usable,
            "maintenance": maintenance, "rebooting": rebooting,
            "reboot_pending": base == "reboot_pending" or "reboot_pending" in flags,
            "known_state": base in _KNOWN_BASES}


def _reboot_issued(state: dict[str, Any], reason: str | None) -> dict[str, Any]:
    """A requested reboot slurmctld has sent, told by its reason: Slurm 20.11's state strings
    show no REBOOT_ISSUED ('reboot*' while the node boots), but controller.c appends " : reboot
    issued" to the reason when it sends the reboot (and " : reboot timed out" if the node is
    not back within ResumeTimeout, clearing the reboot flags)."""
    if not (state["reboot_pending"] and reason and reason.rstrip().endswith("reboot issued")):
        return state
    return {**state, "rebooting": True, "down": False, "not_responding": False}


def _user(raw: str | None) -> str | None:
    """``root(0)`` -> ``root``."""
    return raw.split("(", 1)[0].strip() or None if raw else None


def _expand(expr: str) -> list[str]:
    try:
        return list(hostlist.expand_hostlist(expr))
    except Exception:  # hostlist raises BadHostlist, and worse on odd input
        fail(WHAT, f"node list {expr[:60]!r} is not a Slurm hostlist")


# --- parse ---------------------------------------------------------------------------------------

def parse(text: str) -> dict[str, Any]:
    """Nodes (one entry per node, partitions merged), partitions, and the default partition."""
    rows = read_table(text, WHAT, COLUMNS, required=[("node", "hostname"), ("state",)])
    if not rows:
        fail(WHAT, "a header but no node rows")
    nodes: dict[str, dict[str, Any]] = {}
    partitions: dict[str, list[str]] = {}
    default_partition = None
    for row in rows:
        expr = row.get("node") or row.get("hostname")
        if not expr:
            fail(WHAT, "a row with no node name")
        state = node_state(row.get("state"))
        if not state["known_state"]:
            fail(WHAT, f"{row.get('state')!r} is not a Slurm node state")
        state = _reboot_issued(state, row.get("reason"))
        partition = row.get("partition")
        if partition and partition.endswith("*"):
            partition = partition[:-1]
            default_partition = partition
        gpus_total = gres_gpus(row.get("gres")) if "gres" in row else None
        gpus_used = gres_gpus(row.get("gres_used")) if "gres_used" in row else None
        gpus_free = (max(gpus_total - gpus_used, 0)
                     if gpus_total is not None and gpus_used is not None else None)
        cpus = (row.get("cpus_aiot") or "").split("/")
        for name in _expand(expr):
            if partition:
                partitions.setdefault(partition, [])
                if name not in partitions[partition]:
                    partitions[partition].append(name)
            if name in nodes:
                if partition and partition not in nodes[name]["partitions"]:
                    nodes[name]["partitions"].append(partition)
                continue
            nodes[name] = {
                "node": name, "partitions": [partition] if partition else [],
                **{k: v for k, v in state.items() if k != "known_state"},
                "gpus_total": gpus_total, "gpus_used": gpus_used, "gpus_free": gpus_free,
                "cpus_alloc": to_int(cpus[0]) if len(cpus) == 4 else None,
                "cpus_total": to_int(cpus[3]) if len(cpus) == 4 else to_int(row.get("cpus")),
                "reason": row.get("reason"), "reason_time": row.get("reason_time"),
                "reason_user": _user(row.get("reason_user")),
            }
    return {"nodes": list(nodes.values()), "partitions": partitions,
            "default_partition": default_partition}
