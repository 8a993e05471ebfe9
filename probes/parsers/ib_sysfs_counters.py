"""``/sys/class/infiniband/<dev>/ports/<n>/(hw_)counters/*`` dumped by a shell loop.

Operators dump these files in several ways, all accepted:
``echo "=== $f ==="; cat $f`` loops, ``head counters/*`` (``==> f <==``), ``grep -H . counters/*``
(``path:value``) and plain ``name: value`` / ``name value`` listings. The plain form is only
accepted when it names at least one known IB counter, so other counter dumps are not mistaken
for it. Several IB counters are narrow (4, 8, 16 or 32 bits) and stop at their maximum; those
sitting at the maximum are listed in ``saturated`` because their real value is unknown.

A counter file of a device without a PMA reads ``N/A (no PMA)`` (the kernel's
drivers/infiniband/core/sysfs.c, show_pma_counter; prometheus/node_exporter issue 966): the
file is listed but has no value, so it is left out, never 0; a listing with no value at all
still fails ("no counter values found").
"""

from __future__ import annotations

import re
import sys
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "/sys/class/infiniband counters"

_HEADER = re.compile(r"^\s*(?:===|==>)\s*(?P<path>\S+?)\s*(?:===|<==)\s*$")
_PATH_VALUE = re.compile(r"^\s*(?P<path>\S*/(?:hw_)?counters/[\w.-]+):\s*(?P<value>-?\d+)\s*$")
_PATH_NA = re.compile(r"^\s*\S*/(?:hw_)?counters/[\w.-]+:\s*N/A\b.*$")
_PLAIN = re.compile(r"^\s*(?P<name>[A-Za-z][\w.-]*)(?:\s*[:=]\s*|\s+)(?P<value>-?\d+)\s*$")
_VALUE = re.compile(r"^\s*(-?\d+)\s*$")
_DEVICE = re.compile(r"/sys/class/infiniband/([^/\s]+)/ports/(\d+)/")
_RDMA_LINK = re.compile(r"^\s*link\s+\S+/\d+\b", re.MULTILINE)

# Width in bits of the PortCounters fields exposed in sysfs (IBA spec); 64-bit ones omitted.
_WIDTH = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "link_downed": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_rcv_switch_relay_errors": 16,
    "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8,
    "port_rcv_constraint_errors": 8,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
    "VL15_dropped": 16,
    "port_xmit_wait": 32,
}
_KNOWN = set(_WIDTH) | {
    "port_rcv_data",
    "port_xmit_data",
    "port_rcv_packets",
    "port_xmit_packets",
    "unicast_rcv_packets",
    "unicast_xmit_packets",
    "multicast_rcv_packets",
    "multicast_xmit_packets",
    "out_of_buffer",
    "out_of_sequence",
    "rnr_nak_retry_err",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "duplicate_request",
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    "rp_cnp_handled",
    "rx_icrc_encapsulated",
}


def _basename(path: str) -> str:
    # interned: every host and port names the same few dozen counters, and a fleet-sized
    # walk holds them all (issue 28: memory per host)
    return sys.intern(path.rstrip("/").rsplit("/", 1)[-1])


def _port_of(path: str | None) -> str | None:
    """ "mlx5_0/1" when the path names the device and port, else None."""
    m = _DEVICE.search(path) if path else None
    return f"{m.group(1)}/{m.group(2)}" if m else None


def parse(text: str) -> dict[str, Any]:
    """Counters by file name; with full paths, per device/port too.

    ``grep . /sys/class/infiniband/*/ports/*/counters/*`` lists several ports at once. The
    contract's flat ``counters`` then holds the first port's values (never a mix of ports),
    and ``by_port`` holds every port's.
    """
    by_port: dict[str | None, dict[str, int]] = {}
    structured = False  # a header or a path proves the shape; plain pairs need known names
    pending: str | None = None
    for raw in text_lines(text):
        line = strip_prefix(raw)
        header = _HEADER.match(line)
        if header:
            pending = header.group("path")
            structured = True
            continue
        if pending is not None:
            if not line.strip():
                continue
            value = _VALUE.match(line)
            if value:
                by_port.setdefault(_port_of(pending), {})[_basename(pending)] = int(value.group(1))
            pending = None
            continue
        m = _PATH_VALUE.match(line)
        if m:
            path = m.group("path")
            by_port.setdefault(_port_of(path), {})[_basename(path)] = int(m.group("value"))
            structured = True
            continue
        if _PATH_NA.match(line):
            structured = True  # the file exists, its value is not available: left out
            continue
        m = _PLAIN.match(line)
        if m:
            by_port.setdefault(None, {})[sys.intern(m.group("name"))] = int(m.group("value"))
    names = {name for counters in by_port.values() for name in counters}
    if not structured and (not _KNOWN.intersection(names) or _RDMA_LINK.search(text)):
        fail(WHAT, "no '=== file ===' / 'path:value' entries and no known IB counter names")
    if not names:
        fail(WHAT, "no counter values found")
    first_key = next(iter(by_port))
    counters = by_port[first_key]
    if first_key is None:  # no path named a device; a "cd .../ports/1/counters" may have
        m = _DEVICE.search(text)
        first_key = f"{m.group(1)}/{m.group(2)}" if m else None
    device, _, port = (first_key or "").partition("/")
    saturated = [
        name
        for name, value in counters.items()
        if name in _WIDTH and value == (1 << _WIDTH[name]) - 1
    ]
    return {
        "device": device or None,
        "port": int(port) if port.isdecimal() else None,
        "counters": counters,
        "saturated": saturated,
        "by_port": {key: value for key, value in by_port.items() if key is not None},
    }
