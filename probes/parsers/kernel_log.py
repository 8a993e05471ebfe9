"""A kernel log, line by line: each message with its seconds-since-boot stamp when it has one.

The kernel log reaches diag in many shapes, and the fault catalogue's kernel patterns are
matched against the *message*, so the stamps and prefixes are taken off and kept apart:

- ``dmesg``: ``[    5.189354] msg`` (``[  240.] msg`` on old MIPS kernels); ``dmesg -r`` and
  pstore records put the priority in front: ``<6>[  201.650687] msg``;
- ``dmesg -T`` / ``--ctime``: ``[Tue Feb 14 18:48:25 2023] msg`` in any locale (``[wo jul 28
  05:19:43 2021]``); ``dmesg -H`` / ``--reltime``: ``[Jan21 10:00]`` then ``[  +0.000844]``;
- ``dmesg --time-format iso`` with or without ``-x``/``--decode``: ``kern  :info  :
  2025-01-17T15:37:28,650514+00:00 msg``;
- ``journalctl -k -o short-monotonic``: ``[ 4274.052063] host kernel: msg``; ``short`` and
  syslog files: ``Feb 14 05:03:41 host kernel: msg`` (the host may be missing, and the kernel's
  own ``[uptime]`` may follow ``kernel:``); ``short-iso``: ``2025-01-17T15:37:28+0000 host
  kernel: msg``; OpenWrt's logread: ``Tue Aug 12 16:40:43 2025 kern.crit kernel: [1.2] msg``;
- ``/dev/kmsg`` records: ``6,3973,227996636,-;msg`` (microseconds since boot);
- any of these behind a pdsh/clush host prefix: ``b1360: [14280.445220] msg``;
- rsyslog's RFC 5424 forwarding format: ``<4>1 2025-01-20T10:18:26.123456+00:00 host kernel -
  - - msg`` (RFC 5424 section 6: PRI VERSION TIMESTAMP HOSTNAME APP-NAME PROCID MSGID
  STRUCTURED-DATA MSG);
- kernels built with CONFIG_PRINTK_CALLER put the caller after the stamp:
  ``[   18.819394][  T298] msg`` or ``[   18.819394] [  T298] msg`` (a thread ``T<pid>`` or
  a CPU ``C<n>``, kernel/printk/printk.c); the caller is not part of the message.

Only a dmesg, short-monotonic or kmsg stamp is seconds since boot (``uptime_s``); wall-clock
and relative stamps are kept as text (``timestamp``) and give no age. Lines with no stamp at all
(a message pasted without its prefix) are kept with both null. Journal notices (``-- No entries
--``, ``-- Boot ... --``) are not kernel lines and are dropped.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, text_lines

WHAT = "kernel log"

_KMSG = re.compile(r"^(?P<prio>\d+),(?P<seq>\d+),(?P<usec>\d+),[^;]*;(?P<msg>.*)$")
_HOST_PREFIX = re.compile(r"^[A-Za-z0-9_.-]+: (?=\[\s*\d+\.\d*\])")
_FACILITY = re.compile(r"^\s*[a-z]+\s*:\s*[a-z]+\s*:\s")
_PRIORITY = re.compile(r"^\s*<\d{1,3}>")
_UPTIME = re.compile(r"^\s*\[\s*(?P<up>\d+\.\d*)\]\s?")
# RFC 5424 after its <PRI>: VERSION TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA
_RFC5424 = re.compile(
    r"^1 (?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)|-) \S+ \S+ \S+ \S+ "
    r"(?:-|(?:\[[^\]]*\])+)(?: |$)")
# CONFIG_PRINTK_CALLER: "[  T298]" (thread) or "[    C3]" (CPU) right after the stamp
_CALLER = re.compile(r"^\s*\[\s*[TC]\d+\]\s?")
_RELTIME = re.compile(r"^\s*(?P<ts>\[\s*[+-]\d+(?:\.\d+)?(?:<[^>]*>)?\])\s?")
# a bracketed wall-clock stamp: anything with hh:mm in brackets (dmesg -T in any locale, -H)
_BRACKET_CLOCK = re.compile(r"^\s*(?P<ts>\[[^\]\[]{0,40}?\d{1,2}:\d\d(?::\d\d)?[^\]\[]{0,20}\])\s?")
_ISO = re.compile(
    r"^\s*(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?)\s")
_CTIME_YEAR = re.compile(
    r"^\s*(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d \d{4})\s")
_SYSLOG = re.compile(r"^\s*(?P<ts>[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?)\s")
# after a journal/syslog stamp: "[host ]kernel: " ("kernel[0]:", "kern.crit kernel:")
_KERNEL_TAG = re.compile(r"^(?:\S+\s+)?(?:kern\.[a-z]+\s+)?kernel(?:\[\d+\])?:\s?")
_NOTICE = re.compile(r"^-- .*--\s*$|^-- No entries --\s*$")
# a message with no stamp still has the kernel's "subsystem: " or "driver device: " shape
# Lines a kernel log keeps when the stamps were cut off (a grep of dmesg, a paste): they start
# with a kernel producer's own prefix; anything else without a stamp is another tool's output.
_UNSTAMPED = re.compile(
    r"^(?:NVRM|NVSwitch|nvidia[\w-]*|mlx\d_core|pcieport|nvme\w*|EDAC\b|mce|XFS|EXT4-fs|"
    r"Lustre\w*|LNet\w*|nfs|INFO|BUG|watchdog|NETDEV|rcu|pci|ACPI|ib\w+|kernel)\b")
_MESSAGE_SHAPE = re.compile(r"^\s*[A-Za-z_][\w.\-]*(?:\s+[\w.:\-]+)?:\s")


def split_line(line: str) -> tuple[float | None, str | None, str, bool]:
    """(uptime seconds, wall-clock or relative stamp, message, whether a stamp was seen)."""
    m = _KMSG.match(line)
    if m:
        return int(m.group("usec")) / 1e6, None, m.group("msg").strip(), True
    seen = False
    line = _HOST_PREFIX.sub("", line, count=1)
    m = _FACILITY.match(line)
    if m:
        line, seen = line[m.end():], True
    m = _PRIORITY.match(line)
    if m:
        line, seen = line[m.end():], True
    timestamp: str | None = None
    uptime: float | None = None
    m = _RFC5424.match(line) if seen else None  # only after its <PRI>
    if m:
        line = line[m.end():]
        timestamp = None if m.group("ts") == "-" else m.group("ts")
    m = _UPTIME.match(line)
    if m:
        uptime, line, seen = float(m.group("up")), line[m.end():], True
    elif timestamp is None:
        for pattern in (_RELTIME, _BRACKET_CLOCK, _ISO, _CTIME_YEAR, _SYSLOG):
            m = pattern.match(line)
            if m:
                timestamp, line, seen = m.group("ts").strip(), line[m.end():], True
                break
    if seen:
        tag = _KERNEL_TAG.match(line)
        if tag:
            line = line[tag.end():]
            m = _UPTIME.match(line)  # syslog keeps the kernel's [uptime] after "kernel:"
            if m:
                uptime, line = float(m.group("up")), line[m.end():]
    if uptime is not None:
        line = _CALLER.sub("", line, count=1)
    return uptime, timestamp, line.strip(), seen


def parse(text: str) -> dict[str, Any]:
    """Every kernel message in log order: [{uptime_s, timestamp, text}]."""
    lines: list[dict[str, Any]] = []
    stamped = shaped = 0
    for raw in text_lines(text):
        if not raw.strip() or _NOTICE.match(raw.strip()):
            continue
        if "\x00" in raw:
            fail(WHAT, "binary data")
        uptime, timestamp, message, seen = split_line(raw.rstrip())
        stamped += seen
        shaped += bool(_MESSAGE_SHAPE.match(message))
        lines.append({"uptime_s": uptime, "timestamp": timestamp, "text": message})
    if not lines:
        fail(WHAT, "no lines")
    # An unstamped line shaped "subsystem: message" is also a key: value line of many tools'
    # outputs, so it counts only beside stamped lines: a kernel log of any shape stamps most of
    # its lines, and a paste that kept none of them is not told from ibstat or nvidia-smi.
    if not stamped and not all(_UNSTAMPED.match(raw) for raw in text_lines(text)
                               if raw.strip() and not _NOTICE.match(raw.strip())):
        fail(WHAT, "no kernel-log timestamps, and not every line is 'subsystem: message'")
    return {"lines": lines, "stamped": stamped}
