"""``/proc/PID/mountinfo``: the mounts a process sees, one line each.

The format is the kernel's (Documentation/filesystems/proc.rst, "3.5 /proc/<pid>/mountinfo",
fs/proc_namespace.c ``show_mountinfo``)::

    36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
    (1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)

mount ID, parent ID, major:minor of the filesystem (``st_dev``), the root of the mount within
the filesystem, the mount point, per-mount options, zero or more optional fields (``shared:N``,
``master:N``, ...) ended by a single ``-``, the filesystem type (``fuse.juicefs`` for FUSE
subtypes), the source (``none`` or the device, ``server:/export``, ``10.0.0.1@o2ib:/fs``), and
the per-superblock options. Space, tab, newline and backslash in paths are escaped as ``\\040``,
``\\011``, ``\\012`` and ``\\134``; they are decoded here.

Each mount: ``mount_id``, ``parent_id`` (ints), ``dev`` ("259:7"), ``root``, ``mountpoint``,
``options`` and ``super_options`` (the option strings as printed), ``fstype``, ``source``, and
``readonly``: true when either the mount or its superblock is read-only (a filesystem the kernel
remounted read-only after an error shows ``ro`` in its superblock options only).
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, text_lines

WHAT = "/proc/PID/mountinfo"

_ESCAPE = re.compile(r"\\([0-7]{3})")
_HEAD = re.compile(r"^(\d+) (\d+) (\d+:\d+) ")


def unescape(field: str) -> str:
    """A mountinfo path field decoded (``\\040`` is a space)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_line(line: str) -> dict[str, Any] | None:
    """One mountinfo line, or None when it is not one."""
    if not _HEAD.match(line):
        return None
    fields = line.split(" ")
    try:
        sep = fields.index("-", 6)
    except ValueError:
        return None
    if len(fields) < sep + 3:
        return None
    options = fields[5]
    super_options = " ".join(fields[sep + 3:]).strip()
    ro = "ro" in options.split(",") or "ro" in super_options.split(",")
    return {"mount_id": int(fields[0]), "parent_id": int(fields[1]), "dev": fields[2],
            "root": unescape(fields[3]), "mountpoint": unescape(fields[4]),
            "options": options, "optional": [f for f in fields[6:sep] if f],
            "fstype": fields[sep + 1], "source": unescape(fields[sep + 2]),
            "super_options": super_options, "readonly": ro}


def parse(text: str) -> dict[str, Any]:
    mounts = [m for m in (parse_line(line.rstrip()) for line in text_lines(text)) if m]
    if not mounts:
        fail(WHAT, "no line of the form 'ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ... - TYPE "
             "SOURCE OPTIONS'")
    return {"mounts": mounts}
