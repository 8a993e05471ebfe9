"""network: IB/RoCE ports and their error, pause and discard counters, and TCP retransmits.

A port that went down or keeps retraining drops NCCL's RDMA connections; a lossy cable shows as
symbol errors long before that; on RoCE a slow receiver floods the fabric with PFC pauses. One
script reads the port state and rate (``ibstat``, or ``ibv_devinfo -v`` where ibstat is not
installed), which netdev backs each RDMA device (``ibdev2netdev``, or sysfs), and then takes the
counters TWICE, ``network_sample_interval_s`` apart (params ``interval_s`` or
``network_sample_interval_s`` override it): the IB port counters from
``/sys/class/infiniband/*/ports/*/counters`` (plus ``hw_counters/out_of_buffer``), ``ethtool
-S`` of the netdevs of Ethernet (RoCE) RDMA devices (PFC/global pause, discards, pause-storm
events) and ``TcpRetransSegs`` from /proc/net/snmp. Checks judge the deltas, never the totals
since boot; a counter that went down between the samples was reset and counts from 0.

Which ports must be up: every port that is not Active counts as down, with one exception: an
Ethernet (RoCE) port whose netdev is administratively down (``ip link set down``; IFF_UP clear
in ``/sys/class/net/*/flags``). That is how unused front-end ports sit, and nodes ship that way
(the real 12-CA H100 node in fixtures/real has three such CX6-DX ports, Down/Disabled). A RoCE
port whose netdev is up but has no carrier shows the same Down/Disabled and does count. Where
the flags could not be read, an Ethernet port in physical state Disabled is given the benefit
of the doubt. InfiniBand ports get no such exception: an unused IB port polls, so a Disabled
one is a fault or a forgotten ``ibportstate disable`` (the real B300 node whose seven
ConnectX-8 ports are Down/Disabled). Ports named by the params ``hcas`` (NCCL_IB_HCA syntax)
always count, and a port left out above is still raised when the same port is Active on most
hosts of the fleet. ``ports_down`` counts the ports that are down by this rule,
``ports_admin_down`` the Ethernet ports excused.

Rates: an Active port below the fastest port of the same card type and link layer on the host
is degraded; with ``ib_expected_rate_gbit_s`` set, any Active InfiniBand port below it is;
with it at 0, a host whose fastest fabric port is below the fleet's majority is.
``link_layer`` and ``min_rate_gbit_s`` describe the host's fabric: the link layer most of its
Active ports use, and the slowest Active port of that link layer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    default_thresholds,
    finding,
    guard_parse,
    mad_outliers,
    majority_groups,
    not_measured,
    script,
    split_sections,
)
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind
from probes.topology import hca_selector

NAME = "network"

# IB PortCounters the checks use, plus the data counters that show the port carries traffic.
IB_COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
               "port_xmit_discards", "port_rcv_remote_physical_errors",
               "local_link_integrity_errors", "excessive_buffer_overrun_errors",
               "port_xmit_wait", "port_rcv_data", "port_xmit_data", "out_of_buffer")
# Per-host delta facts named by the catalog, and the counter each one sums.
DELTA_FACTS = {"symbol_error_delta": "symbol_error", "link_downed_delta": "link_downed",
               "link_error_recovery_delta": "link_error_recovery",
               "port_rcv_errors_delta": "port_rcv_errors",
               "port_xmit_discards_delta": "port_xmit_discards"}

_IB_SAMPLE = (
    "timeout 5 grep -H . /sys/class/infiniband/*/ports/*/counters/* "
    "/sys/class/infiniband/*/ports/*/hw_counters/out_of_buffer 2>/dev/null | grep -E '/("
    + "|".join(IB_COUNTERS) + "):'"
)
_ETH_SAMPLE = (
    "for d in /sys/class/infiniband/*; do "
    "grep -qx Ethernet \"$d\"/ports/*/link_layer 2>/dev/null || continue; "
    "for n in \"$d\"/device/net/*; do [ -e \"$n\" ] || continue; "
    "echo \"--- ${n##*/} ${d##*/}\"; "
    "timeout 5 ethtool -S \"${n##*/}\" 2>&1 | grep -E 'pause|discard|storm|out_of_buffer'; "
    "done; done; true"
)
_TCP_SAMPLE = "grep '^Tcp:' /proc/net/snmp"
_DEVINFO = (
    "if [ \"${ibstat_rc:-1}\" = 0 ]; then echo 'skipped: ibstat answered'; else "
    "timeout 10 ibv_devinfo -v | grep -E "
    "'hca_id:|vendor_part_id:|port:|state:|link_layer:|active_width:|active_speed:'; fi"
)
# Per RDMA device netdev: "<dev> <netdev> <flags> <dev_port>" (IFF_UP is bit 0x1 of flags).
_IFFLAGS = (
    "for d in /sys/class/infiniband/*; do [ -d \"$d\" ] || continue; "
    "for n in \"$d\"/device/net/*; do [ -e \"$n\" ] || continue; "
    "echo \"${d##*/} ${n##*/} $(cat \"$n\"/flags 2>/dev/null) "
    "$(cat \"$n\"/dev_port 2>/dev/null)\"; "
    "done; done; true"
)
_REQUIRES = {"ibstat": "ibstat", "devinfo": "ibv_devinfo", "netdev": "ibdev2netdev",
             "eth_1": "ethtool", "eth_2": "ethtool"}
_MAX_INTERVAL_S = 20

_IB_PORT = re.compile(r"^\s*\S*/infiniband/(?P<ca>[^/\s]+)/ports/(?P<port>\d+)/")
_IFFLAGS_LINE = re.compile(r"^(?P<ca>\S+) (?P<netdev>\S+) (?P<flags>0x[0-9a-fA-F]+)"
                           r"(?: (?P<dev_port>\d+))?\s*$")
_ETH_HEADER = re.compile(r"^--- (?P<netdev>\S+) (?P<ca>\S+)\s*$")
_RX_PAUSE = re.compile(r"^rx_(?:prio\d+_pause|pause_ctrl_phy)$")
_TX_PAUSE = re.compile(r"^tx_(?:prio\d+_pause|pause_ctrl_phy)$")
_RX_DISCARD = ("rx_discards_phy", "rx_out_of_buffer")
_STORM = re.compile(r"^tx_pause_storm_\w+$")

# ibv_devinfo spellings -> ibstat's.
_VERBS_STATE = {"PORT_ACTIVE": "Active", "PORT_DOWN": "Down", "PORT_INIT": "Initializing",
                "PORT_ARMED": "Armed", "PORT_ACTIVE_DEFER": "Active"}
_VERBS_PHYS = {"LINK_UP": "LinkUp", "DISABLED": "Disabled", "POLLING": "Polling",
               "SLEEP": "Sleep", "PORT_CONFIGURATION TRAINING": "PortConfigurationTraining",
               "LINK_ERROR_RECOVERY": "LinkErrorRecovery", "PHY TEST": "PhyTest"}


def _interval(params: Mapping[str, Any], default: Any) -> float:
    for key in ("interval_s", "network_sample_interval_s"):
        value = params.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return float(default)


def command(params: dict[str, Any]) -> str:
    interval = _interval(params, default_thresholds()["network_sample_interval_s"])
    interval = min(max(1, round(interval)), _MAX_INTERVAL_S)

    def sample(n: int) -> list[tuple[str, str]]:
        return [(f"ib_{n}", _IB_SAMPLE), (f"eth_{n}", _ETH_SAMPLE), (f"tcp_{n}", _TCP_SAMPLE)]

    sections = [
        ("ibstat", "timeout 10 ibstat; ibstat_rc=$?; (exit $ibstat_rc)"),
        ("devinfo", _DEVINFO),
        ("netdev", "timeout 10 ibdev2netdev"),
        ("ifflags", _IFFLAGS),
        ("interval", f"echo {interval}"),
        *sample(1),
        ("sleep", f"sleep {interval}"),
        *sample(2),
    ]
    return script(sections, _REQUIRES)


# --- parsing ---------------------------------------------------------------------------------

def _ports_from_ibstat(text: str) -> list[dict[str, Any]]:
    ports = []
    for ca in parse_kind("ibstat", text)["cas"]:
        for port in ca["ports"]:
            ports.append({"ca": ca["name"], "port": port["port"], "state": port["state"],
                          "physical_state": port["physical_state"],
                          "rate_gbit_s": port["rate_gbit_s"], "link_layer": port["link_layer"],
                          "ca_type": ca.get("ca_type"), "netdev": None})
    return ports


def _verbs_rate(width: str | None, speed: str | None) -> float | None:
    lanes = re.match(r"\s*(\d+)X", width or "")
    gbps = re.match(r"\s*(\d+(?:\.\d+)?)\s*Gbps", speed or "")
    if not lanes or not gbps:
        return None
    rate = int(lanes.group(1)) * float(gbps.group(1))
    return int(rate) if rate == int(rate) else rate


def _ports_from_devinfo(text: str) -> list[dict[str, Any]]:
    ports = []
    for device in parse_kind("ibv_devinfo", text)["devices"]:
        part = device.get("vendor_part_id")
        for port in device["ports"]:
            ports.append({
                "ca": device["name"], "port": port["port"],
                "state": _VERBS_STATE.get(port.get("state") or "", port.get("state")),
                "physical_state": _VERBS_PHYS.get(port.get("phys_state") or "",
                                                  port.get("phys_state")),
                "rate_gbit_s": _verbs_rate(port.get("active_width"), port.get("active_speed")),
                "link_layer": port.get("link_layer"),
                "ca_type": f"MT{part}" if part else None, "netdev": None})
    return ports


def _ib_sample(text: str) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Counters per "ca/port" and the saturated ones, each port read by ib-sysfs-counters."""
    chunks: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = _IB_PORT.match(line)
        if m:
            chunks.setdefault(f"{m.group('ca')}/{m.group('port')}", []).append(line)
    counters, saturated = {}, []
    for key, lines in chunks.items():
        parsed = parse_kind("ib-sysfs-counters", "\n".join(lines))
        counters[key] = parsed["counters"]
        saturated += [f"{key}:{name}" for name in parsed["saturated"]]
    return counters, saturated


def _eth_sample(text: str, ports_of: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """ethtool counters per port key; the header line names the netdev and its RDMA device."""
    chunks: dict[str, list[str]] = {}
    key = None
    for line in text.splitlines():
        header = _ETH_HEADER.match(line)
        if header:
            netdev, ca = header.group("netdev"), header.group("ca")
            key = ports_of.get(netdev) or f"{ca}/1"
            chunks[key] = []
        elif key is not None:
            chunks[key].append(line)
    out = {}
    for key, lines in chunks.items():
        body = "\n".join(lines).strip()
        if not body:
            continue
        try:
            out[key] = parse_kind("ethtool-S", "NIC statistics:\n" + body)["counters"]
        except ParseError:  # "Cannot get stats strings information" and the like
            continue
    return out


def _tcp_retrans(text: str) -> int | None:
    rows = [line.split() for line in text.splitlines() if line.startswith("Tcp:")]
    if len(rows) >= 2 and "RetransSegs" in rows[0]:
        column = rows[0].index("RetransSegs")
        if column < len(rows[1]) and rows[1][column].isdigit():
            return int(rows[1][column])
    if "TcpRetransSegs" in text:
        return parse_kind("nstat", text)["tcp_retransmitted_segments"]
    return None


def _delta(before: int | None, after: int | None) -> int | None:
    if before is None or after is None:
        return None
    return after - before if after >= before else after  # went down: reset, count from 0


def _eth_sums(counters: Mapping[str, int]) -> dict[str, int]:
    return {
        "rx_pause": sum(v for k, v in counters.items() if _RX_PAUSE.match(k)),
        "tx_pause": sum(v for k, v in counters.items() if _TX_PAUSE.match(k)),
        "rx_discards": sum(counters.get(k, 0) for k in _RX_DISCARD),
        "pause_storm": sum(v for k, v in counters.items() if _STORM.match(k)),
    }


def _fabric(ports: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The link layer most Active ports use, and the Active ports of that link layer."""
    active = [p for p in ports if p.get("state") == "Active"]
    layers = [p.get("link_layer") for p in (active or ports) if p.get("link_layer")]
    if not layers:
        return None, []
    layer = max(dict.fromkeys(layers), key=layers.count)
    return layer, [p for p in active if p.get("link_layer") == layer]


def _key(port: Mapping[str, Any]) -> str:
    return f"{port['ca']}/{port['port']}"


def _excused(port: Mapping[str, Any]) -> bool:
    """A non-Active Ethernet port whose netdev is administratively down: unused, not broken."""
    if port.get("state") == "Active" or port.get("link_layer") != "Ethernet":
        return False
    if port.get("admin_up") is not None:
        return not port["admin_up"]
    return port.get("physical_state") == "Disabled"  # flags unknown: benefit of the doubt


def _usable(sec: Any) -> bool:
    return sec is not None and not sec.missing


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if not {"ibstat", "devinfo", "ib_1"} & set(sections):
        raise ParseError("network: no ibstat, ibv_devinfo or counter section")
    facts: dict[str, Any] = {
        "ports": None, "ports_active": None, "ports_down": None, "ports_admin_down": None,
        "min_rate_gbit_s": None, "link_layer": None,
        **dict.fromkeys(DELTA_FACTS), "rx_pause_delta": None, "tx_pause_delta": None,
        "rx_discards_delta": None, "pause_storm_events": None, "pause_storm_delta": None,
        "pause_storm_ports": {}, "tcp_retrans_delta": None, "counter_deltas": {}, "saturated": [],
        "sample_interval_s": None, "port_tool": None, "missing": [], "errors": {},
    }
    for name, sec in sections.items():
        if sec.missing:
            facts["missing"].append(name)

    ports = None
    ibstat, devinfo = sections.get("ibstat"), sections.get("devinfo")
    if _usable(ibstat) and ibstat.rc == 0 and "CA '" in ibstat.text:
        ports, facts["port_tool"] = _ports_from_ibstat(ibstat.text), "ibstat"
    elif _usable(devinfo) and "hca_id:" in devinfo.text:
        ports, facts["port_tool"] = _ports_from_devinfo(devinfo.text), "ibv_devinfo"
    elif _usable(devinfo) and "No IB devices found" in devinfo.text:
        ports, facts["port_tool"] = [], "ibv_devinfo"
    elif _usable(ibstat) and ibstat.rc == 0 and ibstat.text.strip():
        raise ParseError("network: the ibstat section is not ibstat output")
    elif _usable(ibstat) and ibstat.rc == 0:
        ports, facts["port_tool"] = [], "ibstat"  # ibstat on a host without any CA
    elif _usable(ibstat) or _usable(devinfo):
        sec = ibstat if _usable(ibstat) else devinfo
        facts["errors"]["ports"] = (sec.text.strip().splitlines() or ["no output"])[0][:200]

    ports_of: dict[str, str] = {}  # netdev -> "ca/port"
    admin_up: dict[str, bool] = {}  # "ca/port" -> IFF_UP of its netdev
    ifflags = sections.get("ifflags")
    if _usable(ifflags):
        for line in ifflags.text.splitlines():
            m = _IFFLAGS_LINE.match(line.strip())
            if m:
                key = f"{m.group('ca')}/{int(m.group('dev_port') or 0) + 1}"
                ports_of[m.group("netdev")] = key
                admin_up[key] = bool(int(m.group("flags"), 16) & 0x1)
    netdev = sections.get("netdev")
    if _usable(netdev) and netdev.rc == 0 and "==>" in netdev.text:
        for m in parse_kind("ibdev2netdev", netdev.text)["mappings"]:
            ports_of[m["netdev"]] = f"{m['device']}/{m['port']}"
    if ports is not None:
        by_key = {_key(p): p for p in ports}
        for dev, key in ports_of.items():
            if key in by_key:
                by_key[key]["netdev"] = dev
        for key, port in by_key.items():
            port["admin_up"] = admin_up.get(key)
        facts["ports"] = ports
        facts["ports_active"] = sum(1 for p in ports if p["state"] == "Active")
        facts["ports_admin_down"] = sum(1 for p in ports if _excused(p))
        facts["ports_down"] = len(ports) - facts["ports_active"] - facts["ports_admin_down"]
        facts["link_layer"], fabric = _fabric(ports)
        rates = [p["rate_gbit_s"] for p in fabric if isinstance(p.get("rate_gbit_s"), int | float)]
        facts["min_rate_gbit_s"] = min(rates) if rates else None

    interval = sections.get("interval")
    if _usable(interval) and re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", interval.text):
        facts["sample_interval_s"] = float(interval.text)

    deltas: dict[str, dict[str, int]] = {}
    ib1, ib2 = sections.get("ib_1"), sections.get("ib_2")
    if _usable(ib1) and _usable(ib2):
        (before, _), (after, saturated) = _ib_sample(ib1.text), _ib_sample(ib2.text)
        if before and after:
            facts["saturated"] = saturated
            for key, now in after.items():
                for name, value in now.items():
                    d = _delta(before.get(key, {}).get(name), value)
                    if d is not None:
                        deltas.setdefault(key, {})[name] = d
            for fact, name in DELTA_FACTS.items():
                facts[fact] = sum(d.get(name, 0) for d in deltas.values())
            facts["rx_discards_delta"] = sum(d.get("out_of_buffer", 0) for d in deltas.values())

    eth1, eth2 = sections.get("eth_1"), sections.get("eth_2")
    if _usable(eth1) and _usable(eth2):
        before_eth, after_eth = _eth_sample(eth1.text, ports_of), _eth_sample(eth2.text, ports_of)
        storm_totals = {}
        for key, now in after_eth.items():
            sums_now = _eth_sums(now)
            storm_totals[key] = sums_now["pause_storm"]
            then = before_eth.get(key)
            if then is None:
                continue
            sums_then = _eth_sums(then)
            port = deltas.setdefault(key, {})
            for name in ("rx_pause", "tx_pause", "rx_discards", "pause_storm"):
                port[name] = _delta(sums_then[name], sums_now[name]) or 0
        if after_eth:
            facts["pause_storm_events"] = sum(storm_totals.values())
            facts["pause_storm_ports"] = {k: v for k, v in storm_totals.items() if v}
            for name in ("rx_pause", "tx_pause", "pause_storm"):
                facts[f"{name}_delta"] = sum(d.get(name, 0) for d in deltas.values())
            facts["rx_discards_delta"] = (facts["rx_discards_delta"] or 0) + sum(
                d.get("rx_discards", 0) for d in deltas.values())

    tcp1, tcp2 = sections.get("tcp_1"), sections.get("tcp_2")
    if _usable(tcp1) and _usable(tcp2):
        facts["tcp_retrans_delta"] = _delta(_tcp_retrans(tcp1.text), _tcp_retrans(tcp2.text))

    facts["counter_deltas"] = {key: {n: v for n, v in d.items() if v}
                               for key, d in sorted(deltas.items()) if any(d.values())}
    return facts


parse = guard_parse(NAME, _parse)


# --- checks ----------------------------------------------------------------------------------

def _expected_ports(facts: dict[str, Any], ctx: Context) -> tuple[list[dict[str, Any]], bool]:
    """The ports the node is expected to use, and whether the params named them."""
    selected = hca_selector(ctx.params.get("hcas"))
    ports = facts.get("ports") or []
    if selected is None:
        return ports, False
    return [p for p in ports if selected(p["ca"], p["port"])], True


def _scaled(ctx: Context, key: str, facts: dict[str, Any]) -> float:
    """A per-interval volume threshold, scaled up when the sample interval was longer."""
    base = ctx.threshold("network_sample_interval_s") or 1
    interval = facts.get("sample_interval_s") or base
    return ctx.threshold(key) * max(1.0, interval / base)


def _per_port(facts: dict[str, Any], name: str, limit: float) -> dict[str, int]:
    return {key: d[name] for key, d in (facts.get("counter_deltas") or {}).items()
            if d.get(name, 0) > limit}


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    missing, errors = facts.get("missing") or [], facts.get("errors") or {}
    ports = facts.get("ports")
    if ports is None:
        why = errors.get("ports") or ("neither ibstat nor ibv_devinfo is installed"
                                      if {"ibstat", "devinfo"} <= set(missing)
                                      else "no port state output")
        findings.append(not_measured(NAME, host, "IB/RoCE port state", why))
    elif not ports:
        findings.append(not_measured(NAME, host, "IB/RoCE port state", "no RDMA device found"))
    if ports and facts.get("symbol_error_delta") is None:
        findings.append(not_measured(NAME, host, "IB port counters",
                                     "the sysfs counters could not be sampled twice"))
    if ports and any(p.get("link_layer") == "Ethernet" for p in ports) \
            and facts.get("rx_pause_delta") is None:
        why = "ethtool is not installed" if "eth_1" in missing else \
            "ethtool -S gave no counters for the RoCE netdevs"
        findings.append(not_measured(NAME, host, "RoCE pause/discard counters", why))
    if facts.get("tcp_retrans_delta") is None:
        findings.append(not_measured(NAME, host, "TCP retransmits",
                                     "/proc/net/snmp could not be sampled twice"))

    expected, named = _expected_ports(facts, ctx)
    down = [p for p in expected if p.get("state") != "Active" and (named or not _excused(p))]
    if down:
        findings.append(finding(
            "ib-port-down", [host],
            f"{host}: {len(down)} port(s) not Active: "
            + ", ".join(f"{_key(p)} {p.get('state')}/{p.get('physical_state')}" for p in down),
            NAME, ports={_key(p): f"{p.get('state')}/{p.get('physical_state')}" for p in down}))

    findings += _rate_findings(host, expected, ctx)
    findings += _counter_findings(host, facts, ctx)
    return findings


def _rate_findings(host: str, ports: list[dict[str, Any]], ctx: Context) -> list[Finding]:
    active = [p for p in ports if p.get("state") == "Active"
              and isinstance(p.get("rate_gbit_s"), int | float)]
    best: dict[tuple[Any, Any], float] = {}
    for p in active:
        group = (p.get("ca_type"), p.get("link_layer"))
        best[group] = max(best.get(group, 0), p["rate_gbit_s"])
    expected_rate = ctx.threshold("ib_expected_rate_gbit_s")
    slow = {}
    for p in active:
        want = best[(p.get("ca_type"), p.get("link_layer"))]
        if expected_rate and p.get("link_layer") == "InfiniBand":
            want = max(want, expected_rate)
        if p["rate_gbit_s"] < want:
            slow[_key(p)] = {"rate_gbit_s": p["rate_gbit_s"], "expected_gbit_s": want}
    if not slow:
        return []
    return [finding(
        "ib-rate-degraded", [host],
        f"{host}: port(s) trained below their expected rate: "
        + ", ".join(f"{k} {v['rate_gbit_s']:g} Gb/s (expected {v['expected_gbit_s']:g})"
                    for k, v in slow.items()), NAME, ports=slow)]


def _counter_findings(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings = []
    interval = facts.get("sample_interval_s")
    during = f"in {interval:g} s" if interval else "between the samples"
    simple = (("ib-symbol-errors", ("symbol_error",), "ib_symbol_error_delta",
               "symbol errors rising"),
              ("ib-link-flapping", ("link_downed", "link_error_recovery"), None,
               "link going down or retraining"),
              ("ib-rcv-errors", ("port_rcv_errors",), "ib_port_rcv_errors_delta",
               "receive errors rising"),
              ("ib-xmit-discards", ("port_xmit_discards",), "ib_port_xmit_discards_delta",
               "transmit discards rising"))
    for code, names, key, what in simple:
        hits: dict[str, dict[str, int]] = {}
        for name in names:
            limit = ctx.threshold(key or f"ib_{name}_delta")
            for port, value in _per_port(facts, name, limit).items():
                hits.setdefault(port, {})[name] = value
        if hits:
            findings.append(finding(
                code, [host], f"{host}: {what} {during} on " + ", ".join(
                    f"{p} ({', '.join(f'{n} +{v}' for n, v in c.items())})"
                    for p, c in sorted(hits.items())),
                NAME, ports=hits, interval_s=interval))

    totals = facts.get("pause_storm_ports") or {}
    deltas = facts.get("counter_deltas") or {}
    storms = {key: {"delta": deltas.get(key, {}).get("pause_storm", 0),
                    "total": totals.get(key, 0)}
              for key in sorted(set(totals) | {k for k, d in deltas.items()
                                                if d.get("pause_storm", 0) > 0})}
    current = {k: s for k, s in storms.items() if s["delta"] > 0}
    if current:
        findings.append(finding(
            "pfc-storm", [host],
            f"{host}: PFC pause storm events on {', '.join(current)} "
            f"({sum(s['delta'] for s in current.values())} during the sample, "
            f"{sum(s['total'] for s in current.values())} since the driver loaded)",
            NAME, ports=current))
    elif storms:
        # A storm counted since the driver loaded but not now: worth knowing, not a reason to
        # drain the host today.
        findings.append(finding(
            "pfc-storm-history", [host],
            f"{host}: {sum(s['total'] for s in storms.values())} PFC pause storm event(s) on "
            f"{', '.join(storms)} since the driver loaded, none during the sample",
            NAME, ports=storms))
    limit = _scaled(ctx, "pause_frames_delta", facts)
    pauses = _ports_over(facts, ("rx_pause", "tx_pause"), limit)
    if pauses:
        findings.append(finding(
            "pfc-pause-high", [host],
            f"{host}: pause frames rising fast {during} on "
            + ", ".join(f"{k} (+{v})" for k, v in sorted(pauses.items())),
            NAME, ports=pauses, threshold=limit))
    limit = _scaled(ctx, "rx_discards_delta", facts)
    discards = _ports_over(facts, ("rx_discards", "out_of_buffer"), limit)
    if discards:
        findings.append(finding(
            "rx-discards", [host],
            f"{host}: receive discards {during} on "
            + ", ".join(f"{k} (+{v})" for k, v in sorted(discards.items())),
            NAME, ports=discards, threshold=limit))
    retrans, limit = facts.get("tcp_retrans_delta"), _scaled(ctx, "tcp_retrans_delta", facts)
    if retrans is not None and retrans > limit:
        findings.append(finding(
            "tcp-retransmits", [host], f"{host}: {retrans} TCP segments retransmitted {during}",
            NAME, tcp_retrans_delta=retrans, threshold=limit))
    return findings


# Host totals compared across the fleet, and the smallest rise that may count as an outlier.
_OUTLIER_KEYS = {"symbol_error_delta": 1, "link_downed_delta": 1, "link_error_recovery_delta": 1,
                 "port_rcv_errors_delta": 10, "port_xmit_discards_delta": 100,
                 "rx_pause_delta": 10000, "tx_pause_delta": 10000, "rx_discards_delta": 100}


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    findings = []
    findings += _fleet_ports(facts_by_host, ctx)
    if not ctx.threshold("ib_expected_rate_gbit_s"):
        findings += _fleet_rates(facts_by_host)
    k = ctx.threshold("outlier_mad_k")
    for key, min_spread in _OUTLIER_KEYS.items():
        values = {h: f[key] for h, f in facts_by_host.items()
                  if isinstance(f.get(key), int | float)}
        high = mad_outliers(values, k=k, high=True, min_spread=min_spread)
        if high:
            findings.append(finding(
                "port-counter-outlier", high,
                f"{key.removesuffix('_delta')} rising far faster than on the peers on "
                + ", ".join(f"{h} (+{v})" for h, v in sorted(high.items())),
                NAME, counter=key, values=high, peers=len(values)))
    return findings


def _fleet_ports(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    """Ports Active on most hosts but absent or excused here (the per-host rule spares them)."""
    reporting = {h: f["ports"] for h, f in facts_by_host.items() if f.get("ports") is not None}
    if len(reporting) < 2:
        return []
    active_on: dict[str, int] = {}
    for ports in reporting.values():
        for key in {_key(p) for p in ports if p.get("state") == "Active"}:
            active_on[key] = active_on.get(key, 0) + 1
    common = {key for key, n in active_on.items() if n * 2 > len(reporting)}
    selected = hca_selector(ctx.params.get("hcas"))
    findings = []
    for host, ports in reporting.items():
        by_key = {_key(p): p for p in ports}
        odd = {}
        for key in sorted(common):
            port = by_key.get(key)
            ca, _, number = key.partition("/")
            if selected and not selected(ca, int(number)):
                continue
            if port is None:
                odd[key] = "absent"
            elif _excused(port):
                odd[key] = f"{port.get('state')}/{port.get('physical_state')}, netdev down"
        if odd:
            findings.append(finding(
                "ib-port-down", [host],
                f"{host}: port(s) Active on most hosts are not here: "
                + ", ".join(f"{k} {v}" for k, v in odd.items()), NAME, ports=odd,
                active_on_hosts={k: active_on[k] for k in odd}))
    return findings


def _fleet_rates(facts_by_host: dict[str, dict[str, Any]]) -> list[Finding]:
    """Hosts whose fastest fabric port is below the fleet majority (all ports slow)."""
    fastest = {}
    for host, facts in facts_by_host.items():
        _layer, fabric = _fabric(facts.get("ports") or [])
        rates = [p["rate_gbit_s"] for p in fabric if isinstance(p.get("rate_gbit_s"), int | float)]
        if rates:
            fastest[host] = max(rates)
    majority, groups = majority_groups(fastest)
    if majority is None or len(groups[majority]) * 2 <= len(fastest):
        return []
    slow = {h: r for h, r in fastest.items() if r < majority}
    if not slow:
        return []
    return [finding(
        "ib-rate-degraded", slow,
        f"{len(slow)} host(s) run their fabric ports below the fleet's {majority:g} Gb/s: "
        + ", ".join(f"{h} ({r:g})" for h, r in sorted(slow.items())),
        NAME, majority_gbit_s=majority, rates=slow)]


PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=60.0)


def _ports_over(facts: dict[str, Any], counters: tuple[str, ...], limit: float) -> dict[str, int]:
    """Ports whose summed deltas of *counters* over the sample exceed *limit*."""
    sums = {key: sum(d.get(name, 0) for name in counters)
            for key, d in (facts.get("counter_deltas") or {}).items()}
    return {key: total for key, total in sums.items() if total > limit}
