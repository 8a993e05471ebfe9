"""The network probe's facts: its script (port state, then the counters sampled twice) and
the parser that turns that script's output into ports, per-port counter deltas and host totals.

What the facts mean, and which ports count as down, is told in probes/network.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes import linkhist, network_counters, network_samples, rdma_counters
from probes.base import Section, default_thresholds, guard_parse, script, split_sections
from probes.network_spare import adapter_ports, mark_job_unused, mark_spare_ports
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind
from probes.rdma_gid import nccl_env, nccl_env_sh

NAME = "network"

# Per-host delta facts named by the catalog, and the counter each one sums.
DELTA_FACTS = {"symbol_error_delta": "symbol_error", "link_downed_delta": "link_downed",
               "link_error_recovery_delta": "link_error_recovery",
               "port_rcv_errors_delta": "port_rcv_errors",
               "port_xmit_discards_delta": "port_xmit_discards"}

# Every IBA counter and hw_counters file of every port (port_counters, network_counters.py)
# but the hw_counters the hw sample reads (rdma_counters.py): no file is read twice.
_IB_SAMPLE = (
    "timeout 5 grep -H . /sys/class/infiniband/*/ports/*/counters/* "
    "/sys/class/infiniband/*/ports/*/hw_counters/* 2>/dev/null | grep -vE '/hw_counters/("
    + "|".join(rdma_counters.COUNTERS) + "):' | head -n 2000; true"
)
# ethtool -S of the RoCE netdevs: every aggregate counter (not rx0_*, ch7_*, bnxt's "[0]: "),
# those at 0 left out but the pause/discard/storm ones the checks sum (network_counters.py).
# Bounded at 1000 lines a netdev: mlx5 prints its groups in en_stats.c order (sw, vport, phy,
# pcie, per-priority, pfc stall, module), so the storm and module counters come after several
# hundred aggregate lines on a busy recent driver, and a lower bound could cut them off.
_ETH_SAMPLE = (
    "for d in /sys/class/infiniband/*; do "
    "grep -qx Ethernet \"$d\"/ports/*/link_layer 2>/dev/null || continue; "
    "for n in \"$d\"/device/net/*; do [ -e \"$n\" ] || continue; "
    "echo \"--- ${n##*/} ${d##*/}\"; "
    "timeout 5 ethtool -S \"${n##*/}\" 2>&1 | grep -vE '^[[:space:]]*(\\[[0-9]+\\]:|"
    "(rx|tx|ch|ptp_rx|ptp_tx|ptp_cq|qos_tx)[0-9]+_)' "
    "| awk '$NF != \"0\" || /pause|discard|storm|out_of_buffer/' | head -n 1000; "
    "done; done; true"
)
_TCP_SAMPLE = "grep '^Tcp:' /proc/net/snmp"
_HW_SAMPLE = ("timeout 5 grep -H . /sys/class/infiniband/*/ports/*/hw_counters/* 2>/dev/null | "
              "grep -E '" + rdma_counters.GREP_ERE + "'; true")
# RDMA device -> its PCI function, so kernel-log lines naming a PCI address map to a port.
_RDMA_PCI = ("for d in /sys/class/infiniband/*; do [ -e \"$d/device\" ] || continue; "
             "echo \"${d##*/} $(basename \"$(readlink -f \"$d/device\")\")\"; done; true")
# Link up/down lines of the kernel log, as gpu.py reads XIDs: dmesg's uptime stamps, else
# journalctl's monotonic ones (restricted dmesg), only the lines the dmesg-link parser knows.
_LINK_LOG = (
    "if out=$(timeout 10 dmesg 2>&1); then src=dmesg; "
    "elif out=$(timeout 10 journalctl -k -b --no-pager -o short-monotonic "
    "--since \"-{hours}h\" 2>&1); then src=journalctl; else src=none; fi; "
    "echo \"source $src\"; "
    "if [ \"$src\" = none ]; then printf '%s\\n' \"$out\" | tail -n 3; false; "
    "else printf '%s\\n' \"$out\" | grep -iE "
    "'link (up|down)|port:? ?[0-9]+ link|port module event|not seeing messages' "
    "| tail -n 400; true; fi"
)
_DEVINFO = (
    "if [ \"${ibstat_rc:-1}\" = 0 ]; then echo 'skipped: ibstat answered'; else "
    "timeout 10 ibv_devinfo -v | grep -E "
    "'hca_id:|sys_image_guid:|vendor_part_id:|port:|state:|link_layer:|active_width:|"
    "active_speed:'; fi"
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

_IFFLAGS_LINE = re.compile(r"^(?P<ca>\S+) (?P<netdev>\S+) (?P<flags>0x[0-9a-fA-F]+)"
                           r"(?: (?P<dev_port>\d+))?\s*$")
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


def _window_hours(params: Mapping[str, Any], default: Any) -> float:
    value = params.get("link_window_hours")
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return float(default)


def command(params: Mapping[str, Any]) -> str:
    interval = _interval(params, default_thresholds()["network_sample_interval_s"])
    interval = min(max(1, round(interval)), _MAX_INTERVAL_S)

    def sample(n: int) -> list[tuple[str, str]]:
        return [(f"ib_{n}", _IB_SAMPLE), (f"hw_{n}", _HW_SAMPLE), (f"eth_{n}", _ETH_SAMPLE),
                (f"tcp_{n}", _TCP_SAMPLE)]

    hours = max(1, round(_window_hours(params, default_thresholds()["link_flap_window_hours"])))
    sections = [
        ("clock", f"cat /proc/uptime; echo 'link_window_hours {hours}'"),
        ("rdma_pci", _RDMA_PCI),
        ("link_log", _LINK_LOG.format(hours=hours)),
        ("ibstat", "timeout 10 ibstat; ibstat_rc=$?; (exit $ibstat_rc)"),
        ("devinfo", _DEVINFO),
        ("netdev", "timeout 10 ibdev2netdev"),
        ("ifflags", _IFFLAGS),
        ("ncclenv", nccl_env_sh(params)),  # the job's NCCL_IB_HCA (network_spare.py)
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
                          "sm_lid": port.get("sm_lid"),
                          "ca_type": ca.get("ca_type"), "netdev": None,
                          "system_image_guid": ca.get("system_image_guid"),
                          "spare_port": False})
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
                "link_layer": port.get("link_layer"), "sm_lid": port.get("sm_lid"),
                "ca_type": f"MT{part}" if part else None, "netdev": None,
                "system_image_guid": device.get("sys_image_guid"), "spare_port": False})
    return ports


def fabric_ports(ports: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The link layer most Active ports use, and the Active ports of that link layer."""
    active = [p for p in ports if p.get("state") == "Active"]
    layers = [p.get("link_layer") for p in (active or ports) if p.get("link_layer")]
    if not layers:
        return None, []
    layer = max(dict.fromkeys(layers), key=layers.count)
    return layer, [p for p in active if p.get("link_layer") == layer]


def port_key(port: Mapping[str, Any]) -> str:
    return f"{port['ca']}/{port['port']}"


def is_excused(port: Mapping[str, Any]) -> bool:
    """A non-Active port that is unused rather than broken: an Ethernet port whose netdev is
    administratively down, the spare port of a multi-port adapter that never linked
    (``spare_port``, see :func:`mark_spare_ports`), an SR-IOV VF its own PF's host holds
    unassigned (``idle_vf``), or a port never linked that the job's NCCL_IB_HCA leaves out
    (``job_unused``; both in probes/network_spare.py)."""
    if port.get("state") == "Active":
        return False
    if port.get("spare_port") or port.get("idle_vf") or port.get("job_unused"):
        return True
    if port.get("link_layer") != "Ethernet":
        return False
    if port.get("admin_up") is not None:
        return not port["admin_up"]
    return port.get("physical_state") == "Disabled"  # flags unknown: benefit of the doubt


def _ran(sections: Mapping[str, Section], name: str) -> Section | None:
    """Section *name* when its tool was there to run; None when it is absent or missing."""
    sec = sections.get(name)
    return sec if sec is not None and not sec.missing else None


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
        "hw_counter_deltas": {}, "retransmit_delta": None, "ack_timeout_delta": None,
        "rnr_retry_delta": None, "retransmit_unmeasured": None,
        "out_of_sequence_delta": None, "retransmit_rate_per_s": None, "cnp_delta": None,
        "ecn_marked_delta": None, "link_downed_total": None, "link_error_recovery_total": None,
        "link_totals_by_port": {}, "link_events": [], "link_flaps": {},
        "link_flap_events": None, "link_log_readable": None, "link_window_hours": None,
        "uptime_s": None, "port_counters": [], "ports_unsampled": [],
    }
    for name, sec in sections.items():
        if sec.missing:
            facts["missing"].append(name)

    ports = None
    ibstat, devinfo = _ran(sections, "ibstat"), _ran(sections, "devinfo")
    if ibstat is not None and ibstat.rc == 0 and "CA '" in ibstat.text:
        ports, facts["port_tool"] = _ports_from_ibstat(ibstat.text), "ibstat"
    elif devinfo is not None and "hca_id:" in devinfo.text:
        ports, facts["port_tool"] = _ports_from_devinfo(devinfo.text), "ibv_devinfo"
    elif devinfo is not None and "No IB devices found" in devinfo.text:
        ports, facts["port_tool"] = [], "ibv_devinfo"
    elif ibstat is not None and ibstat.rc == 0 and ibstat.text.strip():
        raise ParseError("network: the ibstat section is not ibstat output")
    elif ibstat is not None and ibstat.rc == 0:
        ports, facts["port_tool"] = [], "ibstat"  # ibstat on a host without any CA
    elif (failed := ibstat if ibstat is not None else devinfo) is not None:
        # ibstat that panics after listing some CAs (exit 255): say why, not "CA 'mlx5_0'"
        lines = failed.text.strip().splitlines() or ["no output"]
        why = [line for line in lines if re.search(r"ib(?:panic|warn|error):|rror|ailed", line)]
        facts["errors"]["ports"] = (why or lines)[0].strip()[:200]

    ports_of: dict[str, str] = {}  # netdev -> "ca/port"
    admin_up: dict[str, bool] = {}  # "ca/port" -> IFF_UP of its netdev
    ifflags = _ran(sections, "ifflags")
    if ifflags is not None:
        for line in ifflags.text.splitlines():
            m = _IFFLAGS_LINE.match(line.strip())
            if m:
                key = f"{m.group('ca')}/{int(m.group('dev_port') or 0) + 1}"
                ports_of[m.group("netdev")] = key
                admin_up[key] = bool(int(m.group("flags"), 16) & 0x1)
    netdev = _ran(sections, "netdev")
    if netdev is not None and netdev.rc == 0 and "==>" in netdev.text:
        for m in parse_kind("ibdev2netdev", netdev.text)["mappings"]:
            ports_of[m["netdev"]] = f"{m['device']}/{m['port']}"
    if ports is not None:
        by_key = {port_key(p): p for p in ports}
        for dev, key in ports_of.items():
            if key in by_key:
                by_key[key]["netdev"] = dev
        for key, port in by_key.items():
            port["admin_up"] = admin_up.get(key)
        adapter_ports(ports)
        facts["ports"] = ports
        facts["ports_active"] = sum(1 for p in ports if p["state"] == "Active")
        facts["link_layer"], fabric = fabric_ports(ports)
        rates = [p["rate_gbit_s"] for p in fabric if isinstance(p.get("rate_gbit_s"), int | float)]
        facts["min_rate_gbit_s"] = min(rates) if rates else None

    interval = _ran(sections, "interval")
    if interval is not None and re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", interval.text):
        facts["sample_interval_s"] = float(interval.text)

    deltas: dict[str, dict[str, int]] = {}
    samples: dict[str, Any] = {"ib": None, "hw": None, "eth": None}
    ib1, ib2 = _ran(sections, "ib_1"), _ran(sections, "ib_2")
    if ib1 is not None and ib2 is not None:
        before, _ = network_samples.ib_sample(ib1.text)
        after, saturated = network_samples.ib_sample(ib2.text)
        samples["ib"] = (before, after)
        if before and after:
            mark_spare_ports(ports or [], after)
            env = nccl_env(job.text) if (job := _ran(sections, "ncclenv")) else None
            mark_job_unused(ports or [], after, (env or {}).get("NCCL_IB_HCA"))
            facts["saturated"] = saturated
            # Active ports the sample has no counters for (the listing cut at its line bound
            # on a host with many SR-IOV functions, a file that would not read): not measured
            facts["ports_unsampled"] = [
                port_key(p) for p in ports or [] if p["state"] == "Active"
                and not (before.get(port_key(p)) and after.get(port_key(p)))]
            for key, now in after.items():
                for name, value in now.items():
                    d = network_samples.delta(before.get(key, {}).get(name), value)
                    if d is not None:
                        deltas.setdefault(key, {})[name] = d
            for fact, name in DELTA_FACTS.items():  # None where no port has the counter
                facts[fact] = sum(d.get(name, 0) for d in deltas.values()) \
                    if any(name in d for d in deltas.values()) else None  # (EFA: hw_ only)
            _layer, fabric = fabric_ports(ports or [])
            linkhist.link_totals(after, {port_key(p) for p in fabric}, facts)
            facts["rx_discards_delta"] = sum(d.get("out_of_buffer", 0) for d in deltas.values())

    if ports is not None:
        facts["ports_admin_down"] = sum(1 for p in ports if is_excused(p))
        facts["ports_down"] = len(ports) - facts["ports_active"] - facts["ports_admin_down"]

    eth1, eth2 = _ran(sections, "eth_1"), _ran(sections, "eth_2")
    if eth1 is not None and eth2 is not None:
        before_eth = network_samples.eth_sample(eth1.text, ports_of)
        after_eth = network_samples.eth_sample(eth2.text, ports_of)
        samples["eth"] = (before_eth, after_eth)
        storm_totals = {}
        for key, now in after_eth.items():
            sums_now = network_samples.eth_sums(now)
            storm_totals[key] = sums_now["pause_storm"]
            then = before_eth.get(key)
            if then is None:
                continue
            sums_then = network_samples.eth_sums(then)
            port = deltas.setdefault(key, {})
            for name in ("rx_pause", "tx_pause", "rx_discards", "pause_storm"):
                port[name] = network_samples.delta(sums_then[name], sums_now[name]) or 0
        if after_eth:
            facts["pause_storm_events"] = sum(storm_totals.values())
            facts["pause_storm_ports"] = {k: v for k, v in storm_totals.items() if v}
            for name in ("rx_pause", "tx_pause", "pause_storm"):
                facts[f"{name}_delta"] = sum(d.get(name, 0) for d in deltas.values())
            facts["rx_discards_delta"] = (facts["rx_discards_delta"] or 0) + sum(
                d.get("rx_discards", 0) for d in deltas.values())

    hw1, hw2 = _ran(sections, "hw_1"), _ran(sections, "hw_2")
    rdma_counters.parse_hw(hw1.text if hw1 else None, hw2.text if hw2 else None,
                           facts["sample_interval_s"], facts)
    if hw1 is not None and hw2 is not None:
        samples["hw"] = (rdma_counters.hw_sample(hw1.text), rdma_counters.hw_sample(hw2.text))
    facts["port_counters"] = network_counters.port_counters(
        ports or [], {key: dev for dev, key in ports_of.items()}, **samples)
    clock, log, rdma_pci = (_ran(sections, n) for n in ("clock", "link_log", "rdma_pci"))
    linkhist.link_history(clock.text if clock else None, log.text if log else None,
                          rdma_pci.text if rdma_pci else None, ports or [], ports_of, facts)

    tcp1, tcp2 = _ran(sections, "tcp_1"), _ran(sections, "tcp_2")
    if tcp1 is not None and tcp2 is not None:
        facts["tcp_retrans_delta"] = network_samples.delta(
            network_samples.tcp_retrans(tcp1.text), network_samples.tcp_retrans(tcp2.text))

    facts["counter_deltas"] = {key: {n: v for n, v in d.items() if v}
                               for key, d in sorted(deltas.items()) if any(d.values())}
    return facts


parse = guard_parse(NAME, _parse)
