"""Link-state lines of a kernel log: NIC ports going down and up, IB ports changing state.

A port that went down and came back leaves no trace in its state (it is Active again) and only a
small one in its counters, but the kernel logged both transitions. This reads them from any of
the shapes a kernel log comes in: ``dmesg`` (``[    5.189354]``), ``dmesg -T`` (``[Tue Feb 14
18:48:25 2023]``), ``dmesg --time-format iso`` with or without ``--decode``/``-x`` (``kern
:info  : 2025-01-17T15:37:28,650514+00:00``), ``journalctl -k`` (short, short-iso,
short-precise, short-monotonic) and syslog (``Feb 14 05:03:41 host kernel: ...``, possibly
with the kernel's own ``[uptime]`` after ``kernel:``).

Events are the driver's own lines, as the RDMA drivers print them:

- netdev: ``<driver> <pci> <ifname>: Link up`` / ``Link down`` (mlx5_core, and the same shape
  without the PCI address, ``mlx4_en: <ifname>: Link Up``);
- IB port: ``<driver> <pci> <ibdev>: Port: N Link INIT|ARMED|ACTIVE|DOWN`` (``ACTIVE_DEFER``
  too), lowercased as the state.

Other drivers' wording (``ixgbe ...: NIC Link is Up``, ``tg3 ...: Link is up at 1000 Mbps``,
``IPv6: ADDRCONF(NETDEV_CHANGE): ... link becomes ready``) is not an event: those are not RDMA
fabric ports and their lines are distractors in a real log. ``Port module event`` lines (cable
plugged, unplugged, errors) are kept apart. NVIDIA Xid lines belong to the ``dmesg-xid`` kind.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "kernel log"

_PCI = r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
# "kern  :info  : " (dmesg --decode / -x) before whatever stamp follows
_FACILITY = re.compile(r"^\s*[a-z]+\s*:\s*[a-z]+\s*:\s")
_UPTIME = re.compile(r"^\s*\[\s*(?P<up>\d+\.\d+)\]\s?")
_CTIME = re.compile(
    r"^\s*(?P<ts>\[[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d \d{4}\])\s?")
_ISO = re.compile(r"^\s*(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?)\s")
_SYSLOG = re.compile(r"^\s*(?P<ts>[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?)\s")
# after a syslog/journal stamp: "<host> kernel: " ("<host> kernel[0]: " on some syslogs)
_KERNEL_TAG = re.compile(r"^\S+\s+kernel(?:\[\d+\])?:\s?")

_NETDEV = re.compile(
    rf"^(?P<driver>[\w.-]+):?\s+(?:(?P<pci>{_PCI}):?\s+)?(?P<ifname>[^\s:]+):\s+"
    r"Link\s+(?P<state>up|down)\b", re.IGNORECASE)
_IBPORT = re.compile(
    rf"^(?P<driver>[\w.-]+):?\s+(?:(?P<pci>{_PCI}):?\s+)?(?:(?P<ifname>[^\s:]+):\s+)?"
    r"Port:?\s*(?P<port>\d+)\s+Link\s+(?P<state>INIT|ARMED|ACTIVE_DEFER|ACTIVE|DOWN)\b",
    re.IGNORECASE)
_MODULE = re.compile(
    rf"^(?P<driver>[\w.-]+):?\s+(?:(?P<pci>{_PCI}):?\s+)?(?:[^\s:]+:\s+)?"
    r"Port module event(?:\[[^\]]*\])?:\s*module\s+(?P<module>\d+),\s*(?P<event>.*)$",
    re.IGNORECASE)


def _stamps(line: str) -> tuple[str | None, float | None, str, bool]:
    """(wall-clock stamp, uptime seconds, the message after them, whether a stamp was seen)."""
    seen = False
    facility = _FACILITY.match(line)
    if facility:
        line, seen = line[facility.end():], True
    timestamp = uptime = None
    for pattern in (_CTIME, _ISO, _SYSLOG):
        m = pattern.match(line)
        if m:
            timestamp, line, seen = m.group("ts"), line[m.end():], True
            break
    m = _UPTIME.match(line)
    if m:  # dmesg's own stamp, or journalctl -o short-monotonic's
        uptime, line, seen = float(m.group("up")), line[m.end():], True
    tag = _KERNEL_TAG.match(line) if seen else None
    if tag:
        line = line[tag.end():]
        m = _UPTIME.match(line)  # syslog keeps the kernel's [uptime] after "kernel:"
        if m:
            uptime, line = float(m.group("up")), line[m.end():]
    return timestamp, uptime, line.strip(), seen


def parse(text: str) -> dict[str, Any]:
    """Link events in log order, module events, and the number of down events per port."""
    events: list[dict[str, Any]] = []
    module_events: list[dict[str, Any]] = []
    kernel_lines = 0
    for raw in text_lines(text):
        line = strip_prefix(raw)
        if not line.strip():
            continue
        timestamp, uptime, message, stamped = _stamps(line)
        kernel_lines += stamped
        m = _IBPORT.match(message)
        if m:
            events.append({
                "timestamp": timestamp, "uptime_s": uptime, "driver": m.group("driver"),
                "pci": m.group("pci"), "ifname": m.group("ifname"), "port": int(m.group("port")),
                "state": m.group("state").lower(), "source": "ib"})
            continue
        m = _NETDEV.match(message)
        if m:
            events.append({
                "timestamp": timestamp, "uptime_s": uptime, "driver": m.group("driver"),
                "pci": m.group("pci"), "ifname": m.group("ifname"), "port": None,
                "state": m.group("state").lower(), "source": "netdev"})
            continue
        m = _MODULE.match(message)
        if m:
            module_events.append({"pci": m.group("pci"), "module": int(m.group("module")),
                                  "event": m.group("event").strip()})
    if not events and not module_events and not kernel_lines:
        fail(WHAT, "no kernel-log timestamps and no link-state lines found")
    flaps: dict[str, int] = {}
    for event in events:
        if event["state"] == "down":
            key = event["ifname"] or event["pci"] or event["driver"]
            flaps[key] = flaps.get(key, 0) + 1
    return {"events": events, "module_events": module_events, "flaps": flaps}
