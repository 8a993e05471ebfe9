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

from probes.topology import hca_selector

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
    ports = [p for p in ports if not is_vf(p)]  # a card's VFs are not its ports
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


def mark_job_unused(ports: list[dict[str, Any]], counters: Mapping[str, Mapping[str, int]],
                    hca_spec: str | None) -> None:
    """Set ``job_unused`` on the ports that are not Active, never linked since their counters
    were cleared (``_NEVER_LINKED`` all 0: no link down, no traffic: a card or port never
    cabled, not a rail that went down) and left out by the NCCL_IB_HCA the training processes
    run with: NCCL opens only the devices that variable selects (NCCL docs, "Environment
    Variables", NCCL_IB_HCA), so the port is no rail of this job. A port whose counters were
    not read, or that ever linked, or that the job names, is not marked; the fleet check still
    raises one that is Active on most hosts (a rail the others use, uncabled here)."""
    selected = hca_selector(hca_spec) if hca_spec else None
    for port in ports:
        seen = counters.get(_key(port))
        port["job_unused"] = bool(
            selected is not None and port.get("state") != "Active"
            and not selected(str(port["ca"]), int(port["port"]))
            and seen is not None and all(seen.get(name) == 0 for name in _NEVER_LINKED))


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


# ibstat's "CA type" is "MT" and the PCI device id in decimal; these are the mlx5 virtual
# functions (Linux drivers/net/ethernet/mellanox/mlx5/core/main.c mlx5_core_pci_table, the
# entries marked MLX5_PCI_DEV_IS_VF: 0x1012 Connect-IB VF ... 0x101c ConnectX-6 VF, 0x101e
# "ConnectX Family mlx5Gen Virtual Function" of ConnectX-6 Dx and later, 0xa2d3 BlueField VF).
VF_CA_TYPES = frozenset(f"MT{dev}" for dev in (0x1012, 0x1014, 0x1016, 0x1018, 0x101a, 0x101c,
                                               0x101e, 0xa2d3))


def is_vf(port: Mapping[str, Any]) -> bool:
    return str(port.get("ca_type") or "").strip() in VF_CA_TYPES


def adapter_ports(ports: list[dict[str, Any]]) -> None:
    """Set ``adapter_ports``: how many ports the port's adapter has (1 on a single-port card);
    a card's SR-IOV virtual functions share its System image GUID but are not its ports, so
    they are counted apart. Also set ``idle_vf`` (:func:`mark_idle_vfs`)."""
    count: dict[tuple[str, bool], int] = {}
    for port in ports:
        group = (adapter_of(port), is_vf(port))
        count[group] = count.get(group, 0) + 1
    for port in ports:
        port["adapter_ports"] = count[(adapter_of(port), is_vf(port))]
    mark_idle_vfs(ports)


def mark_idle_vfs(ports: list[dict[str, Any]]) -> None:
    """Set ``idle_vf`` on the non-Active ports of SR-IOV virtual functions whose physical
    function is on the same host (a port of a non-VF CA with the same System image GUID,
    which a VF shares with its PF: the ibstat of a ConnectX-6 host with VFs enabled shows the
    VF "CA type: MT4124" with the PF's System image GUID). That host is the hypervisor or
    bare-metal owner of the card: a VF it still holds is not assigned to a guest, and its
    port sits Down (policy Down) or Initializing (policy Up, no virtualization-aware SM)
    until one is ("IB/core: Add interfaces to control VF attributes", Linux commit: Auto
    follows the physical port, Down keeps the virtual port Down, Up moves it to Initialize
    for a virtualization-aware SM). Inside a guest there is no PF, and a VF not Active there
    is the guest's link down."""
    pfs = {adapter_of(p) for p in ports if not is_vf(p) and _guid(p.get("system_image_guid"))}
    for port in ports:
        port["idle_vf"] = bool(is_vf(port) and port.get("state") != "Active"
                               and adapter_of(port) in pfs)


def _guid(text: Any) -> str | None:
    """A GUID as hex digits ("0xb8cef603008bbf1c", "b8ce:f603:008b:bf1c"); None when unset."""
    digits = re.sub(r"^0x|:", "", str(text or "").strip().lower())
    return digits if re.fullmatch(r"[0-9a-f]+", digits) and int(digits, 16) else None
