"""The mounts probe's facts: mountinfo lines, statfs answers and Lustre imports read back.

Per mount (``mounts``, one per mount point, the visible one where mounts are stacked):
``mountpoint``, ``fstype``, ``source``, ``options`` (the per-mount options as printed),
``readonly`` (the mount or its superblock is read-only), ``network`` (a network, parallel or
FUSE filesystem whose statfs goes to a server or a daemon), ``dev`` (major:minor);
``statfs_ms`` (how long ``stat -f`` took; None when not asked or not timed), ``hung`` (True:
it did not answer within the timeout, or had not when the section gave up waiting, blocked in
the kernel or asleep waiting for its server; False: it answered, even with an error; None: not
asked, or still runnable at the limit: a busy host, not a hung mount), ``stat_state`` (the
process state it was left in, when it did not finish), ``stat_rc`` and ``stat_error`` (the error it
answered with: ``Stale file handle``, ``Transport endpoint is not connected``, ...),
``size_bytes``, ``avail_bytes``, ``used_pct`` (as df computes Use%: used / (used + avail)),
``inodes_used_pct`` (None when the filesystem reports no inode count), ``automount`` (the
mount point of the autofs trigger it was mounted on or under; None for a static mount).

Host: ``network_mount_count``; ``hung_mounts``, ``readonly_mounts`` (sorted mount points, for
``drift`` against the fleet: a mount hung or read-only on this host only; automounted mounts
are left out of the read-only list, a map's ``-ro`` entry being mounted only on the hosts that
used it, and an automounted mount is hung under its trigger's mount point),
``hung_mount_count``, ``readonly_mount_count``; ``stale_mounts``, ``stale_mount_count`` (the
mount points whose statfs answered ESTALE, an automounted one by its trigger: compared with
the fleet, since a server that replaced its export, or a GPFS file system the cluster unmounted,
leaves every client stale at once),
``network_mountpoints`` (sorted, Kubernetes pod volumes left out: they follow pod placement;
autofs trigger points, mounted or not, in place of the mounts the automounter made);
``lustre``: one entry per OSC/MDC import (``device``, ``type``, ``target``, ``state``,
``active``: False when the administrator deactivated it, None when not read),
``lustre_unhealthy`` (devices whose import is neither FULL nor IDLE, deactivated ones left out),
``lustre_unhealthy_count``; the IBM Storage Scale facts of mounts_gpfs.py (``gpfs_*``) and the
WEKA client containers of mounts_weka.py (``weka_*``).
"""

from __future__ import annotations

import re
from typing import Any

from probes.base import split_sections
from probes.mounts_gpfs import GPFS_FACTS, parse_gpfs
from probes.mounts_weka import WEKA_FACTS, parse_weka
from probes.parsers import ParseError
from probes.parsers.proc_mountinfo import parse_line, unescape

# Network and parallel filesystems by their kernel type name (/proc/filesystems): a statfs on
# one of them is answered by a server. "fuse" (no subtype) is judged by its source.
NETWORK_FS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "smbfs", "wekafs", "ceph",
    "glusterfs", "virtiofs", "9p", "afs", "panfs", "pvfs2", "orangefs", "gfs2", "ocfs2",
    "davfs", "fuse"})
LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs"})
# FUSE subtypes that serve something local (a container's /proc view, desktop portals, snaps,
# rootless overlay): no server behind them.
LOCAL_FUSE = frozenset({"lxcfs", "gvfsd-fuse", "portal", "doc", "xdg-document-portal",
                        "snapfuse", "squashfuse", "fuse-overlayfs", "rofiles-fuse", "appimaged",
                        "flatpak"})
HUNG_RC = frozenset({124, 137})  # timeout(1): timed out; timed out and needed KILL
HEALTHY_LUSTRE = frozenset({"FULL", "IDLE"})  # IDLE: 2.12+ idle disconnect, reconnects on use
_STAT = re.compile(r"^stat (\d+) (\S+) (.+)$")
_RESULT = re.compile(r"^result (\d+) (-?\d+) (\S*) (\S*) ?(.*)$")
_PENDING = re.compile(r"^pending (\d+)(?: ([A-Za-z?]))?\s*$")
_STATE = re.compile(r"^diag:state=([A-Za-z?])")
# A statfs still running at the limit, by its process state (probes/hangstate.py): blocked in
# the kernel (D) or asleep waiting for its server or daemon (S) is the mount not answering;
# runnable (R) waits for a CPU on a busy host, which says nothing of the mount.
MOUNT_WAIT_STATES = frozenset({"D", "S"})
_LUSTRE_DEV = re.compile(r"^(osc|mdc)\.(\S+?)\.state=(.*)$")
_CURRENT = re.compile(r"^\s*current_state:\s*(\S+)")
# lctl set_param osc.<target>-*.active=0 (or conf_param <target>.osc.active=0): a target the
# administrator took out of service on the clients; I/O to it fails at once and its import is
# not expected to be FULL (Lustre Operations Manual, "Deactivating an OST"/"Removing an OST").
_LUSTRE_ACTIVE = re.compile(r"^(osc|mdc)\.(\S+?)\.active=\s*([01])\s*$")
_TARGET = re.compile(r"^(.+?-(?:OST|MDT)[0-9a-fA-F]{4})")
_POD_VOLUME = re.compile(r"^/var/lib/kubelet/")
_STALE = re.compile(r"Stale (NFS )?file handle")  # strerror(ESTALE); glibc before 2.18: "NFS"
# Which mountinfo lines the probe reads (its awk selection in mounts.py prints only these, and
# the parser applies the same rule, so a raw `cat /proc/self/mountinfo` reads alike): every
# network filesystem (FUSE included) outside the kernel's and the OS's trees, local data mounts
# (a whole local filesystem, not a bind of a subdirectory, outside those trees and the container
# runtimes'), and tmpfs at /tmp and /dev/shm. Left out are mounts read-only by design: squashfs
# snaps and image layers, ISO images, read-only binds, and /usr, which immutable distributions
# mount read-only (systemd file-hierarchy(7): "/usr ... Vendor-supplied operating system
# resources. Usually read-only"); no job writes its checkpoints there.
SKIP_TREES = r"^/(proc|sys|run|snap|boot|dev|usr)(/|$)"
SKIP_RUNTIME = r"^/var/lib/(kubelet|docker|containers|lxc)/"
# autofs triggers (autofs(5) maps, systemd.automount(5) units) outside those trees are read as
# the paths the host is configured to serve, mounted or not; left out is /efi, which
# systemd-gpt-auto-generator(8) automounts for the EFI system partition (local, not shared).
SKIP_AUTOFS = r"^/efi(/|$)"
_SKIP_TREES = re.compile(SKIP_TREES)
_SKIP_RUNTIME = re.compile(SKIP_RUNTIME)
_SKIP_AUTOFS = re.compile(SKIP_AUTOFS)


def is_network(fstype: str, source: str) -> bool:
    if fstype.startswith("fuse."):
        return fstype[5:] not in LOCAL_FUSE
    if fstype == "fuse":
        return source not in LOCAL_FUSE
    return fstype in NETWORK_FS


def selected(fstype: str, root: str, mountpoint: str) -> bool:
    """Whether the probe reads this mount (SKIP_TREES above; the same rule as its awk)."""
    if mountpoint != "/dev/shm" and _SKIP_TREES.match(mountpoint):
        return False
    if fstype in NETWORK_FS or fstype.startswith("fuse."):
        return True
    if _SKIP_RUNTIME.match(mountpoint):
        return False
    if fstype in LOCAL_FS and (root == "/" or mountpoint == "/"):
        return True
    return fstype == "tmpfs" and mountpoint in ("/tmp", "/dev/shm")


def is_trigger(fstype: str, mountpoint: str) -> bool:
    """Whether the probe reads this mount as an autofs trigger (the same rule as its awk)."""
    return fstype == "autofs" and not (_SKIP_TREES.match(mountpoint) or
                                       _SKIP_RUNTIME.match(mountpoint) or
                                       _SKIP_AUTOFS.match(mountpoint))


def _mounts(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The mounts by mount point, and the mount points of the top autofs triggers (a map's own
    mount point; the offset triggers the automounter adds under an entry it mounted, as for
    the -hosts map or a multi-mount entry, appear only after an access and are left out)."""
    by_point: dict[str, dict[str, Any]] = {}
    triggers: dict[int, str] = {}
    up: dict[int, int] = {}  # mount id -> parent id, of every line read
    ids: dict[str, int] = {}
    for line in text.splitlines():
        m = parse_line(line.rstrip())
        if m is None:
            continue
        up[m["mount_id"]] = m["parent_id"]
        if is_trigger(m["fstype"], m["mountpoint"]):
            triggers[m["mount_id"]] = m["mountpoint"]
            continue
        if not selected(m["fstype"], m["root"], m["mountpoint"]):
            continue  # not printed by the probe's selection (in a raw mountinfo paste)
        by_point.pop(m["mountpoint"], None)  # the last of stacked mounts is the visible one
        by_point[m["mountpoint"]] = {
            "mountpoint": m["mountpoint"], "fstype": m["fstype"], "source": m["source"],
            "options": m["options"], "readonly": m["readonly"],
            "network": is_network(m["fstype"], m["source"]), "dev": m["dev"],
            "automount": None, "statfs_ms": None, "hung": None, "stat_rc": None,
            "stat_error": None,
            "size_bytes": None, "avail_bytes": None, "used_pct": None, "inodes_used_pct": None}
        ids[m["mountpoint"]] = m["mount_id"]

    def top_trigger(mount_id: int) -> str | None:
        """The mount point of the highest trigger above *mount_id* (None: no trigger)."""
        found, seen = None, set()
        while mount_id in up and mount_id not in seen:
            seen.add(mount_id)
            mount_id = up[mount_id]
            found = triggers.get(mount_id, found)
        return found

    for point, mount in by_point.items():  # mounted by the automounter on (or under) a trigger
        mount["automount"] = top_trigger(ids[point])
    return list(by_point.values()), [p for i, p in triggers.items() if top_trigger(i) is None]


def _int(value: str) -> int | None:
    return int(value) if re.fullmatch(r"\d+", value or "") else None


# stat -f prints the free inodes (%d, f_ffree) signed (coreutils stat.c: out_int) and the total
# (%c, f_files) unsigned; a filesystem with no inode limit answers f_ffree = -1 (CephFS's
# ceph_statfs, many FUSE daemons) and its count is unknown, not the whole answer unreadable.
_NO_COUNT = 1 << 63


def _answer(rc: int, t0: str, t1: str, out: str) -> dict[str, Any]:
    a, b = _int(t0), _int(t1)
    answer: dict[str, Any] = {"stat_rc": rc, "hung": rc in HUNG_RC,
                              "statfs_ms": round((b - a) / 1e6, 1) if a and b and b >= a
                              else None}
    words = out.split()
    nums = [n for n in (_int(v) for v in words[:5]) if n is not None]
    ffree = int(words[5]) if len(words) == 6 and re.fullmatch(r"-?\d+", words[5]) else None
    if rc == 0 and len(nums) == 5 and ffree is not None:
        bsize, blocks, bfree, bavail, files = nums
        used = blocks - bfree
        answer.update(size_bytes=bsize * blocks, avail_bytes=bsize * bavail)
        if used + bavail > 0:
            answer["used_pct"] = round(100.0 * used / (used + bavail), 1)
        if 0 < files < _NO_COUNT and 0 <= ffree <= files:
            answer["inodes_used_pct"] = round(100.0 * (files - ffree) / files, 1)
    elif rc in HUNG_RC and (state := _STATE.match(out)):
        answer.update(_waiting(state.group(1)))
    elif rc in (125, 126, 127):
        answer["hung"] = None  # timeout or stat could not run: nothing was asked
        answer["stat_error"] = out.strip()[:160] or f"exit status {rc}"
    elif rc != 0 and not answer["hung"]:
        answer["stat_error"] = re.sub(r"^stat: cannot read file system information for "
                                      r"'[^']*': ", "", out.strip())[:160] or f"exit {rc}"
    return answer


def _waiting(state: str) -> dict[str, Any]:
    """A statfs the section gave up on, read by its process state (MOUNT_WAIT_STATES)."""
    if state in MOUNT_WAIT_STATES:
        return {"hung": True, "stat_state": state}
    return {"hung": None, "stat_state": state,
            "stat_error": f"still running at the limit in state {state} (runnable: waiting for "
                          "a CPU on a busy host, not for the filesystem): not measured"
            if state == "R" else f"ended at the limit in state {state}: not measured"}


def _statfs(text: str, mounts: list[dict[str, Any]]) -> None:
    targets: dict[int, tuple[str, str]] = {}
    answers: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if m := _STAT.match(line):
            targets[int(m.group(1))] = (m.group(2), unescape(m.group(3).strip()))
        elif (m := _RESULT.match(line)) and int(m.group(1)) in targets:
            dev = targets[int(m.group(1))][0]
            answers[dev] = _answer(int(m.group(2)), m.group(3), m.group(4), m.group(5))
        elif (m := _PENDING.match(line)) and int(m.group(1)) in targets:
            dev = targets[int(m.group(1))][0]
            # no state (an older diag, or the process already gone): hung, as it always read
            answers[dev] = {"hung": True, "stat_rc": None,
                            **(_waiting(m.group(2)) if m.group(2) else {})}
    for mount in mounts:  # one statfs per filesystem answers for each of its mount points
        if mount["dev"] in answers:
            mount.update(answers[mount["dev"]])


def _lustre(text: str, facts: dict[str, Any]) -> None:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].strip() == "no lustre mounts":
        facts.update(lustre=[], lustre_unhealthy=[], lustre_unhealthy_count=0)
        return
    if lines and lines[0].strip() == "lctl missing":
        facts["missing"].append("lctl")
        return
    imports: list[dict[str, Any]] = []
    active: dict[str, bool] = {}
    for line in lines:
        if m := _LUSTRE_ACTIVE.match(line.strip()):
            active[m.group(2)] = m.group(3) == "1"
        elif m := _LUSTRE_DEV.match(line.strip()):
            device = m.group(2)
            target = _TARGET.match(device)
            imports.append({"device": device, "type": m.group(1),
                            "target": target.group(1) if target else None, "state": None})
            if c := _CURRENT.match(m.group(3)):  # short value printed on the same line
                imports[-1]["state"] = c.group(1)
        elif (m := _CURRENT.match(line)) and imports and imports[-1]["state"] is None:
            imports[-1]["state"] = m.group(1)
    if not imports:
        facts["errors"]["lustre"] = (lines[0] if lines else "lctl printed no import")[:200]
        return
    for imp in imports:
        imp["active"] = active.get(imp["device"])
    facts["lustre"] = imports
    bad = [i["device"] for i in imports
           if i["state"] not in HEALTHY_LUSTRE and i["active"] is not False]
    facts["lustre_unhealthy"] = bad
    facts["lustre_unhealthy_count"] = len(bad)


def _served(network: list[dict[str, Any]], triggers: list[str]) -> list[str]:
    """The shared paths the host is configured to serve, for the fleet comparison: its network
    mounts, Kubernetes pod volumes left out (they follow pod placement), and its autofs
    triggers in place of what the automounter mounted on or under them: autofs(5) mounts a
    map's entry on first access and unmounts it after its idle timeout, so which of them are
    mounted differs between hosts that are configured alike."""
    static = {m["mountpoint"] for m in network
              if m["automount"] is None and not _POD_VOLUME.match(m["mountpoint"])}
    return sorted(static | set(triggers))


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "mounts" not in sections:
        raise ParseError("mounts: no mounts section (not the output of the mounts probe)")
    facts: dict[str, Any] = {
        "mounts": [], "network_mount_count": None, "hung_mounts": None,
        "hung_mount_count": None, "readonly_mounts": None, "readonly_mount_count": None,
        "stale_mounts": None, "stale_mount_count": None,
        "network_mountpoints": None,
        "lustre": None, "lustre_unhealthy": None, "lustre_unhealthy_count": None,
        **dict.fromkeys(GPFS_FACTS + WEKA_FACTS), "missing": [], "errors": {}}
    for name in ("mounts", "statfs", "lustre"):
        sec = sections.get(name)
        if sec is None or sec.missing:
            facts["missing"].append(name)
    mounts_sec = sections["mounts"]
    if mounts_sec.missing:
        return facts
    if mounts_sec.rc not in (0, None) or not mounts_sec.text.strip():
        facts["errors"]["mounts"] = (mounts_sec.text.strip().splitlines() or
                                     ["/proc/self/mountinfo gave no mount"])[0][:200]
        return facts
    mounts, triggers = _mounts(mounts_sec.text)
    statfs = sections.get("statfs")
    if statfs is not None and not statfs.missing:
        if statfs.text.startswith("statfs_error"):
            facts["errors"]["statfs"] = statfs.text.strip()[len("statfs_error "):][:200]
        else:
            _statfs(statfs.text, mounts)
    network = [m for m in mounts if m["network"]]
    # an automounted entry by its trigger: which users' homes are mounted differs by host
    hung = sorted({m["automount"] or m["mountpoint"] for m in mounts if m["hung"]})
    stale = sorted({m["automount"] or m["mountpoint"] for m in mounts
                    if _STALE.search(m["stat_error"] or "")})
    facts.update(
        mounts=mounts, network_mount_count=len(network), hung_mounts=hung,
        hung_mount_count=len(hung), stale_mounts=stale, stale_mount_count=len(stale),
        readonly_mounts=sorted(m["mountpoint"] for m in mounts if m["readonly"]
                               and m["automount"] is None),
        readonly_mount_count=sum(1 for m in mounts if m["readonly"] and m["automount"] is None),
        network_mountpoints=_served(network, triggers))
    lustre = sections.get("lustre")
    if lustre is not None and not lustre.missing:
        _lustre(lustre.text, facts)
    gpfs = sections.get("gpfs")  # absent in recordings older than the section: not measured
    if gpfs is not None and not gpfs.missing:
        parse_gpfs(gpfs.text, facts)
    weka = sections.get("weka")
    if weka is not None and not weka.missing:
        parse_weka(weka.text, facts)
    return facts
