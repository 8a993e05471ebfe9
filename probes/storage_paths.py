"""Whether a host's block and filesystem errors are those of a remote NVMe namespace that lost
every path (the storage's symptom), for the kernel probe's ``nvmeof_lost_errors_only`` fact.

When every controller of a native-multipath NVMe namespace is gone, the head fails each bio
(drivers/nvme/host/multipath.c nvme_ns_head_submit_bio: ``dev_warn_ratelimited(disk_to_dev(
head->disk), "no available path - failing I/O")``, printed "block nvme1n1: ..."; before the
rename, 4.15 to 5.x: "no path - failing I/O"), and what sits on the namespace fails next:
fs/buffer.c "Buffer I/O error on dev nvme1n1, logical block 0, async page read", ext4
"EXT4-fs error (device nvme1n1): ..." and "Remounting filesystem read-only", XFS "XFS
(nvme1n1): log I/O error -5" and "Log I/O Error (0x2) detected at xlog_ioend_work ...
Shutting down filesystem" (recorded in blktests runs on linux-nvme, e.g. nvme/0xx with the
target removed). Those lines name the host's device but not a fault of the host: the array or
the storage network is at fault (storage-nvmeof-no-path). The fact is true when every
block/filesystem error the catalogue would raise (kernel-block-io-error, kernel-fs-readonly,
kernel-fs-corruption) names a namespace that printed "no ... path - failing I/O" before it,
and no local NVMe controller went down (kernel-nvme-controller-down: a dead local drive also
leaves its namespace without a path, and stays the host's fault).
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
ERROR_SIGNATURES = ("kernel-block-io-error", "kernel-fs-readonly", "kernel-fs-corruption")
LOCAL_DOWN = "kernel-nvme-controller-down"


def namespace(device: str) -> str:
    """The multipath head a device name belongs to: nvme1c2n1 (a path) and nvme1n1p3 (a
    partition) are nvme1n1; other names are themselves."""
    m = _NVME.match(device)
    return f"nvme{m.group(1)}n{m.group(2)}" if m else device


def lost_errors_only(lines: list[dict[str, Any]], window_min: float) -> bool:
    """The fact (module doc); *window_min* the catalogue's default log window."""
    from probes.faults.apply import _log_hits

    if not any("path - failing I/O" in str(line.get("text", "")) for line in lines):
        return False  # no namespace lost its paths: the signatures' own scans are not needed
    catalogue = faults.load_faults()
    sigs = catalogue.signatures
    if LOCAL_DOWN in sigs and _log_hits(sigs[LOCAL_DOWN], lines, window_min):
        return False
    hit_ids = {id(h) for code in ERROR_SIGNATURES if code in sigs
               for h in _log_hits(sigs[code], lines, window_min)}
    if not hit_ids:
        return False
    lost: set[str] = set()
    for line in lines:  # oldest first: a namespace lost before the error explains it
        text = str(line.get("text", ""))
        if m := NO_PATH.search(text):
            lost.add(namespace(m.group(1)))
        if id(line) in hit_ids:
            dev = _DEVICE.search(text)
            if dev is None or namespace(dev.group(1) or dev.group(2)) not in lost:
                return False
    return True
