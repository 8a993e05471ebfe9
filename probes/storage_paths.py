"""Whether a host's block and filesystem errors are those of a remote volume that lost every
path (the storage's symptom), for the kernel probe's ``nvmeof_lost_errors_only`` fact.

Native NVMe multipath: when every controller of a namespace is gone, the head fails each bio
(drivers/nvme/host/multipath.c nvme_ns_head_submit_bio: ``dev_warn_ratelimited(disk_to_dev(
head->disk), "no available path - failing I/O")``, printed "block nvme1n1: ..."; before the
rename, 4.15 to 5.x: "no path - failing I/O"), and what sits on the namespace fails next:
fs/buffer.c "Buffer I/O error on dev nvme1n1, logical block 0, async page read", ext4
"EXT4-fs error (device nvme1n1): ..." and "Remounting filesystem read-only", XFS "XFS
(nvme1n1): log I/O error -5" and "Log I/O Error (0x2) detected at xlog_ioend_work ...
Shutting down filesystem" (recorded in blktests runs on linux-nvme, e.g. nvme/0xx with the
target removed).

device-mapper multipath (drivers/md/dm-mpath.c): fail_path prints ``DMWARN("%s: Failing path
%s.", dm_table_device_name(table), path->dev->name)``, "device-mapper: multipath: 254:0:
Failing path 8:16." (older kernels without the map's name), and reinstate_path "Reinstating
path". The map's name is its dev_t (drivers/md/dm.c alloc_dev: format_dev_t(md->name,
MKDEV(_major, minor)) while the disk is "dm-%d" of the same minor), so "254:0" is dm-0; a
path is named by dev_t too, and a SCSI disk's dev_t gives its name (drivers/scsi/sd.c
sd_major / sd_format_disk_name: 8:16 is sdb). multipath_end_io fails the path on a path error
and requeues the I/O on another path while one is valid: an error reaches the dm device (and
the filesystem on it) only when no valid path is left. The loss is remote when the log says
the transport under the paths went away: an NVMe-oF controller torn down (rdma.c / tcp.c /
fc.c, the storage-nvmeof-path-lost lines) for NVMe paths (major 259), an iSCSI session whose
recovery timed out (scsi_transport_iscsi.c, " session4: session recovery timed out after 120
secs", then "sd 6:0:0:0: rejecting I/O to offline device" and "I/O error, dev sdf") or an FC
remote port past dev_loss_tmo (scsi_transport_fc.c, "rport-4:0-0: blocked FC remote port time
out: removing target and saving binding") for SCSI paths.

The fact is true when every block/filesystem error the catalogue would raise
(kernel-block-io-error, kernel-fs-readonly, kernel-fs-corruption) is explained: it names a
native head that printed "no ... path - failing I/O" before it; or a SCSI path of a multipath
map that failed, after its iSCSI session or FC port was lost; or a dm device that is such a
map, with failed paths all remote; or another dm device (an LVM volume, which the kernel log
does not tie to what is under it) while a remote volume has no path left. The errors of a
failing local disk under a volume name that disk and stay unexplained, and no local NVMe
controller may have gone down (kernel-nvme-controller-down: a dead local drive also leaves its
namespace without a path, and stays the host's fault).
"""

from __future__ import annotations

import re
from typing import Any

from probes import faults

NO_PATH = re.compile(r"block (nvme[0-9]+(?:c[0-9]+)?n[0-9]+): no (?:available )?path - failing I/O")
# the device a block or filesystem error line names: "dev nvme1n1," "(device nvme1n1):"
# "XFS (nvme1n1):" "EXT4-fs (nvme1n1p1):"
_DEVICE = re.compile(r"\bdev(?:ice)? ([A-Za-z0-9_.-]+)|\(([A-Za-z0-9_.-]+)\)")
_NVME = re.compile(r"^nvme([0-9]+)(?:c[0-9]+)?n([0-9]+)(?:p[0-9]+)?$")
_DM = re.compile(r"^dm-([0-9]+)$")
MPATH = re.compile(r"device-mapper: multipath: (?:[0-9]+:([0-9]+): )?(Failing|Reinstating) "
                   r"path ([0-9]+):([0-9]+)")
SAN_LOST = re.compile(r"session[0-9]+: session recovery timed out after|"
                      r"blocked FC remote port time out: removing")
NVMEOF_LOST = "storage-nvmeof-path-lost"
ERROR_SIGNATURES = ("kernel-block-io-error", "kernel-fs-readonly", "kernel-fs-corruption")
LOCAL_DOWN = "kernel-nvme-controller-down"
NVME_MAJOR = 259  # blkext: NVMe namespaces (Documentation/admin-guide/devices.txt)
# SCSI disk majors, in sd.c's order (sd_major): 8, 65-71, 128-135
SD_MAJORS = (8, *range(65, 72), *range(128, 136))


def namespace(device: str) -> str:
    """The multipath head a device name belongs to: nvme1c2n1 (a path) and nvme1n1p3 (a
    partition) are nvme1n1; other names are themselves."""
    m = _NVME.match(device)
    return f"nvme{m.group(1)}n{m.group(2)}" if m else device


def sd_name(major: int, minor: int) -> str | None:
    """The SCSI disk a dev_t names (sd.c: the index's low 4 bits in minor bits 4-7, the next 4
    in the major's place in SD_MAJORS, the rest in minor bits 8 and up), None for others."""
    if major not in SD_MAJORS:
        return None
    index = (SD_MAJORS.index(major) << 4) | ((minor >> 4) & 0xF) | (minor & 0xFFF00)
    name = ""
    while True:  # sd_format_disk_name: a..z, aa..zz, aaa..
        name = chr(ord("a") + index % 26) + name
        index = index // 26 - 1
        if index < 0:
            return "sd" + name


def _remote(path: tuple[int, int], fabric_lost: bool, san_lost: bool) -> bool:
    return fabric_lost if path[0] == NVME_MAJOR else san_lost and path[0] in SD_MAJORS


def lost_errors_only(lines: list[dict[str, Any]], window_min: float) -> bool:
    """The fact (module doc); *window_min* the catalogue's default log window."""
    from probes.faults.apply import _log_hits

    texts = [str(line.get("text", "")) for line in lines]
    if not any("path - failing I/O" in t or "Failing path" in t for t in texts):
        return False  # no volume lost a path: the signatures' own scans are not needed
    catalogue = faults.load_faults()
    sigs = catalogue.signatures
    if LOCAL_DOWN in sigs and _log_hits(sigs[LOCAL_DOWN], lines, window_min):
        return False
    hit_ids = {id(h) for code in ERROR_SIGNATURES if code in sigs
               for h in _log_hits(sigs[code], lines, window_min)}
    if not hit_ids:
        return False
    fabric = sigs[NVMEOF_LOST].log if NVMEOF_LOST in sigs else None
    failed_sd = {name for t in texts if (m := MPATH.search(t)) and m.group(2) == "Failing"
                 and (name := sd_name(int(m.group(3)), int(m.group(4))))}
    lost: set[str] = set()
    maps: dict[str, set[tuple[int, int]]] = {}  # map minor ("?": unnamed) -> failed paths
    fabric_lost = san_lost = False
    for line, text in zip(lines, texts, strict=True):  # oldest first: a loss before the error
        if m := NO_PATH.search(text):
            lost.add(namespace(m.group(1)))
        if fabric is not None and fabric.regex.search(text):
            fabric_lost = True
        san_lost = san_lost or bool(SAN_LOST.search(text))
        if m := MPATH.search(text):
            failed = maps.setdefault(m.group(1) or "?", set())
            path = (int(m.group(3)), int(m.group(4)))
            (failed.add if m.group(2) == "Failing" else failed.discard)(path)
        if id(line) not in hit_ids:
            continue
        dev = _DEVICE.search(text)
        name = namespace(dev.group(1) or dev.group(2)) if dev else ""
        remote_maps = {k for k, paths in maps.items()
                       if paths and all(_remote(p, fabric_lost, san_lost) for p in paths)}
        if name in lost or (name in failed_sd and san_lost):
            continue
        if dm := _DM.match(name):
            if dm.group(1) in remote_maps:
                continue  # the map itself, its failed paths all remote (module doc)
            if dm.group(1) not in maps and (lost or remote_maps):
                continue  # a volume over something the log does not name, a remote one lost
        return False
    return True
