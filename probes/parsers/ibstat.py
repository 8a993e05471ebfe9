"""``ibstat``: InfiniBand/RoCE HCAs and their ports.

A port that is Down/Polling, or Active at a lower rate than its peers, is the first thing to
rule out when cross-node bandwidth collapses. Indentation is ignored for the fields (pastes mix
tabs and spaces, and ``ibstat <ca> <port>`` prints the port block unindented after ``CA:
'name'``); a field belongs to the most recent CA / Port header. Any other non-blank line is
outside the CA blocks and goes to ``errors``: when a device vanishes mid-listing ibstat prints
``ibpanic: ...`` on stderr and exits 255, after the CAs it could still read, and those CAs are
kept.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, none_if_na, strip_prefix, text_lines, to_int, to_number

WHAT = "ibstat"

_CA = re.compile(r"^\s*CA:?\s+'([^']+)'\s*$")
_PORT = re.compile(r"^\s*Port\s+(\d+):\s*$")
_KV = re.compile(r"^\s*([A-Za-z][A-Za-z ]*):(.*)$")
# infiniband-diags' own diagnostics, wherever stderr lands them: libibmad's IBPANIC / IBWARN
# ("ibpanic: [pid] main: ...", "ibwarn: [pid] ...") and ibexit ("ibstat: iberror: failed: ...").
_DIAG_LINE = re.compile(r"^\s*(?:[\w.-]+: )?ib(?:panic|warn|error):")

_CA_KEYS = {
    "CA type": "ca_type",
    "Number of ports": "number_of_ports",
    "Firmware version": "firmware_version",
    "Hardware version": "hardware_version",
    "Node GUID": "node_guid",
    "System image GUID": "system_image_guid",
}
_PORT_KEYS = {
    "State": "state",
    "Physical state": "physical_state",
    "Rate": "rate_gbit_s",
    "Base lid": "base_lid",
    "LMC": "lmc",
    "SM lid": "sm_lid",
    "Capability mask": "capability_mask",
    "Port GUID": "port_guid",
    "Link layer": "link_layer",
    # rdma-core 2026 (ibv_query_port_speed): "Effective speed: 53.125" (Gb/s, "%g")
    "Effective speed": "effective_speed_gbit_s",
}
# ibstat.c prints "Rate: %d (FDR10)" for FDR10 ports, "Rate: 2.5" for 1x SDR, "Rate: %d" else.
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:\((\w+)\))?\s*$")
_INT_KEYS = {"number_of_ports", "base_lid", "lmc", "sm_lid"}


def _new_port(number: int) -> dict[str, Any]:
    port: dict[str, Any] = {"port": number}
    port.update(dict.fromkeys(_PORT_KEYS.values()))
    return port


def _in_block(line: str) -> bool:
    """Whether a line inside an open CA is part of it: indented, or a known field / port header."""
    if line[:1] in (" ", "\t"):
        return True
    if _PORT.match(line):
        return True
    kv = _KV.match(line)
    return kv is not None and kv.group(1).strip() in {**_CA_KEYS, **_PORT_KEYS}


def parse(text: str) -> dict[str, Any]:
    """CAs in printed order, each with its ports, and the lines outside them."""
    cas: list[dict[str, Any]] = []
    errors: list[str] = []
    ca: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    for raw in text_lines(text):
        line = strip_prefix(raw)
        if not line.strip():
            continue
        m = _CA.match(line)
        if m:
            ca = {"name": m.group(1), "ports": []}
            ca.update(dict.fromkeys(_CA_KEYS.values()))
            cas.append(ca)
            port = None
            continue
        if ca is None or _DIAG_LINE.match(line) or not _in_block(line):
            errors.append(line.strip())
            ca = port = None
            continue
        m = _PORT.match(line)
        if m:
            port = _new_port(int(m.group(1)))
            ca["ports"].append(port)
            continue
        kv = _KV.match(line)
        if not kv:
            continue
        key, value = kv.group(1).strip(), none_if_na(kv.group(2))
        if port is not None and key in _PORT_KEYS:
            name = _PORT_KEYS[key]
            if name == "rate_gbit_s":
                rate = _RATE.match(value or "")
                port[name] = to_number(rate.group(1)) if rate else None
                if rate and rate.group(2):
                    port["rate_note"] = rate.group(2)
            elif name == "effective_speed_gbit_s":
                port[name] = to_number(value)
            elif name in _INT_KEYS:
                port[name] = to_int(value)
            else:
                port[name] = value
        elif port is None and key in _CA_KEYS:
            name = _CA_KEYS[key]
            ca[name] = to_int(value) if name in _INT_KEYS else value
    if not cas and not any(_DIAG_LINE.match(e) for e in errors):
        fail(WHAT, "no \"CA '<name>'\" line found")
    return {"cas": cas, "errors": errors}
