"""``ibv_devinfo`` (and ``-v``): verbs devices and port states.

Unlike ibstat this is what the verbs library — and so NCCL — sees, which differs from ibstat
inside containers and with SR-IOV VFs. State strings keep their verbs spelling
(``PORT_ACTIVE``); the numeric code printed beside them is kept separately. ``ibv_devinfo -l``
("2 HCAs found:" and the names) gives the devices without ports.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines, to_int

WHAT = "ibv_devinfo"

_HCA = re.compile(r"^\s*hca_id:\s*(\S+)\s*$")
_PORT = re.compile(r"^\s*port:\s*(\d+)\s*$")
_KV = re.compile(r"^\s*([A-Za-z_][\w.]*):(.*)$")
_CODED = re.compile(r"^(.*?)\s*\((-?\d+)\)$")  # "PORT_ACTIVE (4)", "4096 (5)"

_DEVICE_KEYS = (
    "transport",
    "fw_ver",
    "node_guid",
    "sys_image_guid",
    "vendor_id",
    "vendor_part_id",
    "hw_ver",
    "board_id",
    "phys_port_cnt",
)
_PORT_KEYS = (
    "state",
    "max_mtu",
    "active_mtu",
    "sm_lid",
    "port_lid",
    "port_lmc",
    "link_layer",
    "phys_state",
    "active_width",
    "active_speed",
)
_INT_KEYS = {"vendor_part_id", "phys_port_cnt", "max_mtu", "active_mtu", "sm_lid", "port_lid"}


def _store(target: dict[str, Any], key: str, value: str) -> None:
    coded = _CODED.match(value)
    text = coded.group(1) if coded else value
    if key in _INT_KEYS:
        target[key] = to_int(text)
    else:
        target[key] = text or None
    if coded and key in ("state", "phys_state"):
        target[f"{key}_code"] = int(coded.group(2))


_LISTED = re.compile(r"^\s*(\d+) HCAs? found:\s*$")


def _listing(text: str) -> list[str]:
    """``ibv_devinfo -l``: "2 HCAs found:" then one device name per indented line."""
    names: list[str] = []
    expected = None
    for raw in text_lines(text):
        line = strip_prefix(raw)
        if m := _LISTED.match(line):
            expected = int(m.group(1))
        elif expected is not None and line.strip() and len(names) < expected:
            names.append(line.strip())
    return names


def parse(text: str) -> dict[str, Any]:
    """Devices in printed order, each with its ports."""
    devices: list[dict[str, Any]] = []
    device: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    for raw in text_lines(text):
        line = strip_prefix(raw)
        m = _HCA.match(line)
        if m:
            device = {"name": m.group(1), "ports": []}
            device.update(dict.fromkeys(_DEVICE_KEYS))
            devices.append(device)
            port = None
            continue
        if device is None:
            continue
        m = _PORT.match(line)
        if m:
            port = {"port": int(m.group(1))}
            port.update(dict.fromkeys(_PORT_KEYS))
            device["ports"].append(port)
            continue
        kv = _KV.match(line)
        if not kv:
            continue
        key, value = kv.group(1), kv.group(2).strip()
        if port is not None and key in _PORT_KEYS:
            _store(port, key, value)
        elif port is None and key in _DEVICE_KEYS:
            _store(device, key, value)
    if not devices:
        if listed := _listing(text):
            return {"devices": [{"name": name, "ports": [], **dict.fromkeys(_DEVICE_KEYS)}
                                for name in listed]}
        if re.search(r"No IB devices found", text):
            return {"devices": [], "error": "No IB devices found"}
        fail(WHAT, "no 'hca_id:' line found")
    return {"devices": devices}
