"""The network probe's checks: per host (ports down or slow, error, pause and discard counters
rising during the sample) and across the fleet (ports Active on most hosts but not here, a whole
host trained below the fleet, counters rising far faster than on the peers).
"""

from __future__ import annotations

from typing import Any

from probes import linkhist, rdma_counters
from probes.base import Context, finding, fleet_minority, mad_outliers, not_measured
from probes.hostfold import fold_hosts
from probes.model import Finding
from probes.network_facts import NAME, fabric_ports, is_excused, port_key
from probes.topology import hca_selector


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
    return float(ctx.threshold(key) * max(1.0, interval / base))


def _per_port(facts: dict[str, Any], name: str, limit: float) -> dict[str, int]:
    return {key: d[name] for key, d in (facts.get("counter_deltas") or {}).items()
            if d.get(name, 0) > limit}


def _ports_over(facts: dict[str, Any], counters: tuple[str, ...], limit: float) -> dict[str, int]:
    """Ports whose summed deltas of *counters* over the sample exceed *limit*."""
    sums = {key: sum(d.get(name, 0) for name in counters)
            for key, d in (facts.get("counter_deltas") or {}).items()}
    return {key: total for key, total in sums.items() if total > limit}


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
                                     "no IBA PortCounters (symbol_error ...) were sampled "
                                     "twice"))
    unsampled = facts.get("ports_unsampled") or []
    if unsampled:
        findings.append(not_measured(
            NAME, host, f"IB port counters of {len(unsampled)} Active port(s)",
            f"{', '.join(unsampled[:8])}{' ...' if len(unsampled) > 8 else ''}: no counter "
            "was read for them in both samples"))
    # RoCE counters matter for Ethernet ports in use: an uncabled, administratively down NIC
    # (is_excused) has none to read, and its absence measures nothing that matters.
    if ports and any(p.get("link_layer") == "Ethernet" and not is_excused(p) for p in ports) \
            and facts.get("rx_pause_delta") is None:
        why = "ethtool is not installed" if "eth_1" in missing else \
            "ethtool -S gave no counters for the RoCE netdevs"
        findings.append(not_measured(NAME, host, "RoCE pause/discard counters", why))
    # An error counter at its IBA width stops counting (ib-sysfs-counters "saturated"): a rise
    # during the sample cannot show on it, so that port's errors are not measured, not zero.
    stuck = [key for key in facts.get("saturated") or []
             if key.rsplit(":", 1)[-1] != "port_xmit_wait"]
    if stuck:
        findings.append(not_measured(
            NAME, host, "rises of saturated IB error counters",
            f"{', '.join(stuck[:8])}{' ...' if len(stuck) > 8 else ''} sit at their maximum "
            "(the IBA PortCounters width) and cannot show a rise until they are cleared "
            "(perfquery -R)"))
    if facts.get("tcp_retrans_delta") is None:
        findings.append(not_measured(NAME, host, "TCP retransmits",
                                     "/proc/net/snmp could not be sampled twice"))

    expected, named = _expected_ports(facts, ctx)
    down = [p for p in expected if p.get("state") != "Active" and (named or not is_excused(p))]
    waiting = [p for p in down if waits_for_sm(p)]
    down = [p for p in down if not waits_for_sm(p)]
    if waiting:
        findings.append(finding(
            "ib-port-init", [host],
            f"{host}: {len(waiting)} port(s) physically up but not configured by a subnet "
            "manager: " + ", ".join(f"{port_key(p)} {p.get('state')}/{p.get('physical_state')}"
                                    for p in waiting),
            NAME, ports={port_key(p): f"{p.get('state')}/{p.get('physical_state')}"
                         for p in waiting}))
    if down:
        findings.append(finding(
            "ib-port-down", [host],
            f"{host}: {len(down)} port(s) not Active: "
            + ", ".join(f"{port_key(p)} {p.get('state')}/{p.get('physical_state')}" for p in down),
            NAME, ports={port_key(p): f"{p.get('state')}/{p.get('physical_state')}" for p in down}))

    if "link_log" in errors:
        findings.append(not_measured(NAME, host, "link down/up history (kernel log)",
                                     errors["link_log"]))
    findings += _rate_findings(host, expected, ctx)
    findings += _counter_findings(host, facts, ctx)
    findings += linkhist.flap_findings(host, facts, ctx)
    findings += rdma_counters.retransmit_findings(host, facts, ctx)
    return findings


def _rate_group(port: dict[str, Any], subnet: bool = True) -> tuple[Any, ...]:
    """The ports a port's rate is compared with: the same chip (CA type), link layer and
    adapter form (``adapter_ports``: single-port or dual-port card). One chip ships as several
    products: a DGX H100 has "eight single-port NVIDIA ConnectX-7 VPI, 2x dual-port QSFP112
    NVIDIA ConnectX-7 VPI" (NVIDIA DGX BasePOD reference architecture, "Core Components"), all
    MT4129, and the dual-port storage cards often join a slower storage fabric by design.
    With *subnet*, an InfiniBand port is compared only with ports of its own subnet: every
    port of a subnet reports the LID of the subnet's one master SM (IBA PortInfo MasterSMLID,
    ibstat "SM lid"), so a different SM lid is another fabric (a storage fabric of its own
    speed), whose rate says nothing of the rails' (_fleet_port_rates compares it instead)."""
    sm_lid = port.get("sm_lid") if subnet and port.get("link_layer") == "InfiniBand" else None
    return (port.get("ca_type"), port.get("link_layer"), port.get("adapter_ports"), sm_lid)


def _below_group(ports: list[dict[str, Any]], subnet: bool = True) -> dict[str, float]:
    """Active ports below the fastest port of their rate group: key -> that fastest rate."""
    active = [p for p in ports if p.get("state") == "Active"
              and isinstance(p.get("rate_gbit_s"), int | float)]
    best: dict[tuple[Any, ...], float] = {}
    for p in active:
        group = _rate_group(p, subnet)
        best[group] = max(best.get(group, 0), p["rate_gbit_s"])
    return {port_key(p): best[_rate_group(p, subnet)] for p in active}


def _rate_findings(host: str, ports: list[dict[str, Any]], ctx: Context) -> list[Finding]:
    best = _below_group(ports)
    expected_rate = ctx.threshold("ib_expected_rate_gbit_s")
    slow = {}
    for p in ports:
        if port_key(p) not in best:
            continue
        want = best[port_key(p)]
        if expected_rate and p.get("link_layer") == "InfiniBand":
            want = max(want, expected_rate)
        if p["rate_gbit_s"] < want:
            slow[port_key(p)] = {"rate_gbit_s": p["rate_gbit_s"], "expected_gbit_s": want}
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
              # port_rcv_remote_physical_errors is not this link's: packets a switch upstream
              # found bad and ended with EBP (catalogue ib-remote-physical-errors, fabric)
              ("ib-rcv-errors", ("local_link_integrity_errors", "excessive_buffer_overrun_errors"),
               "ib_link_integrity_errors_delta", "link integrity errors rising"),
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


def waits_for_sm(port: dict[str, Any]) -> bool:
    """An InfiniBand port with a physical link (LinkUp) that no subnet manager has brought to
    Active: Initializing (no LID assigned yet) or Armed. Only the SM moves a port from
    Initialize to Armed to Active (InfiniBand Architecture spec, port state machine);
    "Initializing: physical connection has been made ... but it hasn't been discovered by the
    subnet manager ... make sure opensm is running" (Advanced Clustering, "InfiniBand Port
    States"). A cable or optic fault shows as Down/Polling instead."""
    return (port.get("state") in ("Initializing", "Init", "Armed")
            and port.get("physical_state") == "LinkUp"
            and port.get("link_layer") in ("InfiniBand", None))


def _subnet_manager(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    """Ports waiting for a subnet manager on several hosts at once: the SM (opensm, UFM, a
    managed switch's SM) is down or does not reach that subnet, not N bad cables."""
    waiting: dict[str, list[str]] = {}
    for host, facts in facts_by_host.items():
        ports = [port_key(p) for p in facts.get("ports") or [] if waits_for_sm(p)
                 and not is_excused(p)]  # an unassigned VF (policy Up) waits for a vSM
        if ports:
            waiting[host] = ports
    if len(waiting) < ctx.threshold("ib_sm_outage_min_hosts"):
        return []
    by_port: dict[str, list[str]] = {}
    for host, ports in waiting.items():
        for key in ports:
            by_port.setdefault(key, []).append(host)
    return [finding(
        "subnet-manager-outage", waiting,
        f"IB ports are physically up but unconfigured (Initializing/Armed, no LID from a subnet "
        f"manager) on {len(waiting)} host(s) at once: "
        + "; ".join(f"{key} on {fold_hosts(hosts)}" for key, hosts in sorted(by_port.items())[:8])
        + " - the subnet manager is down or does not reach these ports",
        NAME, ports=dict(sorted(waiting.items())[:32]),
        by_port={k: sorted(v) for k, v in sorted(by_port.items())})]


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    findings = []
    findings += _subnet_manager(facts_by_host, ctx)
    findings += _fleet_ports(facts_by_host, ctx)
    findings += linkhist.totals_findings(facts_by_host, ctx)
    findings += rdma_counters.fleet_findings(facts_by_host, ctx)
    if not ctx.threshold("ib_expected_rate_gbit_s"):
        findings += _fleet_rates(facts_by_host)
        findings += _fleet_port_rates(facts_by_host)
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
        for key in {port_key(p) for p in ports if p.get("state") == "Active"}:
            active_on[key] = active_on.get(key, 0) + 1
    common = {key for key, n in active_on.items() if n * 2 > len(reporting)}
    selected = hca_selector(ctx.params.get("hcas"))
    findings = []
    for host, ports in reporting.items():
        by_key = {port_key(p): p for p in ports}
        odd = {}
        for key in sorted(common):
            port = by_key.get(key)
            ca, _, number = key.partition("/")
            if selected and not selected(ca, int(number)):
                continue
            if port is None:
                odd[key] = "absent"
            elif is_excused(port):
                odd[key] = (f"{port.get('state')}/{port.get('physical_state')}, "
                            + ("never linked" if port.get("spare_port")
                               or port.get("job_unused") else "unassigned VF"
                               if port.get("idle_vf") else "netdev down"))
        # Names most hosts lack, Active here: the same ports under other device names (the
        # inbox rdma-core's udev rule renames mlx5_0 to ibp26s0 by PCI location, MLNX_OFED
        # keeps mlx5_0: rdma-core kernel-boot/rdma-persistent-naming.rules, NAME_PCI). As many
        # of those as ports "absent" are the absent ones renamed, not missing.
        renamed = {port_key(p) for p in ports if p.get("state") == "Active"} - common
        absent = [key for key, why in odd.items() if why == "absent"]
        if absent and len(renamed) >= len(absent):
            odd = {key: why for key, why in odd.items() if why != "absent"}
        if odd:
            findings.append(finding(
                "ib-port-down", [host],
                f"{host}: port(s) Active on most hosts are not here: "
                + ", ".join(f"{k} {v}" for k, v in odd.items()), NAME, ports=odd,
                active_on_hosts={k: active_on[k] for k in odd}))
    return findings


def _fleet_rates(facts_by_host: dict[str, dict[str, Any]]) -> list[Finding]:
    """Hosts whose fastest fabric port is below the fleet majority (all ports slow), among the
    hosts whose fabric ports are of the same card types: a walk over two generations (HDR
    ConnectX-6 nodes beside NDR ConnectX-7 ones) is two fleets, each at its own rate."""
    fastest: dict[tuple[str, ...], dict[str, float]] = {}
    for host, facts in facts_by_host.items():
        _layer, fabric = fabric_ports(facts.get("ports") or [])
        rates = [p["rate_gbit_s"] for p in fabric if isinstance(p.get("rate_gbit_s"), int | float)]
        if rates:
            kind = tuple(sorted({str(p.get("ca_type")) for p in fabric}))
            fastest.setdefault(kind, {})[host] = max(rates)
    findings = []
    for _kind, hosts in sorted(fastest.items()):
        slow = fleet_minority(hosts, below=True)
        if slow:
            findings.append(finding(
                "ib-rate-degraded", slow.hosts,
                slow.below("run their fabric ports below", "g", " Gb/s"),
                NAME, majority_gbit_s=slow.majority, rates=slow.hosts))
    return findings


def _fleet_port_rates(facts_by_host: dict[str, dict[str, Any]]) -> list[Finding]:
    """A port slower than its card's other ports but on another subnet (_rate_group spares it)
    is judged against the same port on the other hosts: below the rate most hosts run it at,
    it trained low; at that rate, it is the design of that fabric."""
    rates: dict[str, dict[str, float]] = {}  # port key -> host -> rate
    spared: dict[str, list[str]] = {}  # host -> ports slower than their card's other ports
    for host, facts in facts_by_host.items():
        ports = facts.get("ports") or []
        mine, card = _below_group(ports), _below_group(ports, subnet=False)
        for p in ports:
            key = port_key(p)
            if key in mine:
                rates.setdefault(key, {})[host] = p["rate_gbit_s"]
                if p["rate_gbit_s"] >= mine[key] and p["rate_gbit_s"] < card[key]:
                    spared.setdefault(host, []).append(key)
    slow: dict[str, dict[str, Any]] = {}
    for host, keys in spared.items():
        for key in keys:
            peers = rates[key]
            low = fleet_minority(peers, below=True) if len(peers) >= 3 else None
            if low and host in low.hosts:
                slow.setdefault(host, {})[key] = {"rate_gbit_s": peers[host],
                                                  "expected_gbit_s": low.majority}
    return [finding(
        "ib-rate-degraded", [host],
        f"{host}: port(s) trained below the rate most hosts run them at: "
        + ", ".join(f"{k} {v['rate_gbit_s']:g} Gb/s (fleet {v['expected_gbit_s']:g})"
                    for k, v in ports.items()), NAME, ports=ports)
        for host, ports in sorted(slow.items())]
