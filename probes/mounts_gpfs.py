"""IBM Storage Scale (GPFS) node health for the mounts probe, read from ``mmhealth node show -Y``.

mmhealth is read-only: it prints what the node's system health monitor (mmsysmon) last found,
one colon-separated line per component and entity (``mmhealth:State:...``) and one per active
event (``mmhealth:Event:...``), each kind announced by a ``HEADER`` line that names its fields
(IBM Storage Scale Command and Programming Reference, "mmhealth command", -Y: "Displays the
command output in a parseable format with a colon (:) as a field delimiter"; fields as printed
by 4.2 to 5.2: version, reserved, reserved, node, component, entityname, entitytype, status,
laststatuschange, ... and event, arguments, activesince, identifier, ishidden, ...). Fields
are found by their HEADER name, not by position: later releases append fields (lastcheck,
message, eventtype, severity), and their timestamps print colons unescaped ("2025-12-31
12:13:53"), so only the fields before the first timestamp are read. The section runs only
where mmhealth exists (in PATH or /usr/lpp/mmfs/bin); a host without GPFS is not measured,
never a fault.

Facts (None: GPFS not installed on the host, or mmhealth not read):
``gpfs_node_status`` (the NODE component's status), ``gpfs_daemon_status`` (the GPFS
component's: FAILED when the daemon is down, lost quorum or was expelled: gpfs_down,
quorum_down, gpfs_unresponsive), ``gpfs_events`` (``{component, name, event}`` of each active
event), ``gpfs_filesystems`` (``{name, status, events, unmounted, corrupt}`` per FILESYSTEM entity;
``unmounted``: an unmount event active on it, or FAILED with no event shown; ``corrupt``: an
fserr* event active on it, the file system's on-disk structure),
``gpfs_unmounted`` (sorted names of those), ``gpfs_unmounted_count``.
"""

from __future__ import annotations

import re
from typing import Any

MMHEALTH = "/usr/lpp/mmfs/bin/mmhealth"
MMHEALTH_TIMEOUT_S = 10  # the local monitor answers in seconds; the statfs (8 s) and lctl (5 s)
# sections share the probe's 30 s, so a wedged monitor is not measured before the probe ends
MAX_LINES = 600

GPFS_COMMAND = (
    "m=$(command -v mmhealth 2>/dev/null); "
    f"[ -z \"$m\" ] && [ -x {MMHEALTH} ] && m={MMHEALTH}; "
    "if [ -n \"$m\" ]; then "
    f"o=$(timeout {MMHEALTH_TIMEOUT_S} \"$m\" node show -Y 2>&1 </dev/null); r=$?; "
    f"printf '%s\\n' \"$o\" | head -n {MAX_LINES} | cut -c1-400; echo \"mmhealth_rc $r\"; "
    "elif grep -q ' - gpfs ' /proc/self/mountinfo 2>/dev/null; then echo 'mmhealth missing'; "
    "else echo 'no gpfs'; fi"
)

# File system events that say the file system is not mounted (usable) on this node (IBM
# Storage Scale Problem Determination Guide, "File system events": fs_forced_unmount, STATE_
# CHANGE ERROR, "The file system {0} was {1} forced to unmount"; unmounted_fs_check, "The file
# system {0} is probably needed, but not mounted"; stale_mount, "Found stale mounts for the
# file system {0}").
UNMOUNT_EVENTS = frozenset({"fs_forced_unmount", "unmounted_fs_check", "stale_mount"})
# File system events that say its on-disk structure is corrupt (Problem Determination Guide,
# "File system events": fserrallocblock, fserrbadaclref, ... fserrinvalid, each STATE_CHANGE
# ERROR "The following error occurred for the file system {0}: ErrNo={1}, Msg={2}", cause "A
# file system corruption is detected"; "MMFS_FSSTRUCT": cleared with "mmhealth event resolve
# fserrinvalid <fsname>" once mmfsck repaired it). Every name of the family starts "fserr".
CORRUPTION_PREFIX = "fserr"
_RC = re.compile(r"^mmhealth_rc (\d+)\s*$")


def _fields(header: list[str], row: list[str]) -> dict[str, str]:
    return {name: row[i] for i, name in enumerate(header) if i < len(row) and name}


def parse_gpfs(text: str, facts: dict[str, Any]) -> None:
    """Fill *facts* from the gpfs section (facts['errors']['gpfs'] when it was not read)."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if lines and lines[0] == "no gpfs":
        return  # GPFS not installed: not applicable, every fact stays None
    if lines and lines[0] == "mmhealth missing":
        facts["errors"]["gpfs"] = "GPFS is mounted but mmhealth is not installed"
        return
    rc = next((int(m.group(1)) for ln in lines if (m := _RC.match(ln))), None)
    headers: dict[str, list[str]] = {}
    states: list[dict[str, str]] = []
    events: list[dict[str, str]] = []
    for line in lines:
        parts = line.split(":")
        if len(parts) < 4 or parts[0] != "mmhealth" or parts[1] not in ("State", "Event"):
            continue
        if parts[2] == "HEADER":
            headers[parts[1]] = parts
        elif parts[1] in headers:
            (states if parts[1] == "State" else events).append(_fields(headers[parts[1]], parts))
    if rc == 124:
        facts["errors"]["gpfs"] = (f"mmhealth did not answer within {MMHEALTH_TIMEOUT_S} s "
                                   "(diag's limit): not measured")
        return
    if not states:
        other = [ln for ln in lines if not _RC.match(ln)]
        facts["errors"]["gpfs"] = (other[0] if other else
                                   f"mmhealth printed no state (exit {rc})")[:200]
        return
    facts["gpfs_events"] = [{"component": e.get("component"), "name": e.get("entityname"),
                             "event": e.get("event")} for e in events]
    for s in states:
        if s.get("component") == "NODE" and s.get("entitytype") == "NODE":
            facts["gpfs_node_status"] = s.get("status")
        elif s.get("component") == "GPFS" and s.get("entitytype") == "NODE":
            facts["gpfs_daemon_status"] = s.get("status")
    filesystems: list[dict[str, Any]] = []
    for s in states:
        if s.get("component") != "FILESYSTEM" or s.get("entitytype") != "FILESYSTEM":
            continue
        name = s.get("entityname") or ""
        active = sorted({str(e.get("event")) for e in events
                         if e.get("component") == "FILESYSTEM" and e.get("entityname") == name})
        # FAILED with an unmount event, or with no event shown; FAILED for a corruption event
        # (fserr*: the file system's metadata, the storage team's) is not an unmount here
        unmounted = bool(UNMOUNT_EVENTS & set(active)) or (s.get("status") == "FAILED"
                                                            and not active)
        corrupt = any(e.startswith(CORRUPTION_PREFIX) for e in active)
        filesystems.append({"name": name, "status": s.get("status"), "events": active,
                            "unmounted": unmounted, "corrupt": corrupt})
    facts["gpfs_filesystems"] = filesystems
    gone = sorted(str(f["name"]) for f in filesystems if f["unmounted"])
    facts.update(gpfs_unmounted=gone, gpfs_unmounted_count=len(gone))


GPFS_FACTS = ("gpfs_node_status", "gpfs_daemon_status", "gpfs_events", "gpfs_filesystems",
              "gpfs_unmounted", "gpfs_unmounted_count")
