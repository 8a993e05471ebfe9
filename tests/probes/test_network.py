"""The network probe: port states and rates, and counters judged as deltas between two samples."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from probes.catalog import load_catalog
from probes.network import PROBE
from probes.parsers import ParseError
from tests.probes.probe_outputs import (
    baseline,
    by_code,
    codes,
    context,
    edit,
    output,
    real,
    replace,
    section_text,
    sh_accepts,
)

BASE = baseline("network")
REAL_12_CAS = real("ibstat__12-cas-h100-node-8x-cx7-ndr400-plus-cx6dx-eth-tabs")
REAL_B300 = real("ibstat__11-cas-connectx8-down-connectx7-active-b300-host")


def ca_block(text: str, ca: str) -> str:
    """The lines of one CA in the ibstat section."""
    ibstat = section_text(text, "ibstat")
    m = re.search(rf"(?ms)^CA '{re.escape(ca)}'\n.*?(?=^CA '|\Z)", ibstat)
    assert m, ca
    return m.group(0)


def set_port(text: str, ca: str, **fields: str) -> str:
    """Edit State / Physical state / Rate / Link layer of a CA's port in the ibstat section."""
    block = ca_block(text, ca)
    new = block
    for key, value in fields.items():
        label = {"state": "State", "phys": "Physical state", "rate": "Rate",
                 "layer": "Link layer"}[key]
        new = re.sub(rf"(?m)^(\s*{label}: ).*$", lambda m, v=value: m.group(1) + v, new, count=1)
    return edit(text, "ibstat", block, new)


def set_counter(text: str, section: str, ca: str, name: str, value: int) -> str:
    """Set one sysfs counter of <ca>/1 in an ib_1 / ib_2 sample."""
    path = f"/sys/class/infiniband/{ca}/ports/1/counters/{name}:"
    line = next(x for x in section_text(text, section).splitlines() if x.startswith(path))
    return edit(text, section, line + "\n", f"{path}{value}\n")


def counter(text: str, section: str, ca: str, name: str) -> int:
    path = f"/sys/class/infiniband/{ca}/ports/1/counters/{name}:"
    line = next(x for x in section_text(text, section).splitlines() if x.startswith(path))
    return int(line.rsplit(":", 1)[1])


def bump(text: str, ca: str, name: str, by: int) -> str:
    """A counter that rose by ``by`` between the two samples."""
    return set_counter(text, "ib_2", ca, name, counter(text, "ib_1", ca, name) + by)


def real_12_cas() -> str:
    """The real 12-CA H100 node: 8 IB ports, CX6-DX mlx5_1 up and mlx5_2/7/8 set down."""
    eth = {"mlx5_1": ("ens1f0np0", "0x1003"), "mlx5_2": ("ens1f1np1", "0x1002"),
           "mlx5_7": ("ens2f0np0", "0x1002"), "mlx5_8": ("ens2f1np1", "0x1002")}
    flags = "".join(f"{ca} {dev} {flag} 0\n" for ca, (dev, flag) in eth.items())
    flags += "".join(f"mlx5_{i} ibp{i}s0 0x1003 0\n" for i in (0, 3, 4, 5, 6, 9, 10, 11))
    sample = "--- ens1f0np0 mlx5_1\n" + ethtool(ETH_COUNTERS)
    text = replace(BASE, ibstat=REAL_12_CAS, netdev=None, ifflags=flags, eth_1=sample,
                   eth_2=sample)
    return with_counters(text, "mlx5_1", "mlx5_9", "mlx5_10", "mlx5_11")


def with_counters(text: str, *cas: str) -> str:
    """*text* with mlx5_0's counter lines copied for each of *cas* (ports the edit added to the
    ibstat section: a port without counters is not measured)."""
    for name in ("ib_1", "ib_2", "hw_1", "hw_2"):  # hw: the retransmit counters, else not
        body = section_text(text, name)            # measured (probes/rdma_counters.py)
        mine = [line for line in body.splitlines(True) if "/mlx5_0/" in line]
        extra = "".join(line.replace("/mlx5_0/", f"/{ca}/") for ca in cas for line in mine)
        text = replace(text, **{name: body + extra})
    return text


def check(text: str, **ctx) -> list:
    return PROBE.check("gpu001", PROBE.parse(text), context(**ctx))


# --- a RoCE node: two ConnectX-7 ports running Ethernet, with ethtool counters ---------------

ETH_COUNTERS = {
    "rx_discards_phy": 0, "tx_discards_phy": 0, "rx_pause_ctrl_phy": 0, "tx_pause_ctrl_phy": 0,
    "rx_prio3_pause": 1822031, "rx_prio3_pause_duration": 912201, "tx_prio3_pause": 20311,
    "tx_prio3_pause_duration": 10533, "rx_prio3_pause_transition": 901022,
    "tx_prio3_pause_transition": 10120, "rx_out_of_buffer": 0,
    "tx_pause_storm_warning_events": 0, "tx_pause_storm_error_events": 0,
}


def ethtool(counters: dict[str, int]) -> str:
    return "".join(f"     {name}: {value}\n" for name, value in counters.items())


def roce(before: dict[str, dict[str, int]] | None = None,
         after: dict[str, dict[str, int]] | None = None, eth: bool = True) -> str:
    """Two RoCE ports (mlx5_0 ens1f0np0, mlx5_1 ens1f1np1), ethtool counters changed per port."""
    text = BASE
    for ca in ("mlx5_0", "mlx5_1"):
        text = set_port(text, ca, layer="Ethernet")
    keep = ("mlx5_0", "mlx5_1")
    ibstat = "".join(ca_block(text, ca) for ca in keep)
    netdevs = {"mlx5_0": "ens1f0np0", "mlx5_1": "ens1f1np1"}
    samples = {}
    for n, changes in ((1, before or {}), (2, after or {})):
        body = ""
        for ca in keep:
            body += f"--- {netdevs[ca]} {ca}\n" + ethtool({**ETH_COUNTERS, **changes.get(ca, {})})
        samples[n] = body if eth else None

    def ib(n: int) -> str:
        return "".join(line + "\n" for line in section_text(BASE, f"ib_{n}").splitlines()
                       if any(f"/{ca}/" in line for ca in keep))

    return output({
        "ibstat": ibstat,
        "devinfo": "skipped: ibstat answered\n",
        "netdev": "".join(f"{ca} port 1 ==> {dev} (Up)\n" for ca, dev in netdevs.items()),
        "ifflags": "".join(f"{ca} {dev} 0x1003 0\n" for ca, dev in netdevs.items()),
        "interval": "3\n",
        "ib_1": ib(1), "eth_1": samples[1], "tcp_1": section_text(BASE, "tcp_1"),
        "sleep": "",
        "ib_2": ib(2), "eth_2": samples[2], "tcp_2": section_text(BASE, "tcp_2"),
    })


# --- the script ------------------------------------------------------------------------------

def test_command_is_one_posix_script():
    # `sh -n` accepts it; the counters are sampled twice, the default 3 s apart.
    script = PROBE.command({})
    assert sh_accepts(script).returncode == 0
    assert "sleep 3" in script
    assert script.count("/sys/class/infiniband/*/ports/*/counters/*") == 2


@pytest.mark.parametrize(("params", "sleep"), [
    ({"interval_s": 5}, "sleep 5"),                   # the params override the threshold
    ({"network_sample_interval_s": 2}, "sleep 2"),    # ... under either name
    ({"interval_s": 600}, "sleep 20"),                # bounded, so the probe cannot hang
])
def test_command_sample_interval(params, sleep):
    assert sleep in PROBE.command(params)


def test_script_output_on_a_fake_sysfs_parses(tmp_path: Path):
    # The real script, its sysfs paths pointed at a fake tree and ibstat/ethtool stubbed.
    ib = tmp_path / "sys" / "class" / "infiniband"
    for ca, layer, netdev in (("mlx5_0", "InfiniBand", "ibp26s0"),
                              ("mlx5_1", "Ethernet", "ens1f1np1")):
        port = ib / ca / "ports" / "1"
        (port / "counters").mkdir(parents=True)
        (port / "hw_counters").mkdir()
        (port / "link_layer").write_text(layer + "\n")
        for name in ("symbol_error", "link_downed", "port_rcv_errors", "port_xmit_data",
                     "VL15_dropped"):
            (port / "counters" / name).write_text("7\n")
        (port / "hw_counters" / "out_of_buffer").write_text("0\n")
        net = ib / ca / "device" / "net" / netdev
        net.mkdir(parents=True)
        (net / "flags").write_text("0x1003\n")
        (net / "dev_port").write_text("0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ibstat = set_port(BASE, "mlx5_1", layer="Ethernet")
    (tmp_path / "ibstat.txt").write_text(ca_block(ibstat, "mlx5_0") + ca_block(ibstat, "mlx5_1"))
    (tmp_path / "ethtool.txt").write_text("NIC statistics:\n" + ethtool(ETH_COUNTERS)
                                          + "     rx_prio0_bytes: 88034564921216\n")
    for tool, body in (("ibstat", f"cat {tmp_path}/ibstat.txt"),
                       ("ethtool", f"cat {tmp_path}/ethtool.txt")):
        (bin_dir / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / tool).chmod(0o755)
    script = PROBE.command({"interval_s": 1}).replace("/sys/class/infiniband", str(ib))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env,
                         timeout=60)
    facts = PROBE.parse(run.stdout)
    assert [p["netdev"] for p in facts["ports"]] == ["ibp26s0", "ens1f1np1"]
    assert facts["symbol_error_delta"] == 0 and facts["rx_pause_delta"] == 0
    assert facts["tcp_retrans_delta"] is not None and facts["pause_storm_events"] == 0


# --- healthy ---------------------------------------------------------------------------------

def test_baseline_facts():
    # 8 NDR400 IB ports Active; counters flat except data; TCP retransmits 7 in 3 s.
    facts = PROBE.parse(BASE)
    assert [p["ca"] for p in facts["ports"]] == [f"mlx5_{i}" for i in range(8)]
    assert facts["ports"][0] == {"ca": "mlx5_0", "port": 1, "state": "Active",
                                 "physical_state": "LinkUp", "rate_gbit_s": 400,
                                 "link_layer": "InfiniBand", "sm_lid": 334, "ca_type": "MT4129",
                                 "netdev": "ibp26s0", "admin_up": True,
                                 "system_image_guid": "0x946dae0300cde72c",
                                 "adapter_ports": 1, "spare_port": False, "idle_vf": False,
                                 "job_unused": False}
    assert facts["ports_active"] == 8 and facts["ports_down"] == 0
    assert facts["min_rate_gbit_s"] == 400 and facts["link_layer"] == "InfiniBand"
    for key in ("symbol_error_delta", "link_downed_delta", "link_error_recovery_delta",
                "port_rcv_errors_delta", "port_xmit_discards_delta"):
        assert facts[key] == 0, key
    assert facts["rx_pause_delta"] is None  # no Ethernet port: pause frames do not apply
    assert facts["tcp_retrans_delta"] == 7 and facts["sample_interval_s"] == 3
    assert set(load_catalog().probes["network"].facts) <= set(facts)
    json.dumps(facts)


def test_baseline_raises_nothing():
    # Healthy node (old symbol errors and a boot-time link_downed are totals, not deltas).
    facts = PROBE.parse(BASE)
    assert PROBE.check("gpu001", facts, context()) == []
    assert PROBE.check_fleet({f"gpu00{i}": facts for i in range(1, 6)}, context()) == []


def test_real_12_ca_node_with_unused_ethernet_ports():
    # The real H100 node: 3 front-end CX6-DX ports Down/Disabled and set down are unused.
    facts = PROBE.parse(real_12_cas())
    assert facts["ports_active"] == 9 and facts["ports_down"] == 0
    assert facts["ports_admin_down"] == 3
    assert facts["link_layer"] == "InfiniBand" and facts["min_rate_gbit_s"] == 400
    assert facts["rx_pause_delta"] == 0  # the front-end RoCE port's counters were sampled
    assert PROBE.check("gpu001", facts, context()) == []


def test_real_12_ca_node_without_interface_flags():
    # Same node, flags unreadable: a Down/Disabled Ethernet port gets the benefit of the doubt.
    facts = PROBE.parse(replace(real_12_cas(), ifflags=None))
    assert facts["ports_down"] == 0 and facts["ports_admin_down"] == 3


# --- ports -----------------------------------------------------------------------------------

def test_ib_port_down():
    # mlx5_3 lost its link: Down/Polling.
    facts = PROBE.parse(set_port(BASE, "mlx5_3", state="Down", phys="Polling", rate="10"))
    assert facts["ports_down"] == 1 and facts["ports_active"] == 7
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["ib-port-down"]
    assert findings[0].evidence["ports"] == {"mlx5_3/1": "Down/Polling"}


def test_port_up_waiting_for_a_subnet_manager_is_not_a_link_fault():
    # mlx5_3 trained (LinkUp) but no SM configured it: Initializing, or Armed.
    for state in ("Initializing", "Armed"):
        facts = PROBE.parse(set_port(BASE, "mlx5_3", state=state, phys="LinkUp"))
        findings = PROBE.check("gpu001", facts, context())
        assert codes(findings) == ["ib-port-init"]
        assert findings[0].evidence["ports"] == {"mlx5_3/1": f"{state}/LinkUp"}


def test_many_hosts_waiting_for_a_subnet_manager_is_the_sm():
    waiting = PROBE.parse(set_port(BASE, "mlx5_3", state="Initializing", phys="LinkUp"))
    healthy = PROBE.parse(BASE)
    fleet = {"gpu001": waiting, "gpu002": waiting, "gpu003": healthy, "gpu004": waiting}
    findings = PROBE.check_fleet(fleet, context())
    assert codes(findings) == ["subnet-manager-outage"]
    assert findings[0].hosts == ("gpu001", "gpu002", "gpu004")
    assert findings[0].evidence["by_port"] == {"mlx5_3/1": ["gpu001", "gpu002", "gpu004"]}
    # One host alone is that host's port (ib-port-init, handled like a port fault).
    assert PROBE.check_fleet({"gpu001": waiting, "gpu002": healthy, "gpu003": healthy},
                             context()) == []
    # Down/Polling on several hosts stays link faults, host by host.
    polling = PROBE.parse(set_port(BASE, "mlx5_3", state="Down", phys="Polling"))
    assert PROBE.check_fleet({"gpu001": polling, "gpu002": polling}, context()) == []


def test_unused_admin_down_ethernet_ports_need_no_roce_counters():
    # Two uncabled, administratively down CX6-DX ports (lid 0, SM lid 0 like every Ethernet
    # port) next to the IB rails: nothing to measure, nothing to report.
    text = (Path(__file__).resolve().parents[2] / "fixtures" / "scenarios" /
            "hang-healthy-unused-eth-ports" / "outputs" /
            "network-unused-eth-ports-down.txt").read_text()
    facts = PROBE.parse(text)
    assert facts["ports_admin_down"] == 2 and facts["rx_pause_delta"] is None
    assert PROBE.check("gpu001", facts, context()) == []


def test_real_b300_node_with_disabled_infiniband_ports():
    # The real B300 node: seven ConnectX-8 IB ports Down/Disabled count as down.
    facts = PROBE.parse(replace(BASE, ibstat=REAL_B300, ifflags=""))
    assert facts["ports_down"] == 7 and facts["ports_active"] == 4
    findings = PROBE.check("gpu001", facts, context())
    assert "ib-port-down" in codes(findings)
    assert len(by_code(findings, "ib-port-down")[0].evidence["ports"]) == 7


REAL_ARCHWIKI = real("ibstat__archwiki-mlx4-connectx-ddr-2-ports-port2-down-polling-spaces")


def dual_port_mlx4(port2: dict[str, int] | None = None) -> str:
    """The real ArchWiki dual-port mlx4_0 (port 1 Active, port 2 Down/Polling) as the host's
    only CA, its sysfs counters those of rail mlx5_0 for port 1 and *port2* (default: all 0,
    a port never cabled) for port 2."""
    def sample(name: str) -> str:
        lines = [x for x in section_text(BASE, name).splitlines() if "/mlx5_0/" in x]
        one = [x.replace("/mlx5_0/", "/mlx4_0/") for x in lines]
        two = []
        for line in one:
            path, _, _value = line.rpartition(":")
            counter_name = path.rsplit("/", 1)[-1]
            two.append(f"{path.replace('/ports/1/', '/ports/2/')}:"
                       f"{(port2 or {}).get(counter_name, 0)}")
        return "\n".join(one + two) + "\n"
    return replace(BASE, ibstat=REAL_ARCHWIKI, netdev="mlx4_0 port 1 ==> ib0 (Up)\n",
                   ifflags="mlx4_0 ib0 0x1003 0\n", ib_1=sample("ib_1"), ib_2=sample("ib_2"),
                   hw_1=MLX4_HW, hw_2=MLX4_HW)


# mlx4's retransmit counters as the script's grep keeps them (Linux drivers/infiniband/hw/mlx4/
# main.c diag_basic/diag_ext; ports/<n>/hw_counters) on the Active port 1
MLX4_HW = "".join(f"/sys/class/infiniband/mlx4_0/ports/1/hw_counters/{n}:0\n"
                  for n in ("rq_num_dup", "rq_num_oos", "sq_num_oos", "sq_num_rnr", "sq_num_to"))


def test_real_dual_port_hca_with_its_second_port_never_cabled_is_not_down():
    # ArchWiki's mlx4_0: port 2 Down/Polling beside an Active port 1, its counters all 0 (it
    # never linked since the driver loaded): the spare port of the card, not a broken link.
    facts = PROBE.parse(dual_port_mlx4())
    spare = {f"{p['ca']}/{p['port']}": p["spare_port"] for p in facts["ports"]}
    assert spare == {"mlx4_0/1": False, "mlx4_0/2": True}
    assert facts["ports_down"] == 0 and facts["ports_admin_down"] == 1
    assert "ib-port-down" not in codes(PROBE.check("gpu001", facts, context()))


@pytest.mark.parametrize("history", [{"link_downed": 1}, {"port_rcv_data": 88213},
                                     {"link_error_recovery": 2}])
def test_second_port_that_once_linked_is_down(history):
    # The same port with any trace of a past link on its counters lost that link: down.
    findings = check(dual_port_mlx4(history))
    assert codes(findings) == ["ib-port-down"]
    assert by_code(findings, "ib-port-down")[0].evidence["ports"] == {"mlx4_0/2": "Down/Polling"}


def test_second_port_without_counters_is_down():
    # Counters not read: nothing says the port never linked, so it counts as down.
    text = replace(dual_port_mlx4(), ib_1=None, ib_2=None)
    assert "ib-port-down" in codes(check(text))


def test_second_port_named_by_the_hcas_param_counts():
    assert "ib-port-down" in codes(check(dual_port_mlx4(), params={"hcas": "mlx4_0:2"}))


def test_spare_port_active_on_most_hosts_is_down_here():
    # The fleet check still raises a spare port that is Active on most hosts.
    mine = PROBE.parse(dual_port_mlx4())
    up = PROBE.parse(edit(dual_port_mlx4(), "ibstat",
                          "State: Down\n                Physical state: Polling",
                          "State: Active\n                Physical state: LinkUp"))
    fleet = {"gpu001": mine, "gpu002": up, "gpu003": up}
    findings = PROBE.check_fleet(fleet, context())
    down = by_code(findings, "ib-port-down")
    assert [f.hosts for f in down] == [("gpu001",)]
    assert down[0].evidence["ports"] == {"mlx4_0/2": "Down/Polling, never linked"}


def test_lone_single_port_hca_never_linked_is_down():
    # A single-port CA whose only port never linked has no Active sibling: down (B300-like).
    text = set_port(BASE, "mlx5_3", state="Down", phys="Polling", rate="10")
    for name in ("link_downed", "port_rcv_data", "port_xmit_data"):
        text = set_counter(set_counter(text, "ib_1", "mlx5_3", name, 0), "ib_2", "mlx5_3", name, 0)
    assert "ib-port-down" in codes(check(text))


def test_roce_port_up_but_without_carrier_is_down():
    # A RoCE port whose netdev is admin-up but lost carrier shows Down/Disabled: down.
    text = set_port(roce(), "mlx5_1", state="Down", phys="Disabled")
    assert codes(check(text)) == ["ib-port-down"]


def test_roce_port_administratively_down_is_unused():
    # The same Down/Disabled port with its netdev set down (IFF_UP clear): no finding.
    text = set_port(roce(), "mlx5_1", state="Down", phys="Disabled")
    text = edit(text, "ifflags", "mlx5_1 ens1f1np1 0x1003", "mlx5_1 ens1f1np1 0x1002")
    facts = PROBE.parse(text)
    assert facts["ports_admin_down"] == 1 and facts["ports_down"] == 0
    assert PROBE.check("gpu001", facts, context()) == []


def test_unused_port_named_by_the_hcas_param_counts():
    # NCCL_IB_HCA names the disabled CX6-DX mlx5_2: now it is down.
    findings = check(real_12_cas(), params={"hcas": "=mlx5_0,mlx5_2"})
    assert codes(findings) == ["ib-port-down"]
    assert list(findings[0].evidence["ports"]) == ["mlx5_2/1"]


def test_port_active_elsewhere_but_admin_down_here():
    # RoCE mlx5_1 is admin-down on one host and Active on the three others: fleet ib-port-down.
    odd = set_port(roce(), "mlx5_1", state="Down", phys="Disabled")
    odd = edit(odd, "ifflags", "mlx5_1 ens1f1np1 0x1003", "mlx5_1 ens1f1np1 0x1002")
    healthy = PROBE.parse(roce())
    fleet = {"gpu001": healthy, "gpu002": PROBE.parse(odd), "gpu003": healthy, "gpu004": healthy}
    assert PROBE.check("gpu002", fleet["gpu002"], context()) == []
    findings = PROBE.check_fleet(fleet, context())
    assert codes(findings) == ["ib-port-down"] and findings[0].hosts == ("gpu002",)


def test_hca_gone_from_one_host():
    # mlx5_7 no longer enumerates on gpu003 (HCA fell off PCIe): fleet ib-port-down "absent".
    gone = PROBE.parse(edit(BASE, "ibstat", ca_block(BASE, "mlx5_7"), ""))
    healthy = PROBE.parse(BASE)
    fleet = {"gpu001": healthy, "gpu002": healthy, "gpu003": gone, "gpu004": healthy}
    findings = PROBE.check_fleet(fleet, context())
    assert codes(findings) == ["ib-port-down"]
    assert findings[0].evidence["ports"] == {"mlx5_7/1": "absent"}


def test_ibv_devinfo_fallback_when_ibstat_is_missing():
    # No ibstat: the filtered `ibv_devinfo -v` gives states and 4X x 100 Gbps = 400 rates.
    devinfo = ""
    for i, (state, phys) in enumerate((("PORT_ACTIVE (4)", "LINK_UP (5)"),
                                       ("PORT_DOWN (1)", "POLLING (2)"))):
        devinfo += (f"hca_id:\tmlx5_{i}\n\tvendor_part_id:\t\t\t4129\n\t\tport:\t1\n"
                    f"\t\t\tstate:\t\t\t{state}\n\t\t\tlink_layer:\t\tInfiniBand\n"
                    "\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t100.0 Gbps (128)\n"
                    f"\t\t\tphys_state:\t\t{phys}\n")
    facts = PROBE.parse(replace(BASE, ibstat=None, devinfo=devinfo))
    assert facts["port_tool"] == "ibv_devinfo"
    assert facts["ports"][0]["rate_gbit_s"] == 400 and facts["ports"][0]["state"] == "Active"
    assert facts["ports"][1]["physical_state"] == "Polling"
    assert codes(PROBE.check("gpu001", facts, context())) == ["ib-port-down"]


def test_real_ibv_devinfo_sample_parses():
    # The real (non -v) ibv_devinfo excerpt: an Active IB port without a rate.
    facts = PROBE.parse(replace(BASE, ibstat=None, devinfo=real(
        "ibv_devinfo__ib-vf-4126-port-active-lid-single-hca-excerpt")))
    assert facts["ports"][0]["ca"] == "mlx5_3" and facts["ports"][0]["state"] == "Active"
    assert facts["ports"][0]["rate_gbit_s"] is None


@pytest.mark.parametrize(("changes", "why"), [
    # Neither tool installed.
    ({"ibstat": None, "devinfo": None}, "neither ibstat nor ibv_devinfo is installed"),
    # ibstat fails and ibv_devinfo is not installed.
    ({"ibstat": ("ibpanic: [1234] main: stat of IB device 'mlx5_0' failed: No such file\n", 255),
      "devinfo": None}, "ibpanic"),
    # No RDMA device on the host at all.
    ({"ibstat": None, "devinfo": "No IB devices found\n"}, "no RDMA device found"),
])
def test_port_state_not_measured(changes, why):
    # No port tool, a failing ibstat, or no RDMA device at all: not-measured, never a pass.
    findings = check(replace(BASE, **changes))
    assert "not-measured" in codes(findings)
    assert why in by_code(findings, "not-measured")[0].evidence["why"]


# --- rates -----------------------------------------------------------------------------------

def test_one_port_trained_at_200():
    # mlx5_2 came up at HDR 200 among NDR 400 ports of the same card type.
    findings = check(set_port(BASE, "mlx5_2", rate="200"))
    assert codes(findings) == ["ib-rate-degraded"]
    assert findings[0].evidence["ports"] == {"mlx5_2/1": {"rate_gbit_s": 200,
                                                          "expected_gbit_s": 400}}


def dgx_storage_card(rate1: str, rate2: str) -> str:
    """The rails plus a dual-port ConnectX-7 (same MT4129 as the rails) whose two functions
    share one System image GUID, as a DGX H100's storage cards."""
    cards = ""
    for ca, rate, guid in (("mlx5_8", rate1, "0xa088c20300f1d4e2"),
                           ("mlx5_9", rate2, "0xa088c20300f1d4e3")):
        cards += (f"CA '{ca}'\n\tCA type: MT4129\n\tNumber of ports: 1\n"
                  f"\tFirmware version: 28.39.1002\n\tHardware version: 0\n"
                  f"\tNode GUID: {guid}\n\tSystem image GUID: 0xa088c20300f1d4e2\n"
                  f"\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n"
                  f"\t\tRate: {rate}\n\t\tBase lid: 12\n\t\tLMC: 0\n\t\tSM lid: 334\n"
                  f"\t\tCapability mask: 0xa751e848\n\t\tPort GUID: {guid}\n"
                  f"\t\tLink layer: InfiniBand\n")
    return with_counters(replace(BASE, ibstat=section_text(BASE, "ibstat") + cards),
                         "mlx5_8", "mlx5_9")


def test_dual_port_card_of_the_rails_chip_is_compared_with_its_own_kind():
    # DGX H100: eight single-port ConnectX-7 rails at 400 and dual-port ConnectX-7 storage cards
    # (the same MT4129) on a 200 storage fabric: not a degraded rail.
    facts = PROBE.parse(dgx_storage_card("200", "200"))
    assert {p["adapter_ports"] for p in facts["ports"] if p["ca"] in ("mlx5_8", "mlx5_9")} == {2}
    assert {p["adapter_ports"] for p in facts["ports"] if p["ca"] == "mlx5_0"} == {1}
    assert "ib-rate-degraded" not in codes(PROBE.check("gpu001", facts, context()))


def test_dual_port_card_with_one_port_slower_than_its_sibling_is_degraded():
    findings = check(dgx_storage_card("200", "100"))
    assert codes(findings) == ["ib-rate-degraded"]
    assert findings[0].evidence["ports"] == {"mlx5_9/1": {"rate_gbit_s": 100,
                                                          "expected_gbit_s": 200}}


def storage_rail(rate: str, sm_lid: str) -> str:
    """The rails plus a ninth single-port ConnectX-7 (MT4129, as the rails) on a storage
    fabric whose subnet manager has LID *sm_lid* (the rails' SM is LID 334)."""
    guid = "0x946dae0300cdea10"
    card = (f"CA 'mlx5_8'\n\tCA type: MT4129\n\tNumber of ports: 1\n"
            f"\tFirmware version: 28.39.1002\n\tHardware version: 0\n"
            f"\tNode GUID: {guid}\n\tSystem image GUID: {guid}\n"
            f"\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n"
            f"\t\tRate: {rate}\n\t\tBase lid: 17\n\t\tLMC: 0\n\t\tSM lid: {sm_lid}\n"
            f"\t\tCapability mask: 0xa751e848\n\t\tPort GUID: {guid}\n"
            f"\t\tLink layer: InfiniBand\n")
    return with_counters(replace(BASE, ibstat=section_text(BASE, "ibstat") + card), "mlx5_8")


def test_host_whose_devices_are_renamed_is_not_missing_ports():
    # rdma-core's udev rule (NAME_PCI) names the inbox host's devices ibp<bus>s<slot>; the
    # MLNX_OFED hosts keep mlx5_<n>: the same eight Active rails, no port absent
    renamed = BASE
    for i in range(8):
        renamed = renamed.replace(f"mlx5_{i}", f"ibp{i}s0")
    healthy, other = PROBE.parse(BASE), PROBE.parse(renamed)
    fleet = {"gpu001": healthy, "gpu002": healthy, "gpu003": other}
    assert "ib-port-down" not in codes(PROBE.check_fleet(fleet, context()))
    fewer = PROBE.parse(renamed)  # a device that vanished: one rail fewer, still absent
    fewer["ports"] = [p for p in fewer["ports"] if p["ca"] != "ibp7s0"]
    fleet["gpu003"] = fewer
    assert [f.hosts for f in by_code(PROBE.check_fleet(fleet, context()), "ib-port-down")] == [
        ("gpu003",)]


def test_hosts_of_another_card_generation_are_not_below_the_fleet():
    # Two HDR ConnectX-6 (MT4123) nodes at 200 in a walk of NDR ConnectX-7 nodes at 400: each
    # generation is its own fleet; a ConnectX-7 node at 200 still is below its own.
    hdr = BASE.replace("CA type: MT4129", "CA type: MT4123")
    for i in range(8):
        hdr = set_port(hdr, f"mlx5_{i}", rate="200")
    healthy, old = PROBE.parse(BASE), PROBE.parse(hdr)
    fleet = {"gpu001": healthy, "gpu002": healthy, "gpu003": healthy, "gpu004": old,
             "gpu005": old}
    assert "ib-rate-degraded" not in codes(PROBE.check_fleet(fleet, context()))
    slow = BASE
    for i in range(8):
        slow = set_port(slow, f"mlx5_{i}", rate="200")
    fleet["gpu002"] = PROBE.parse(slow)
    findings = by_code(PROBE.check_fleet(fleet, context()), "ib-rate-degraded")
    assert [f.hosts for f in findings] == [("gpu002",)]


def test_single_port_card_on_another_subnet_is_compared_with_the_fleet():
    # A storage fabric is its own subnet (its own master SM, so another "SM lid"): its 200
    # port is not a rail trained low; the same port at 100 where the fleet runs it at 200 is.
    storage = PROBE.parse(storage_rail("200", "1"))
    assert "ib-rate-degraded" not in codes(PROBE.check("gpu001", storage, context()))
    same_subnet = PROBE.parse(storage_rail("200", "334"))
    assert "ib-rate-degraded" in codes(PROBE.check("gpu001", same_subnet, context()))
    fleet = {f"gpu00{i}": storage for i in range(1, 5)}
    assert "ib-rate-degraded" not in codes(PROBE.check_fleet(fleet, context()))
    slow = PROBE.parse(storage_rail("100", "1"))
    assert "ib-rate-degraded" not in codes(PROBE.check("gpu003", slow, context()))
    fleet["gpu003"] = slow
    findings = by_code(PROBE.check_fleet(fleet, context()), "ib-rate-degraded")
    assert [f.hosts for f in findings] == [("gpu003",)]
    assert findings[0].evidence["ports"] == {"mlx5_8/1": {"rate_gbit_s": 100,
                                                          "expected_gbit_s": 200}}


def test_expected_rate_threshold():
    # ib_expected_rate_gbit_s 800 (an XDR fabric): every 400 port is degraded.
    findings = check(BASE, thresholds={"ib_expected_rate_gbit_s": 800})
    assert codes(findings) == ["ib-rate-degraded"] and len(findings[0].evidence["ports"]) == 8


def test_whole_host_below_the_fleet_rate():
    # gpu003's eight ports all trained at 200: only the fleet majority shows it.
    slow = BASE
    for i in range(8):
        slow = set_port(slow, f"mlx5_{i}", rate="200")
    slow_facts = PROBE.parse(slow)
    assert slow_facts["min_rate_gbit_s"] == 200
    assert PROBE.check("gpu003", slow_facts, context()) == []
    healthy = PROBE.parse(BASE)
    fleet = {"gpu001": healthy, "gpu002": healthy, "gpu003": slow_facts, "gpu004": healthy}
    findings = PROBE.check_fleet(fleet, context())
    assert codes(findings) == ["ib-rate-degraded"] and findings[0].hosts == ("gpu003",)


# --- counters --------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "by", "code"), [
    ("symbol_error", 12, "ib-symbol-errors"),          # a dirty connector
    ("link_downed", 1, "ib-link-flapping"),            # the link went down once
    ("link_error_recovery", 3, "ib-link-flapping"),    # the link retrained
    ("port_rcv_errors", 450, "ib-rcv-errors"),         # bad packets received
    ("port_xmit_discards", 5000, "ib-xmit-discards"),  # congestion or a stuck peer
])
def test_ib_counter_rising(name, by, code):
    facts = PROBE.parse(bump(BASE, "mlx5_5", name, by))
    assert facts["counter_deltas"]["mlx5_5/1"][name] == by
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == [code]
    assert findings[0].evidence["ports"] == {"mlx5_5/1": {name: by}}


@pytest.mark.parametrize(("name", "by"), [
    ("port_xmit_discards", 100),    # at rdma-core's suggested PortXmitDiscards=100, not above
    ("port_xmit_discards", 45),     # a few drops under heavy load: congestion, not a fault
])
def test_ib_counter_below_threshold(name, by):
    assert check(bump(BASE, "mlx5_5", name, by)) == []


@pytest.mark.parametrize(("name", "code"), [
    ("port_rcv_errors", "ib-rcv-errors"),
    ("local_link_integrity_errors", "ib-rcv-errors"),
    ("excessive_buffer_overrun_errors", "ib-rcv-errors"),
    ("symbol_error", "ib-symbol-errors"),
])
def test_any_error_counter_rise_is_a_finding_like_ibqueryerrors(name, code):
    # ibqueryerrors' default threshold is 0 for every error counter: one is a finding (before,
    # port_rcv_errors needed more than 100 per sample and the integrity counters were unread)
    findings = check(bump(BASE, "mlx5_5", name, 1))
    assert codes(findings) == [code]
    assert findings[0].evidence["ports"] == {"mlx5_5/1": {name: 1}}


def test_remote_physical_errors_do_not_accuse_the_receiving_host():
    # EBP-marked packets: "The CA that reports this error is NOT where the corruption
    # occurred" (OpenFabrics wiki, "Overview of Error Counters"); the catalogue's
    # ib-remote-physical-errors names the fabric instead
    assert check(bump(BASE, "mlx5_5", "port_rcv_remote_physical_errors", 37)) == []


def test_counter_reset_between_samples_counts_from_zero():
    # symbol_error 3 -> 0 (cleared) and port_rcv_errors 5000 -> 150 (cleared, then 150 new).
    text = set_counter(BASE, "ib_2", "mlx5_5", "symbol_error", 0)
    text = set_counter(text, "ib_1", "mlx5_6", "port_rcv_errors", 5000)
    text = set_counter(text, "ib_2", "mlx5_6", "port_rcv_errors", 150)
    facts = PROBE.parse(text)
    assert facts["symbol_error_delta"] == 0 and facts["port_rcv_errors_delta"] == 150
    assert codes(PROBE.check("gpu001", facts, context())) == ["ib-rcv-errors"]


def test_real_saturated_counters_are_totals_not_deltas():
    # The real mlx5_1 dump (link_downed 255, port_xmit_discards 65535) in both samples.
    values = dict(re.findall(r"=== \./(\w+) ===\n(\d+)", real(
        "ib-sysfs-counters__mlx5_1-port1-counters-saturated-xmit-wait")))
    text = BASE
    for name, value in values.items():
        for section in ("ib_1", "ib_2"):
            path = f"/sys/class/infiniband/mlx5_1/ports/1/counters/{name}:"
            if path in section_text(text, section):
                text = set_counter(text, section, "mlx5_1", name, int(value))
    facts = PROBE.parse(text)
    assert {"mlx5_1/1:link_downed", "mlx5_1/1:port_xmit_discards"} <= set(facts["saturated"])
    # no fault from the totals; the counters stuck at their width are a blind spot, said so
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["not-measured"]
    assert "mlx5_1/1:link_downed" in findings[0].message


def test_saturated_error_counter_is_not_measured_not_zero():
    # symbol_error at 65535 (16 bits) in both samples cannot show a rise: not measured.
    text = set_counter(set_counter(BASE, "ib_1", "mlx5_4", "symbol_error", 65535),
                       "ib_2", "mlx5_4", "symbol_error", 65535)
    findings = check(text)
    assert codes(findings) == ["not-measured"]
    assert "mlx5_4/1:symbol_error" in findings[0].message


def test_saturated_xmit_wait_is_no_blind_spot():
    # port_xmit_wait at 2^32-1 is congestion history; no check reads it.
    text = set_counter(set_counter(BASE, "ib_1", "mlx5_4", "port_xmit_wait", 4294967295),
                       "ib_2", "mlx5_4", "port_xmit_wait", 4294967295)
    assert check(text) == []


def test_counters_sampled_once_are_not_measured():
    # The second sample never came (section missing): the deltas are unknown, not zero.
    facts = PROBE.parse(replace(BASE, ib_2=None))
    assert facts["symbol_error_delta"] is None
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["not-measured"]


def test_tcp_retransmits():
    # 5000 segments retransmitted in 3 s.
    text = edit(BASE, "tcp_2", " 183419 ", " 188412 ")
    findings = check(text)
    assert codes(findings) == ["tcp-retransmits"]
    assert findings[0].evidence["tcp_retrans_delta"] == 5000


def test_tcp_threshold_scales_with_a_longer_interval():
    # 2000 retransmits over 10 s stay under 1000 per 3 s (3333 for 10 s).
    text = edit(replace(BASE, interval="10\n"), "tcp_2", " 183419 ", " 185412 ")
    assert check(text) == []


# --- RoCE ------------------------------------------------------------------------------------

def test_roce_healthy_facts():
    # Two RoCE ports with steady PFC pauses: deltas 0, no finding.
    facts = PROBE.parse(roce())
    assert facts["link_layer"] == "Ethernet"
    assert facts["rx_pause_delta"] == 0 and facts["tx_pause_delta"] == 0
    assert facts["pause_storm_events"] == 0 and facts["rx_discards_delta"] == 0
    assert PROBE.check("gpu001", facts, context()) == []


def test_pfc_pause_rising_fast():
    # rx_prio3_pause on mlx5_1 rises by 250000 in 3 s.
    rising = {"mlx5_1": {"rx_prio3_pause": ETH_COUNTERS["rx_prio3_pause"] + 250000}}
    facts = PROBE.parse(roce(after=rising))
    assert facts["rx_pause_delta"] == 250000
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["pfc-pause-high"]
    assert findings[0].evidence["ports"] == {"mlx5_1/1": 250000}


def test_mlx4_pause_counters_are_pause_frames_too():
    # ConnectX-3 (mlx4 en_ethtool.c): rx_pause_prio_<p> per priority and rx_pause global; their
    # _duration_prio_<p> and _transition_prio_<p> are not frames
    mlx4 = {"rx_pause_prio_3": 4000, "rx_pause_duration_prio_3": 9_000_000,
            "rx_pause_transition_prio_3": 4000, "tx_pause": 10}
    rising = {"rx_pause_prio_3": 254000, "rx_pause_duration_prio_3": 900_000_000,
              "rx_pause_transition_prio_3": 254000, "tx_pause": 10}
    facts = PROBE.parse(roce(before={"mlx5_1": mlx4}, after={"mlx5_1": rising}))
    assert facts["rx_pause_delta"] == 250000 and facts["tx_pause_delta"] == 0
    assert codes(PROBE.check("gpu001", facts, context())) == ["pfc-pause-high"]


def test_pause_storm_only_in_the_past_is_history_not_a_storm():
    # One tx_pause_storm_error_event since the driver loaded, none during the sample: it is
    # reported, but as history — not a storm to drain the host for today.
    storm = {"mlx5_0": {"tx_pause_storm_error_events": 1}}
    facts = PROBE.parse(roce(before=storm, after=storm))
    assert facts["pause_storm_events"] == 1 and facts["pause_storm_delta"] == 0
    findings = PROBE.check("gpu001", facts, context())
    assert codes(findings) == ["pfc-storm-history"]
    assert findings[0].evidence["ports"] == {"mlx5_0/1": {"delta": 0, "total": 1}}


def test_pause_storm_during_the_sample():
    # A storm error event (pause transmission disabled by the stall watchdog) during the sample.
    findings = check(roce(after={"mlx5_1": {"tx_pause_storm_error_events": 2}}))
    assert codes(findings) == ["pfc-storm"]


def test_pause_storm_warning_events_alone_are_not_a_storm():
    # tx_pause_storm_warning_events is the minor stall watermark, "Informative" in the mlx5
    # counters.rst: a port pausing its peer hard under congestion, pauses never disabled
    findings = check(roce(before={"mlx5_1": {"tx_pause_storm_warning_events": 40}},
                          after={"mlx5_1": {"tx_pause_storm_warning_events": 43}}))
    assert "pfc-storm" not in codes(findings) and "pfc-storm-history" not in codes(findings)


def test_rx_discards():
    # rx_discards_phy +4000 and rx_out_of_buffer +2000 on mlx5_0.
    after = {"mlx5_0": {"rx_discards_phy": 4000, "rx_out_of_buffer": 2000}}
    findings = check(roce(after=after))
    assert codes(findings) == ["rx-discards"]
    assert findings[0].evidence["ports"] == {"mlx5_0/1": 6000}


def test_ethtool_missing_on_a_roce_node_is_not_measured():
    # Ethernet RDMA ports but no ethtool: pause/discard counters not measured.
    findings = check(roce(eth=False))
    assert codes(findings) == ["not-measured"]
    assert findings[0].evidence["what"] == "RoCE pause/discard counters"


# --- fleet outliers --------------------------------------------------------------------------

def test_port_counter_outlier_below_the_per_host_threshold():
    # xmit discards +800 on one host (under a site's 1000) while five peers see 0-3: an outlier.
    site = {"ib_port_xmit_discards_delta": 1000}
    fleet = {f"gpu00{i}": PROBE.parse(bump(BASE, "mlx5_0", "port_xmit_discards", i % 4))
             for i in range(1, 6)}
    fleet["gpu006"] = PROBE.parse(bump(BASE, "mlx5_0", "port_xmit_discards", 800))
    assert PROBE.check("gpu006", fleet["gpu006"], context(thresholds=site)) == []
    findings = PROBE.check_fleet(fleet, context(thresholds=site))
    assert codes(findings) == ["port-counter-outlier"]
    assert findings[0].hosts == ("gpu006",)
    assert findings[0].evidence["counter"] == "port_xmit_discards_delta"


def test_findings_stay_within_the_catalog():
    # A node with many faults raises only network's catalog codes (and not-measured).
    text = set_port(roce(after={"mlx5_0": {"tx_pause_storm_error_events": 3,
                                           "rx_discards_phy": 9000}}), "mlx5_1", rate="100")
    text = bump(text, "mlx5_0", "symbol_error", 5)
    allowed = set(load_catalog().probes["network"].codes) | {"not-measured"}
    found = set(codes(check(text)))
    assert {"pfc-storm", "rx-discards", "ib-symbol-errors", "ib-rate-degraded"} <= found
    assert found <= allowed


@pytest.mark.parametrize("text", [
    "",                                                                  # nothing
    "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n",                      # raw ibstat, unsectioned
    "=== diag:section topo\nGPU0 X\n=== diag:rc topo 0\n",              # another probe's output
    "=== diag:section ibstat\n\x00\x00 binary junk\n=== diag:rc ibstat 0\n",  # garbled ibstat
])
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        PROBE.parse(text)
