"""Kernel log lines from the NVIDIA driver: Xid/SXid events and "fallen off the bus".

Xid codes are the driver's own classification of a GPU fault (48 DBE, 63/64 row remap, 79
off the bus, 94/95 contained/uncontained ECC, ...), which checks map to drain/reset/ignore.
Accepts ``dmesg``, ``dmesg -T``, journalctl and syslog timestamps, and a kernel log with no
NVIDIA line at all (a healthy node: no Xids), but not text that is no kernel log.

The driver's line shapes (NVIDIA/open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/
kernel_rc.c, krcReportXid; NVIDIA "Xid Errors" R384 docs for the oldest):

- ``NVRM: Xid (0000:03:00): 14, Channel 00000001`` (old drivers: no ``PCI:``);
- ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., <message>`` (``pid='<unknown>'``,
  ``name=<unknown>`` when no process is known);
- on a MIG GPU whose error is attributed to an instance, ``NVRM: Xid (PCI:0000:01:00
  GPU-I:05): 94, ...`` or ``(PCI:0000:01:00 GPU-I:05 GPU-CI:00)``: the GPU instance and
  compute instance are kept as ``gpu_instance`` / ``compute_instance``.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "kernel log (dmesg)"

# MIG attribution inside the parenthesis: " GPU-I:%02u" and " GPU-CI:%02u" (kernel_rc.c)
_MIG = r"(?:\s+GPU-I:(?P<gi>\d+))?(?:\s+GPU-CI:(?P<ci>\d+))?"
_XID = re.compile(r"\bNVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)" + _MIG
                  + r"\s*\):\s*(?P<code>\d+)(?P<rest>.*)$")
_SXID = re.compile(r"\bSXid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)" + _MIG
                   + r"\s*\):\s*(?P<code>\d+)(?P<rest>.*)$")
_PID = re.compile(r"^,?\s*pid=([^,]*)")
_NAME = re.compile(r"^,?\s*name=([^,]*)")
_FALLEN = re.compile(r"fallen off the bus", re.IGNORECASE)
_FALLEN_PCI = re.compile(
    r"GPU (?:at )?(?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)"
)
_STAMP = re.compile(
    r"^\s*\[\s*(?P<dmesg>\d+\.\d+|[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} [\d:]{8} \d{4})\]"
    r"|^(?P<dmesg_iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d)\s"
    r"|^(?P<syslog>[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d)\s+\S+\s+kernel:"
    r"|^(?P<iso>\d{4}-\d\d-\d\dT[\d:.,+\-Z]+)\s+\S+\s+kernel:"
)
_UPTIME = re.compile(r"^\d+\.\d+$")


def _event(m: re.Match[str], stamp: re.Match[str] | None) -> dict[str, Any]:
    rest = m.group("rest")
    pid = name = None
    if p := _PID.match(rest):
        pid, rest = p.group(1).strip().strip("'") or None, rest[p.end() :]
    if n := _NAME.match(rest):
        name, rest = n.group(1).strip() or None, rest[n.end() :]
    timestamp = None
    if stamp:
        timestamp = next((g for g in stamp.groups() if g), None)
    groups = m.groupdict()
    return {
        "pci": m.group("pci"),
        "code": int(m.group("code")),
        "gpu_instance": int(groups["gi"]) if groups.get("gi") else None,
        "compute_instance": int(groups["ci"]) if groups.get("ci") else None,
        "text": rest.lstrip(", ").strip() or None,
        "pid": pid,
        "process": name,
        "timestamp": timestamp,
        "uptime_s": float(timestamp) if timestamp and _UPTIME.match(timestamp) else None,
    }


def parse(text: str) -> dict[str, Any]:
    """Xid and SXid events in log order, plus whether any GPU fell off the bus."""
    xids: list[dict[str, Any]] = []
    sxids: list[dict[str, Any]] = []
    fallen_pci: list[str] = []
    fallen = False
    kernel_lines = 0
    for raw in text_lines(text):
        line = strip_prefix(raw)
        stamp = _STAMP.match(line)
        if stamp or "NVRM:" in line:
            kernel_lines += 1
        if m := _XID.search(line):
            xids.append(_event(m, stamp))
            if m.group("code") == "79":
                fallen = True
                if m.group("pci") not in fallen_pci:
                    fallen_pci.append(m.group("pci"))
        elif m := _SXID.search(line):
            sxids.append(_event(m, stamp))
        if _FALLEN.search(line):
            fallen = True
            pci = _FALLEN_PCI.search(line)
            if pci and pci.group(1) not in fallen_pci:
                fallen_pci.append(pci.group(1))
    if not kernel_lines and not xids and not sxids and not fallen:
        fail(WHAT, "no NVRM/Xid line and no kernel-log timestamps found")
    return {
        "xids": xids,
        "codes": list(dict.fromkeys(x["code"] for x in xids)),
        "sxids": sxids,
        "fallen_off_bus": fallen,
        "fallen_off_bus_pci": fallen_pci,
    }
