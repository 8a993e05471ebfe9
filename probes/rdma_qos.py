"""The rdma probe's RoCE QoS half: PFC and trust (mlnx_qos, else dcb, else lldptool), ECN per
priority, global pause, which priority the RoCE traffic class lands on, and the host summaries
the fleet is compared on.

The priority RoCE traffic uses: with trust dscp the NIC classifies a packet by the DSCP in its
traffic class byte (DSCP = traffic_class >> 2, e.g. 106 -> DSCP 26) through the dscp2prio map
(mlnx_qos prints it; the default maps DSCP d to priority d >> 3, so 26 -> 3). That priority
must be the PFC one for lossless RoCE (NVIDIA, "Lossless RoCE Configuration for Linux Drivers
in DSCP-Based QoS Mode": trust dscp, PFC on priority 3, traffic class 106). It is known only
where the port's default traffic class is (MLNX_OFED ``tc/<port>/traffic_class``); otherwise
NCCL_IB_TC decides it per QP and ``roce_prio`` stays unknown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import Section
from probes.parsers import ParseError, dcb, ethtool_a, mlnx_qos

_BLOCK = re.compile(r"^--- (?P<net>\S+)\s*$")
_ECN_LINE = re.compile(r"^\S*/class/net/(?P<net>[^/\s]+)/ecn/(?P<algo>roce_np|roce_rp)/enable/"
                       r"(?P<prio>[0-7]):\s*(?P<value>\d+)\s*$")
# lldptool -t -i N -V PFC (intel/openlldp lldp_8021qaz_clif.c): "PFC enabled: 3 " or "none".
_LLDP_PFC = re.compile(r"PFC enabled:\s*(?P<list>none|(?:[0-7]\s*)+)\s*$", re.M)


def _blocks(text: str) -> dict[str, list[str]]:
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if m := _BLOCK.match(line):
            current = blocks.setdefault(m.group("net"), [])
        elif current is not None:
            current.append(line)
    return blocks


def _first(lines: list[str], default: str) -> str:
    return next((line.strip()[:200] for line in lines if line.strip()), default)


def _qos_block(lines: list[str]) -> dict[str, Any]:
    """One netdev's QoS block: tool, its exit status(es), its output."""
    out: dict[str, Any] = {"tool": None, "trust": None, "dcbx": None, "pfc_enabled": None,
                           "dscp2prio": None, "error": None}
    main: list[str] = []
    app: list[str] | None = None
    rc = app_rc = None
    for line in lines:
        if m := re.match(r"^tool (\S+)\s*$", line):
            out["tool"] = m.group(1)
        elif m := re.match(r"^rc (-?\d+)\s*$", line):
            rc = int(m.group(1))
        elif m := re.match(r"^app rc (-?\d+)\s*$", line):
            app_rc, app = int(m.group(1)), []
        elif m := re.match(r"^sysfs_trust (\S+)\s*$", line):
            out["sysfs_trust"] = m.group(1)
        elif app is not None:
            app.append(line)
        else:
            main.append(line)
    text = "\n".join(main)
    tool = out["tool"]
    if tool in (None, "none"):
        return out
    if rc != 0:
        out["error"] = f"{tool}: " + _first(main, f"exit status {rc}")
    elif tool == "mlnx_qos":
        try:
            qos = mlnx_qos.parse(text)
        except ParseError as exc:
            out["error"] = str(exc)[:200]
        else:
            out.update(trust=qos["trust"] if qos["trust"] != "none" else None,
                       dcbx=qos["dcbx_mode"], pfc_enabled=qos["pfc_enabled"],
                       dscp2prio=qos["dscp2prio"] or None)
    elif tool == "dcb":
        try:
            out["pfc_enabled"] = dcb.parse(text)["pfc_enabled"]
        except ParseError as exc:
            out["error"] = str(exc)[:200]
        if app is not None and app_rc == 0:
            body = "\n".join(app)
            out["trust"] = dcb.parse(body)["trust"] if body.strip() else "pcp"
    elif tool == "lldptool":
        m = _LLDP_PFC.search(text)
        if m:
            words = m.group("list").split()
            out["pfc_enabled"] = [] if words == ["none"] else sorted(int(w) for w in words)
        else:
            out["error"] = "lldptool: " + _first(main, "no 'PFC enabled:' line")
    if out.get("sysfs_trust") in ("pcp", "dscp"):
        out["trust"] = out["sysfs_trust"]
    return out


def _roce_prio(tc: int | None, trust: str | None, dscp2prio: Mapping[str, list[int]] | None,
               ) -> int | None:
    if tc is None or trust != "dscp":
        return None
    dscp = (tc >> 2) & 0x3F
    for prio, dscps in (dscp2prio or {}).items():
        if dscp in dscps:
            return int(prio)
    return dscp >> 3  # the default dscp2prio map (mlnx_qos: prio:3 dscp:31,...,24)


def _joined(prios: list[int] | None) -> str | None:
    return None if prios is None else ",".join(str(p) for p in sorted(prios))


def parse_qos(sections: Mapping[str, Section], ports: dict[str, dict[str, Any]],
              facts: dict[str, Any]) -> None:
    """The qos, ecn and pause sections into the Ethernet ports' fields."""
    by_net: dict[str, list[dict[str, Any]]] = {}
    for port in ports.values():
        if port["link_layer"] == "Ethernet" and port["netdev"]:
            by_net.setdefault(port["netdev"], []).append(port)

    sec = sections.get("qos")
    if sec is not None and not sec.missing:
        for net, lines in _blocks(sec.text).items():
            qos = _qos_block(lines)
            if qos["tool"] == "none" and "qos" not in facts["missing"]:
                facts["missing"].append("qos")
            if qos["error"]:
                facts["errors"][f"qos:{net}"] = qos["error"]
            for port in by_net.get(net, []):
                port["qos_tool"] = qos["tool"] if qos["tool"] != "none" else None
                port["trust"], port["dcbx"] = qos["trust"], qos["dcbx"]
                port["pfc_prios"] = _joined(qos["pfc_enabled"])
                if qos["pfc_enabled"] is not None:
                    port["pfc_any"] = bool(qos["pfc_enabled"])
                port["roce_prio"] = _roce_prio(port["tc"], qos["trust"], qos["dscp2prio"])
                if port["roce_prio"] is not None and qos["pfc_enabled"] is not None:
                    port["pfc_on_roce_prio"] = port["roce_prio"] in qos["pfc_enabled"]
    elif sec is not None:
        facts["missing"].append("qos")

    sec = sections.get("ecn")
    if sec is not None and not sec.missing:
        _parse_ecn(sec.text, by_net, facts)
    elif sec is not None:
        facts["missing"].append("ecn")

    sec = sections.get("pause")
    if sec is not None and not sec.missing:
        for net, lines in _blocks(sec.text).items():
            try:
                pause = ethtool_a.parse("\n".join(lines))
            except ParseError as exc:
                facts["errors"][f"pause:{net}"] = str(exc)[:200]
                continue
            if pause["error"] and pause["rx"] is None:
                facts["errors"][f"pause:{net}"] = pause["error"]
                continue
            for port in by_net.get(net, []):
                port["global_pause_autoneg"] = pause["autoneg"]
                port["global_pause_rx"], port["global_pause_tx"] = pause["rx"], pause["tx"]
    elif sec is not None:
        facts["missing"].append("pause")


def _parse_ecn(text: str, by_net: dict[str, list[dict[str, Any]]],
               facts: dict[str, Any]) -> None:
    enabled: dict[str, dict[str, list[int]]] = {}
    absent = []
    for line in text.splitlines():
        line = line.strip()
        if m := re.match(r"^no_ecn (\S+)$", line):
            absent.append(m.group(1))
        elif m := _ECN_LINE.match(line):
            algo = enabled.setdefault(m.group("net"), {"roce_np": [], "roce_rp": []})
            if m.group("value") != "0":
                algo[m.group("algo")].append(int(m.group("prio")))
    facts["ecn_absent"] = sorted(absent)
    for net, algos in enabled.items():
        for port in by_net.get(net, []):
            port["ecn_np_prios"] = _joined(algos["roce_np"])
            port["ecn_rp_prios"] = _joined(algos["roce_rp"])
            if port["roce_prio"] is not None:
                port["ecn_np_on_roce_prio"] = port["roce_prio"] in algos["roce_np"]
                port["ecn_rp_on_roce_prio"] = port["roce_prio"] in algos["roce_rp"]


def _distinct(values: list[Any]) -> str | None:
    """Distinct values of the ports, '|'-joined ('' shown as 'none'); None when none known."""
    known = sorted({"none" if v == "" else str(v) for v in values if v is not None})
    return "|".join(known) if known else None


def _pause_word(port: Mapping[str, Any]) -> str | None:
    rx, tx = port.get("global_pause_rx"), port.get("global_pause_tx")
    if rx is None and tx is None:
        return None
    on = [name for name, value in (("rx", rx), ("tx", tx)) if value]
    return "+".join(on) if on else "off"


def summarize(facts: dict[str, Any]) -> None:
    """Host-level summaries over the Active ports, for absolute rules and fleet drift."""
    ports = facts["ports"]
    active = [p for p in ports if p["state"] == "Active"]
    ib = [p for p in active if p["link_layer"] == "InfiniBand"]
    roce = [p for p in active if p["link_layer"] == "Ethernet"]

    def low(group: list[dict[str, Any]], key: str) -> int | None:
        values = [p[key] for p in group if isinstance(p.get(key), int)]
        return min(values) if values else None

    facts.update({
        "ports_total": len(ports) if facts["rdma_devices"] is not None else None,
        "ib_ports_active": len(ib), "roce_ports_active": len(roce),
        "link_layers": _distinct([p["link_layer"] for p in ports]),
        "ib_active_mtu_min": low(ib, "active_mtu"),
        "ib_active_mtus": _distinct([p["active_mtu"] for p in ib]),
        "roce_active_mtu_min": low(roce, "active_mtu"),
        "roce_active_mtus": _distinct([p["active_mtu"] for p in roce]),
        "roce_netdev_mtu_min": low(roce, "netdev_mtu"),
        "roce_netdev_mtus": _distinct([p["netdev_mtu"] for p in roce]),
        "roce_ports_without_v2_gid": (sum(1 for p in roce if p["roce_v2_gid"] is False)
                                      if any(p["roce_v2_gid"] is not None for p in roce)
                                      else None),
        # which ones: the fleet's design when most hosts lack the same (a RoCE v1 or IPv6
        # fabric, a port cabled but carrying no IP on every node), one host's fault otherwise
        "roce_ports_without_v2_gid_keys": (
            sorted(p["key"] for p in roce if p["roce_v2_gid"] is False)
            if any(p["roce_v2_gid"] is not None for p in roce) else None),
        "gid_index_v2s": _distinct([p["gid_index_v2"] for p in roce]),
        # the RoCE versions of the Active RoCE ports' GIDs: "v1|v2" on mlx5 (every address
        # gets both), "v2" on RoCE v2-only NICs, "v1" where RoCE v2 is off or unsupported
        "roce_gid_types": _distinct([v for p in roce
                                     for v in (p.get("gid_types") or "").split("|") if v]),
        "pfc_prios": _distinct([p["pfc_prios"] for p in roce]),
        "trust": _distinct([p["trust"] for p in roce]),
        "roce_tcs": _distinct([p["tc"] for p in roce]),
        "ecn_np_prios": _distinct([p["ecn_np_prios"] for p in roce]),
        "ecn_rp_prios": _distinct([p["ecn_rp_prios"] for p in roce]),
        "global_pause": _distinct([_pause_word(p) for p in roce]),
        "qos_tools": _distinct([p["qos_tool"] for p in roce]),
    })
