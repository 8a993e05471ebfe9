"""The rdma probe: each RDMA port's link layer, MTU, netdev, GIDs and RoCE QoS settings."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from probes.parsers import ParseError
from probes.rdma import PROBE
from tests.probes.probe_outputs import (
    baseline,
    codes,
    context,
    edit,
    real,
    replace,
    sh_accepts,
)
from tests.probes.rdma_roce import QOS_SAMPLE, netdev, qos_text, rdma_roce

BASE = baseline("rdma")


def check(text: str) -> list:
    return PROBE.check("gpu001", PROBE.parse(text), context())


def whys(findings: list) -> list[str]:
    return sorted(f.evidence["what"] for f in findings if f.code == "not-measured")


# --- the script ------------------------------------------------------------------------------

def test_command_is_one_posix_script():
    script = PROBE.command({})
    assert sh_accepts(script).returncode == 0
    run = subprocess.run(["dash", "-n", "-c", script], capture_output=True, timeout=30)
    assert run.returncode == 0, run.stderr


def test_script_runs_here_without_rdma_devices():
    # this machine has no /sys/class/infiniband: every section prints cleanly, exit 0
    run = subprocess.run(["sh", "-c", PROBE.command({})], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0
    facts = PROBE.parse(run.stdout)
    if facts["rdma_devices"] == 0:
        assert facts["ports"] == [] and facts["errors"] == {}
        assert PROBE.check("here", facts, context()) == []


def test_script_on_a_fake_sysfs_with_stubbed_tools(tmp_path: Path):
    # the real script against a fake /sys/class tree: one InfiniBand port, two RoCE ports;
    # ibv_devinfo, mlnx_qos and ethtool stubbed with real-format outputs
    sysc = tmp_path / "class"
    ib = sysc / "infiniband"
    layout = (("mlx5_0", "InfiniBand", "ibp26s0"), ("mlx5_1", "Ethernet", netdev(1)),
              ("mlx5_2", "Ethernet", netdev(2)))
    for ca, layer, net in layout:
        port = ib / ca / "ports" / "1"
        port.mkdir(parents=True)
        for name, value in (("link_layer", layer), ("state", "4: ACTIVE"),
                            ("phys_state", "5: LinkUp"), ("rate", "400 Gb/sec (4X NDR)")):
            (port / name).write_text(value + "\n")
        dev = ib / ca / "device" / "net" / net
        dev.mkdir(parents=True)
        for name, value in (("mtu", "9000" if layer == "Ethernet" else "4092"),
                            ("dev_port", "0"), ("operstate", "up")):
            (dev / name).write_text(value + "\n")
        (sysc / "net" / net).mkdir(parents=True)
        (sysc / "net" / net / "mtu").write_text("9000\n" if layer == "Ethernet" else "4092\n")
        (sysc / "net" / net / "operstate").write_text("up\n")
        (sysc / "net" / net / "uevent").write_text(f"INTERFACE={net}\nIFINDEX=7\n")
        if layer != "Ethernet":
            continue
        for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
            (port / sub).mkdir(parents=True)
        local, ipv4 = "fe80:0000:0000:0000:0e42:a1ff:fe5d:4db8", "0000:" * 5 + "ffff:ac13:003c"
        gids = (local, local, ipv4, ipv4, "0000:0000:0000:0000:0000:0000:0000:0000")
        for index, gid in enumerate(gids):
            (port / "gids" / str(index)).write_text(gid + "\n")
            if index < 4:
                (port / "gid_attrs" / "types" / str(index)).write_text(
                    ("IB/RoCE v1", "RoCE v2")[index % 2] + "\n")
                (port / "gid_attrs" / "ndevs" / str(index)).write_text(net + "\n")
        (ib / ca / "tc" / "1").mkdir(parents=True)
        (ib / ca / "tc" / "1" / "traffic_class").write_text("Global tclass=106\n")
        for algo in ("roce_np", "roce_rp"):
            enable = sysc / "net" / net / "ecn" / algo / "enable"
            enable.mkdir(parents=True)
            for prio in range(8):
                (enable / str(prio)).write_text("1\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    devinfo = "".join(
        f"hca_id:\t{ca}\n\ttransport:\t\t\tInfiniBand (0)\n\t\tport:\t1\n"
        f"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n"
        f"\t\t\tactive_mtu:\t\t4096 (5)\n\t\t\tsm_lid:\t\t\t0\n\t\t\tlink_layer:\t\t{layer}\n\n"
        for ca, layer, _ in layout)
    (tmp_path / "devinfo.txt").write_text(devinfo)
    (tmp_path / "qos.txt").write_text(real(QOS_SAMPLE))
    for tool, body in (("ibv_devinfo", f"cat {tmp_path}/devinfo.txt"),
                       ("mlnx_qos", f"cat {tmp_path}/qos.txt"),
                       ("ethtool", 'printf "Pause parameters for %s:\\nAutonegotiate:\\toff\\n'
                                   'RX:\\t\\toff\\nTX:\\t\\toff\\n" "$2"')):
        (bin_dir / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / tool).chmod(0o755)
    script = str(PROBE.command({})).replace("/sys/class", str(sysc))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    facts = PROBE.parse(run.stdout)
    assert [(p["key"], p["link_layer"], p["netdev"]) for p in facts["ports"]] == [
        ("mlx5_0/1", "InfiniBand", "ibp26s0"), ("mlx5_1/1", "Ethernet", netdev(1)),
        ("mlx5_2/1", "Ethernet", netdev(2))]
    roce = facts["ports"][1]
    assert roce["gid_index_v2"] == 3 and roce["roce_v2_ipv4"] == "172.19.0.60"
    assert roce["roce_v2_vlan"] is False and roce["netdev_mtu"] == 9000
    assert roce["tc"] == 106 and roce["roce_prio"] == 3 and roce["pfc_on_roce_prio"] is True
    assert roce["ecn_np_on_roce_prio"] is True and roce["global_pause_rx"] is False
    assert facts["errors"] == {} and facts["missing"] == []
    assert PROBE.check("gpu001", facts, context()) == []


# --- healthy ---------------------------------------------------------------------------------

def test_baseline_infiniband_node():
    # 8 NDR ports, MTU 4096 everywhere, IPoIB netdevs at 4092, nothing RoCE
    facts = PROBE.parse(BASE)
    assert facts["rdma_devices"] == 8 and facts["ib_ports_active"] == 8
    assert facts["roce_ports_active"] == 0 and facts["link_layers"] == "InfiniBand"
    assert facts["ib_active_mtus"] == "4096" and facts["pfc_prios"] is None
    port = facts["ports"][0]
    assert (port["key"], port["netdev"], port["netdev_mtu"], port["active_mtu"]) == (
        "mlx5_0/1", "ibp26s0", 4092, 4096)
    assert port["roce_v2_gid"] is None and port["trust"] is None  # not RoCE: unknown, not false
    assert PROBE.check("gpu001", facts, context()) == []


def test_roce_node_settings():
    # trust dscp, PFC on 3, traffic class 106 (DSCP 26 -> priority 3), ECN on, no global pause
    facts = PROBE.parse(rdma_roce())
    assert facts["roce_ports_active"] == 2 and facts["roce_active_mtus"] == "4096"
    assert facts["pfc_prios"] == "3" and facts["trust"] == "dscp" and facts["roce_tcs"] == "106"
    assert facts["gid_index_v2s"] == "3" and facts["global_pause"] == "off"
    port = facts["ports"][1]
    assert (port["roce_prio"], port["pfc_on_roce_prio"], port["dcbx"]) == (3, True, "firmware")
    assert PROBE.check("gpu001", facts, context()) == []


def test_real_ibv_devinfo_roce_ports_at_1024():
    # the real ConnectX-3 RoCE sample ("Device ports:" line): both ports active_mtu 1024 of 4096
    ports = "".join(f"/sys/class/infiniband/mlx4_0/ports/{p}/{a}:{v}\n"
                    for a, v in (("link_layer", "Ethernet"), ("state", "4: ACTIVE"))
                    for p in (1, 2))
    text = replace(BASE, ports="devices 1\n" + ports, netdevs="", devinfo=real(
        "ibv_devinfo__tf-gdr-readme-mlx4-connectx3-roce-2-ports-active-mtu-1024-device-ports-line"))
    facts = PROBE.parse(text)
    assert [(p["key"], p["active_mtu"], p["max_mtu"]) for p in facts["ports"]] == [
        ("mlx4_0/1", 1024, 4096), ("mlx4_0/2", 1024, 4096)]
    assert facts["roce_active_mtu_min"] == 1024


def test_pod_gids_from_index_4_and_a_vlan_netdev():
    # GIDs of a pod start at 4 (real NCCL #1573 layout); the IPv4 pair on a VLAN netdev
    facts = PROBE.parse(rdma_roce(gids=(4, 5, 6, 7), ipv4_from=6, vlan=100))
    port = facts["ports"][0]
    assert port["gid_index_v2"] == 7 and port["roce_v2_netdev"] == f"{netdev(0)}.100"
    assert port["roce_v2_vlan"] is True


# --- fallbacks and what could not be read ------------------------------------------------------

def test_dcb_fallback_gives_pfc_and_trust():
    facts = PROBE.parse(rdma_roce(qos_tool="dcb"))
    port = facts["ports"][0]
    assert port["qos_tool"] == "dcb" and port["pfc_prios"] == "3" and port["trust"] == "pcp"


def test_lldptool_fallback_reads_the_pfc_tlv():
    # intel/openlldp lldp_8021qaz_clif.c ieee8021qaz_print_pfc_tlv
    text = rdma_roce(ports=1, qos_tool="lldptool")
    tlv = ("IEEE 8021QAZ PFC TLV\n\t Willing: yes\n\t MACsec Bypass Capable: no\n"
           "\t PFC capable traffic classes: 8\n\t PFC enabled: 3 \n")
    text = edit(text, "qos", "tool lldptool\n", "tool lldptool\nrc 0\n" + tlv)
    port = PROBE.parse(text)["ports"][0]
    assert port["qos_tool"] == "lldptool" and port["pfc_prios"] == "3" and port["trust"] is None


@pytest.mark.parametrize(("change", "what"), [
    ({"devinfo": None}, "RDMA port MTU (active_mtu/max_mtu)"),
    ({"pause": None}, "RoCE global pause (ethtool -a)"),
])
def test_missing_tools_are_not_measured(change, what):
    findings = check(replace(rdma_roce(), **change))
    assert codes(findings) == ["not-measured"] and whys(findings) == [what]


def test_no_qos_tool_inbox_driver_without_ecn_sysfs():
    # no mlnx_qos, dcb or lldptool, and no MLNX_OFED ECN sysfs: both said, nothing guessed
    facts = PROBE.parse(rdma_roce(qos_tool="none", ecn=False, tc=None))
    assert facts["ports"][0]["pfc_prios"] is None and facts["ports"][0]["ecn_np_prios"] is None
    assert whys(PROBE.check("gpu001", facts, context())) == [
        "RoCE ECN per priority", "RoCE PFC and trust settings"]


def test_mlnx_qos_failing_is_not_measured_per_netdev():
    text = rdma_roce(ports=1, qos="Netlink error: Operation not permitted\n")
    text = edit(text, "qos", "rc 0\n", "rc 1\n")
    findings = check(text)
    assert whys(findings) == [f"RoCE PFC and trust settings of {netdev(0)}"]
    assert "Netlink error" in findings[0].evidence["why"]


def test_pfc_on_another_priority_than_the_roce_traffic_class():
    # traffic class 0 (DSCP 0 -> priority 0) while PFC protects priority 3
    port = PROBE.parse(rdma_roce(tc="Global tclass=0"))["ports"][0]
    assert (port["roce_prio"], port["pfc_on_roce_prio"]) == (0, False)
    port = PROBE.parse(rdma_roce(qos=qos_text(pfc="0   0   0   0   0   0   0   0")))["ports"][0]
    assert port["pfc_any"] is False and port["pfc_prios"] == ""


@pytest.mark.parametrize("text", [
    "",
    "hca_id:\tmlx5_0\n",                                                   # raw, unsectioned
    "=== diag:section topo\nGPU0 X\n=== diag:rc topo 0\n",                 # another probe
])
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        PROBE.parse(text)


def test_odd_sections_are_errors_not_parse_errors():
    # ibv_devinfo failing and garbage in the GID and pause sections: recorded, not fatal
    text = replace(rdma_roce(ports=1), devinfo=("Failed to get IB devices list: Function not "
                                                "implemented\n", 255),
                   pause=f"--- {netdev(0)}\n\x00\x01 binary\n")
    facts = PROBE.parse(text)
    assert facts["errors"]["devinfo"].startswith("Failed to get IB devices list")
    assert f"pause:{netdev(0)}" in facts["errors"]
    assert facts["ports"][0]["active_mtu"] is None
