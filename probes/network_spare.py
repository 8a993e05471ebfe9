"""Which InfiniBand ports of a host sit unused by design (the network probe's ``spare_port``).

An uncabled second port of a dual-port HCA (ArchWiki "InfiniBand", ibstat example: port 2
Down/Polling beside an Active port 1) is not a broken link. One host's evidence decides it: the
port is Down with no physical link, its counters say it never linked since they were cleared,
another port of the same card is Active, and no other card of the same kind on the host uses
the port at that position. The last condition tells a card whose second port is unused by
design from a rail of a card whose sibling cards run both ports (four dual-port cards, eight
rails, one cable never plugged): what the host's own identical cards do is the design.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# A port that never carried a packet since its counters were last cleared (the driver load):
# every one of these at 0 at the second sample.
_NEVER_LINKED = ("link_downed", "link_error_recovery", "port_xmit_data", "port_rcv_data")


def _key(port: Mapping[str, Any]) -> str:
    return f"{port['ca']}/{port['port']}"


def _natural(text: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def mark_spare_ports(ports: list[dict[str, Any]],
                     counters: Mapping[str, Mapping[str, int]] | None) -> None:
    """Set ``spare_port`` on the InfiniBand ports that sit unused by design: Down with no
    physical link (Polling: "no connection from this card to another card or switch",
    Advanced Clustering KB "InfiniBand Port States"; or Disabled), never linked since the
    counters were cleared (``_NEVER_LINKED`` all 0: no link down, no traffic), on an adapter
    with another port Active (the same CA, or the same System image GUID, which the functions
    of one dual-port ConnectX card share: the real 12-CA H100 ibstat in fixtures/real). That is
    the uncabled second port of a dual-port HCA (ArchWiki "InfiniBand", ibstat example: port 2
    Down/Polling beside an Active port 1). A port that lost its link has link_downed or traffic
    on its counters and stays down; one whose counters were not read is not spared; a port
    whose twin on another card of the same type and port count on this host is Active is
    not spared either (the host's design uses that port: a rail never cabled); and the fleet
    check still raises a spare port that is Active on most hosts."""
    adapter_up = {adapter_of(p) for p in ports if p.get("state") == "Active"}
    position = _positions(ports)
    used_on: dict[tuple[tuple[str, int], int], set[str]] = {}  # (kind, position) -> adapters
    for p in ports:
        kind, pos = position[_key(p)]
        if p.get("state") == "Active" and kind is not None:
            used_on.setdefault((kind, pos), set()).add(adapter_of(p))
    for port in ports:
        seen = (counters or {}).get(_key(port))
        kind, pos = position[_key(port)]
        twin_used = kind is not None and bool(used_on.get((kind, pos), set())
                                              - {adapter_of(port)})
        port["spare_port"] = bool(
            port.get("link_layer") == "InfiniBand" and port.get("state") == "Down"
            and port.get("physical_state") in ("Polling", "Disabled")
            and seen is not None and all(seen.get(name) == 0 for name in _NEVER_LINKED)
            and adapter_of(port) in adapter_up and not twin_used)


def _positions(ports: list[dict[str, Any]]) -> dict[str, tuple[tuple[str, int] | None, int]]:
    """Per port: its card's kind (CA type, port count; None when the type is unknown) and the
    port's position on the card (0 for the first function/port, 1 for the second ...)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for port in ports:
        groups.setdefault(adapter_of(port), []).append(port)
    out: dict[str, tuple[tuple[str, int] | None, int]] = {}
    for members in groups.values():
        members.sort(key=lambda p: (_natural(str(p["ca"])), int(p["port"])))
        for pos, port in enumerate(members):
            ca_type = port.get("ca_type")
            out[_key(port)] = ((str(ca_type), len(members)) if ca_type else None, pos)
    return out


def adapter_of(port: Mapping[str, Any]) -> str:
    """The physical adapter of a port: its System image GUID (shared by the functions of one
    dual-port ConnectX card), else its CA."""
    guid = _guid(port.get("system_image_guid"))
    return f"guid:{guid}" if guid else f"ca:{port['ca']}"


def adapter_ports(ports: list[dict[str, Any]]) -> None:
    """Set ``adapter_ports``: how many ports the port's adapter has (1 on a single-port card)."""
    count: dict[str, int] = {}
    for port in ports:
        count[adapter_of(port)] = count.get(adapter_of(port), 0) + 1
    for port in ports:
        port["adapter_ports"] = count[adapter_of(port)]


def _guid(text: Any) -> str | None:
    """A GUID as hex digits ("0xb8cef603008bbf1c", "b8ce:f603:008b:bf1c"); None when unset."""
    digits = re.sub(r"^0x|:", "", str(text or "").strip().lower())
    return digits if re.fullmatch(r"[0-9a-f]+", digits) and int(digits, 16) else None
