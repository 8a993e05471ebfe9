"""The rdma probe's script and the parser of its port, MTU, netdev, GID and traffic-class sections.

The QoS sections (PFC, trust, ECN, global pause) are read by probes/rdma_qos.py, which also
derives the per-port verdict fields and the host summaries. What the facts mean is told in
probes/rdma.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes import rdma_gid, rdma_qos
from probes.base import Section, guard_parse, script, split_sections
from probes.parsers import ParseError, show_gids
from probes.parsers import parse as parse_kind

NAME = "rdma"

_IB = "/sys/class/infiniband"
_PORT_ATTRS = ("link_layer", "state", "phys_state", "rate")
_PORTS = (
    f"set -- {_IB}/*; if [ -e \"$1\" ]; then echo \"devices $#\"; timeout 5 grep -H . "
    + " ".join(f"{_IB}/*/ports/*/{a}" for a in _PORT_ATTRS)
    + " 2>/dev/null | head -n 400; else echo 'devices 0'; fi; true"
)
# ibv_devinfo is what the verbs library (and NCCL) sees; only its MTU lines are kept.
_DEVINFO = (
    "out=$(timeout 10 ibv_devinfo 2>&1); rc=$?; printf '%s\\n' \"$out\" | grep -E "
    "'hca_id:|port:|state:|max_mtu:|active_mtu:|link_layer:|No IB devices|rror|ailed' "
    "| head -n 400; (exit $rc)"
)
_NETDEVS = (
    "timeout 5 grep -H . "
    + " ".join(f"{_IB}/*/device/net/*/{a}" for a in ("mtu", "dev_port", "operstate"))
    + " 2>/dev/null | head -n 400; true"
)
# Ethernet (RoCE) ports only: the configured GIDs with their type and netdev (the kernel
# refuses to read the type of an empty entry, so those lines are absent), then which netdev
# carries each port's RoCE traffic and that netdev's MTU. $rdma_eth is used by the QoS sections.
_GIDS = (
    "rdma_eth=''; for p in " + _IB + "/*/ports/*; do "
    "[ \"$(cat \"$p/link_layer\" 2>/dev/null)\" = Ethernet ] || continue; "
    "timeout 5 grep -H . \"$p\"/gids/* 2>/dev/null | grep -v "
    "-e ':0000:0000:0000:0000:0000:0000:0000:0000$' "
    "-e ':fe80:0000:0000:0000:0000:0000:0000:0000$' | head -n 64; "
    "timeout 5 grep -H . \"$p\"/gid_attrs/types/* \"$p\"/gid_attrs/ndevs/* 2>/dev/null "
    "| head -n 128; "
    "n=$(cat \"$p\"/gid_attrs/ndevs/* 2>/dev/null | head -n 1); d=${p%/ports/*}; "
    "if [ -z \"$n\" ]; then for x in \"$d\"/device/net/*; do [ -e \"$x\" ] || continue; "
    "[ \"$(($(cat \"$x/dev_port\" 2>/dev/null || echo 0) + 1))\" = \"${p##*/}\" ] "
    "&& n=${x##*/} && break; done; fi; "
    "[ -n \"$n\" ] || continue; echo \"roce_netdev ${d##*/} ${p##*/} $n\"; "
    "for x in $( (echo \"$n\"; cat \"$p\"/gid_attrs/ndevs/* 2>/dev/null) | sort -u "
    "| head -n 8); do "
    "grep -H . \"/sys/class/net/$x/mtu\" \"/sys/class/net/$x/operstate\" 2>/dev/null; "
    "grep -H -e '^DEVTYPE=' -e '^INTERFACE=' \"/sys/class/net/$x/uevent\" 2>/dev/null; done; "
    "case \" $rdma_eth \" in *\" $n \"*) ;; *) rdma_eth=\"$rdma_eth $n\";; esac; "
    "done; true"
)
_TC = (
    "for f in " + _IB + "/*/tc/*/traffic_class; do [ -e \"$f\" ] || continue; "
    "echo \"$f:$(timeout 5 cat \"$f\" 2>&1 | head -n 2 | tr '\\n' ' ')\"; done; true"
)
_QOS = (
    "for n in $rdma_eth; do echo \"--- $n\"; "
    "if command -v mlnx_qos >/dev/null 2>&1; then echo 'tool mlnx_qos'; "
    "out=$(timeout 5 mlnx_qos -i \"$n\" 2>&1); echo \"rc $?\"; "
    "printf '%s\\n' \"$out\" | head -n 80; "
    "elif command -v dcb >/dev/null 2>&1; then echo 'tool dcb'; "
    "out=$(timeout 5 dcb pfc show dev \"$n\" 2>&1); echo \"rc $?\"; "
    "printf '%s\\n' \"$out\" | head -n 20; "
    "out=$(timeout 5 dcb app show dev \"$n\" 2>&1); echo \"app rc $?\"; "
    "printf '%s\\n' \"$out\" | head -n 20; "
    "elif command -v lldptool >/dev/null 2>&1; then echo 'tool lldptool'; "
    "out=$(timeout 5 lldptool -t -i \"$n\" -V PFC 2>&1); echo \"rc $?\"; "
    "printf '%s\\n' \"$out\" | head -n 20; "
    "else echo 'tool none'; fi; "
    "[ -r \"/sys/class/net/$n/qos/trust\" ] && "
    "echo \"sysfs_trust $(cat \"/sys/class/net/$n/qos/trust\" 2>/dev/null)\"; "
    "done; true"
)
_ECN = (
    "for n in $rdma_eth; do if [ -d \"/sys/class/net/$n/ecn\" ]; then timeout 5 grep -H . "
    "\"/sys/class/net/$n\"/ecn/roce_np/enable/* \"/sys/class/net/$n\"/ecn/roce_rp/enable/* "
    "2>/dev/null | head -n 32; else echo \"no_ecn $n\"; fi; done; true"
)
_PAUSE = ("for n in $rdma_eth; do echo \"--- $n\"; timeout 5 ethtool -a \"$n\" 2>&1 "
          "| head -n 20; done; true")

SECTIONS = ("ports", "devinfo", "netdevs", "gids", "tc", "qos", "ecn", "pause", "addrs",
            "rdmacnt", "ncclenv")
_REQUIRES = {"devinfo": "ibv_devinfo", "pause": "ethtool", "addrs": "ip"}


def command(params: Mapping[str, Any]) -> str:
    return script([("ports", _PORTS), ("devinfo", _DEVINFO), ("netdevs", _NETDEVS),
                   ("gids", _GIDS), ("tc", _TC), ("qos", _QOS), ("ecn", _ECN),
                   ("pause", _PAUSE), ("addrs", rdma_gid.ADDRS),
                   ("rdmacnt", rdma_gid.COUNTERS), ("ncclenv", rdma_gid.nccl_env_sh(params))],
                  _REQUIRES)


# --- parsing ---------------------------------------------------------------------------------

_PORT_LINE = re.compile(r"^\S*/infiniband/(?P<dev>[^/\s]+)/ports/(?P<port>\d+)/"
                        r"(?P<attr>link_layer|state|phys_state|rate):(?P<value>.*)$")
_NETDEV_LINE = re.compile(r"^\S*/infiniband/(?P<dev>[^/\s]+)/device/net/(?P<net>[^/\s]+)/"
                          r"(?P<attr>mtu|dev_port|operstate):(?P<value>.*)$")
_NET_LINE = re.compile(r"^\S*/class/net/(?P<net>[^/\s]+)/(?:(?P<attr>mtu|operstate):|uevent:"
                       r"(?P<key>DEVTYPE|INTERFACE)=)(?P<value>.*)$")
_ROCE_NETDEV = re.compile(r"^roce_netdev (?P<dev>\S+) (?P<port>\d+) (?P<net>\S+)\s*$")
_TC_LINE = re.compile(r"^\S*/infiniband/(?P<dev>[^/\s]+)/tc/(?P<port>\d+)/traffic_class:"
                      r"(?P<value>.*)$")
# sysfs "4: ACTIVE" / "5: LinkUp" -> ibstat's spellings (the network probe's).
_STATES = {"ACTIVE": "Active", "DOWN": "Down", "INIT": "Initializing", "ARMED": "Armed",
           "ACTIVE_DEFER": "Active", "NOP": "Nop"}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


def _int(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def _state(value: str) -> str | None:
    word = value.split(":", 1)[-1].strip()
    return _STATES.get(word.upper(), word or None)


def _rate(value: str) -> int | float | None:
    m = _RATE.match(value)
    if not m:
        return None
    rate = float(m.group(1))
    return int(rate) if rate == int(rate) else rate


def new_port(dev: str, port: int) -> dict[str, Any]:
    """A port entry with every fact unknown (None) until a section says otherwise."""
    return {
        "device": dev, "port": port, "key": f"{dev}/{port}", "link_layer": None,
        "state": None, "physical_state": None, "rate_gbit_s": None, "netdev": None,
        "netdev_mtu": None, "netdev_operstate": None, "active_mtu": None, "max_mtu": None,
        "gids": None, "roce_v2_gid": None, "gid_index_v2": None, "roce_v2_ipv4": None,
        "roce_v2_netdev": None, "roce_v2_vlan": None,
        "tc": None, "roce_prio": None, "trust": None, "dcbx": None, "pfc_prios": None,
        "pfc_any": None, "pfc_on_roce_prio": None, "ecn_np_prios": None,
        "ecn_rp_prios": None, "ecn_np_on_roce_prio": None, "ecn_rp_on_roce_prio": None,
        "global_pause_autoneg": None, "global_pause_rx": None, "global_pause_tx": None,
        "qos_tool": None, "roce_v2_gids": None, "roce_v1_ipv4_gid": None,
        "roce_v2_ipv6_gid": None, "nccl_gid_index_configured": None,
        "nccl_gid_link_local": None, "netdev_enslaved": None, "netdev_ipv4_addrs": None,
        "rdma_packets": None, "job_port": None, "sibling_v2_gid": None, "gid_types": None,
        "nccl_gid_version": None,
    }


def ran(sections: Mapping[str, Section], name: str, facts: dict[str, Any]) -> Section | None:
    """Section *name* if it ran; a missing tool is recorded in ``missing``."""
    sec = sections.get(name)
    if sec is None:
        return None
    if sec.missing:
        facts["missing"].append(name)
        return None
    return sec


def _parse_ports(sec: Section, facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    ports: dict[str, dict[str, Any]] = {}
    count = re.search(r"^devices (\d+)\s*$", sec.text, re.M)
    facts["rdma_devices"] = int(count.group(1)) if count else None
    for line in sec.text.splitlines():
        m = _PORT_LINE.match(line.strip())
        if not m:
            continue
        key = f"{m.group('dev')}/{int(m.group('port'))}"
        port = ports.setdefault(key, new_port(m.group("dev"), int(m.group("port"))))
        value = m.group("value").strip()
        attr = m.group("attr")
        if attr == "link_layer":
            port["link_layer"] = value or None
        elif attr == "state":
            port["state"] = _state(value)
        elif attr == "phys_state":
            port["physical_state"] = value.split(":", 1)[-1].strip() or None
        else:
            port["rate_gbit_s"] = _rate(value)
    if count is None and not ports:
        facts["errors"]["ports"] = (sec.text.strip().splitlines() or ["no output"])[0][:200]
    return ports


def _parse_devinfo(sec: Section, ports: dict[str, dict[str, Any]], facts: dict[str, Any]) -> None:
    if "hca_id:" not in sec.text:
        if "No IB devices found" not in sec.text:
            facts["errors"]["devinfo"] = (sec.text.strip().splitlines()
                                          or [f"ibv_devinfo exited {sec.rc}"])[0][:200]
        return
    try:
        devices = parse_kind("ibv_devinfo", sec.text)["devices"]
    except ParseError as exc:
        facts["errors"]["devinfo"] = str(exc)[:200]
        return
    for device in devices:
        for entry in device["ports"]:
            key = f"{device['name']}/{entry['port']}"
            port = ports.setdefault(key, new_port(device["name"], entry["port"]))
            port["active_mtu"] = entry.get("active_mtu")
            port["max_mtu"] = entry.get("max_mtu")
            if port["link_layer"] is None:
                port["link_layer"] = entry.get("link_layer")


def _parse_netdevs(sec: Section, ports: dict[str, dict[str, Any]]) -> None:
    by_dev: dict[str, dict[str, dict[str, str]]] = {}
    for line in sec.text.splitlines():
        m = _NETDEV_LINE.match(line.strip())
        if m:
            by_dev.setdefault(m.group("dev"), {}).setdefault(m.group("net"), {})[
                m.group("attr")] = m.group("value").strip()
    for port in ports.values():
        for net, attrs in by_dev.get(port["device"], {}).items():
            dev_port = _int(attrs.get("dev_port"))
            if (dev_port if dev_port is not None else 0) + 1 != port["port"]:
                continue
            port["netdev"] = net
            port["netdev_mtu"] = _int(attrs.get("mtu"))
            port["netdev_operstate"] = attrs.get("operstate") or None
            break


def _parse_gids(sec: Section, ports: dict[str, dict[str, Any]], facts: dict[str, Any]) -> None:
    net_attrs: dict[str, dict[str, str]] = {}
    for line in sec.text.splitlines():
        line = line.strip()
        if m := _ROCE_NETDEV.match(line):
            key = f"{m.group('dev')}/{int(m.group('port'))}"
            if key in ports:
                ports[key]["netdev"] = m.group("net")
        elif m := _NET_LINE.match(line):
            attr = m.group("attr") or m.group("key").lower()
            net_attrs.setdefault(m.group("net"), {})[attr] = m.group("value").strip()
    gids = show_gids.parse(sec.text)["gids"] if "/gids/" in sec.text else []
    for port in ports.values():
        if port["link_layer"] != "Ethernet":
            continue
        attrs = net_attrs.get(port["netdev"] or "")
        if attrs:
            port["netdev_mtu"] = _int(attrs.get("mtu"))
            port["netdev_operstate"] = attrs.get("operstate") or port["netdev_operstate"]
        mine = [g for g in gids if g["device"] == port["device"] and g["port"] == port["port"]]
        port["gids"] = len(mine)
        v2 = [g for g in mine if g["version"] == "v2" and g["ipv4"]]
        # GIDs listed but no type readable (gid_attrs/types refused, as it is in containers for
        # GIDs not mapped into them: NCCL net_ib.cc ncclIbRoceGetVersionNum's EINVAL): the
        # port's RoCE versions were not measured, which is not "no RoCE v2 GID"
        port["roce_v2_gid"] = bool(v2) if v2 or not mine or any(g["version"] for g in mine) \
            else None
        port["gid_index_v2"] = v2[0]["index"] if v2 else None
        port["roce_v2_ipv4"] = v2[0]["ipv4"] if v2 else None
        port["roce_v2_netdev"] = v2[0]["netdev"] if v2 else None
        v2_attrs = net_attrs.get(port["roce_v2_netdev"] or "", {})
        # a VLAN netdev's uevent says DEVTYPE=vlan; INTERFACE= proves the file was read
        port["roce_v2_vlan"] = (v2_attrs.get("devtype") == "vlan") if "interface" in v2_attrs \
            else None
    facts["gids"] = gids[:64]


def _parse_tc(sec: Section, ports: dict[str, dict[str, Any]], facts: dict[str, Any]) -> None:
    seen = False
    for line in sec.text.splitlines():
        m = _TC_LINE.match(line.strip())
        if not m:
            continue
        seen = True
        port = ports.get(f"{m.group('dev')}/{int(m.group('port'))}")
        value = _tclass(m.group("value"))
        if port is not None:
            port["tc"] = value if value is not None and value >= 0 else None
    facts["tc_sysfs"] = seen


# MLNX_OFED mlx5_ib traffic_class_show (qos.c): "Global tclass=N" when a global class is set
# (it overrides every QP's), then one line per per-address rule ("src_ip=A,dst_ip=B/L,tclass=N",
# src_ip6/dst_ip6 alike), used only where no global class is set; "106" (a bare class) and
# "tclass=-1" (cleared) on other versions, "" when never set.
_GLOBAL_TC = re.compile(r"Global tclass=(-?\d+)")
_BARE_TC = re.compile(r"\s*(?:tclass=)?(-?\d+)\s*")


def _tclass(value: str) -> int | None:
    """The port's default traffic class; None when none is set, or only per-address rules are
    (each destination's class then differs: no one class to compare)."""
    m = _GLOBAL_TC.search(value) or _BARE_TC.fullmatch(value)
    return int(m.group(1)) if m else None


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "ports" not in sections:
        raise ParseError("rdma: no ports section (not the output of the rdma probe)")
    facts: dict[str, Any] = {"ports": [], "rdma_devices": None, "gids": [], "tc_sysfs": None,
                             "ecn_absent": [], "missing": [], "errors": {}}
    ports: dict[str, dict[str, Any]] = {}
    if (sec := ran(sections, "ports", facts)) is not None:
        ports = _parse_ports(sec, facts)
    if (sec := ran(sections, "devinfo", facts)) is not None:
        _parse_devinfo(sec, ports, facts)
    if (sec := ran(sections, "netdevs", facts)) is not None:
        _parse_netdevs(sec, ports)
    if (sec := ran(sections, "gids", facts)) is not None:
        _parse_gids(sec, ports, facts)
    if (sec := ran(sections, "tc", facts)) is not None:
        _parse_tc(sec, ports, facts)
    rdma_gid.apply(sections, ports, facts)
    rdma_qos.parse_qos(sections, ports, facts)
    facts["ports"] = [ports[k] for k in sorted(ports, key=_natural)]
    rdma_qos.summarize(facts)
    return facts


def _natural(key: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", key)]


parse = guard_parse(NAME, _parse)
