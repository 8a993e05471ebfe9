"""dmesg-link, ib-hw-counters and the PCIe keys of nvidia-smi-q: real samples and the other
shapes the tools print across versions (journalctl, syslog, dmesg -T/--decode, older drivers).

Values from the real samples are copied from the sample text by eye.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probes.parsers import ParseError, parse

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def facts(name: str) -> dict[str, Any]:
    return parse(name.split("__", 1)[0], (REAL / name).read_text(encoding="utf-8"))


# --- dmesg-link ---------------------------------------------------------------------------

def test_dmesg_link_boot_down_then_up_with_module_event() -> None:
    # cx6 boot: the port is logged down at 5.19 s and up at 21.13 s; the cable-plugged module
    # event is kept apart; "limited by 8.0 GT/s" lines are not events
    f = facts("dmesg-link__cx6-ocp3-200g-grep-mlx5-core-boot-pcie-gen3-limited-link-down-then-"
              "up.txt")
    assert [(e["state"], e["uptime_s"]) for e in f["events"]] == [("down", 5.189354),
                                                                  ("up", 21.129045)]
    event = f["events"][0]
    assert event["driver"] == "mlx5_core" and event["pci"] == "0000:01:00.0"
    assert event["ifname"] == "enp1s0np0" and event["source"] == "netdev"
    assert event["port"] is None and event["timestamp"] is None
    assert f["module_events"] == [{"pci": "0000:01:00.0", "module": 0, "event": "Cable plugged"}]
    assert f["flaps"] == {"enp1s0np0": 1}


def test_dmesg_link_decode_iso_ignores_tg3_and_ipv6_lines() -> None:
    # dmesg --decode --time-format iso: three mlx5 downs and one up; tg3 "Link is up at" and
    # IPv6 "link becomes ready" are other wordings, not events
    f = facts("dmesg-link__hgx-node-boot-iso-decode-mlx5-link-down-x3-bootnet-up-tg3-distractor-"
              "excerpt.txt")
    assert [(e["ifname"], e["state"]) for e in f["events"]] == [
        ("enp157s0f1np1", "down"), ("enp157s0f0np0", "down"), ("enp27s0f1np1", "down"),
        ("bootnet", "up")]
    assert f["events"][0]["timestamp"] == "2025-01-17T15:37:28,650514+00:00"
    assert f["events"][0]["uptime_s"] is None
    assert f["flaps"] == {"enp157s0f1np1": 1, "enp157s0f0np0": 1, "enp27s0f1np1": 1}


def test_dmesg_link_tail_with_ixgbe_and_usb_noise() -> None:
    f = facts("dmesg-link__workstation-dmesg-tail-mlx5-dual-port-link-down-ixgbe-up-usb-noise.txt")
    assert [(e["ifname"], e["state"]) for e in f["events"]] == [("enp1s0f0np0", "down"),
                                                                ("enp1s0f1np1", "down")]
    assert f["events"][1]["uptime_s"] == 18866.05799


JOURNAL_AND_SYSLOG = """\
Feb 14 05:03:41 gpu001 kernel: [ 8123.5] mlx5_core 0000:1b:00.0 ens1np0: Link down
Feb 14 05:03:44.123456 gpu001 kernel: mlx5_core 0000:1b:00.0 ens1np0: Link up
2025-02-14T05:04:00+0000 gpu001 kernel: mlx5_core 0000:5e:00.0 ibp94s0: Port: 1 Link DOWN
[ 8190.250000] gpu001 kernel: mlx5_core 0000:5e:00.0 ibp94s0: Port: 1 Link INIT
[Fri Feb 14 05:04:12 2025] mlx5_core 0000:5e:00.0 ibp94s0: Port: 1 Link ACTIVE
kern  :err   : [ 8200.000001] mlx5_core 0000:5e:00.0: Port module event[error]: module 3, \
Cable error, Bus stuck (I2C or data shorted)
[ 8201.000000] mlx4_en: eth2: Link Up
[ 8202.000000] ixgbe 0000:05:00.0 enp5s0: NIC Link is Up 10 Gbps, Flow Control: RX/TX
"""


def test_dmesg_link_journal_syslog_ctime_and_ib_port_states() -> None:
    # every stamp shape of the module docstring in one log; IB states are lowercased
    f = parse("dmesg-link", JOURNAL_AND_SYSLOG)
    got = [(e["ifname"], e["port"], e["state"], e["source"]) for e in f["events"]]
    assert got == [("ens1np0", None, "down", "netdev"), ("ens1np0", None, "up", "netdev"),
                   ("ibp94s0", 1, "down", "ib"), ("ibp94s0", 1, "init", "ib"),
                   ("ibp94s0", 1, "active", "ib"), ("eth2", None, "up", "netdev")]
    stamps = [(e["timestamp"], e["uptime_s"]) for e in f["events"]]
    assert stamps[:5] == [("Feb 14 05:03:41", 8123.5), ("Feb 14 05:03:44.123456", None),
                          ("2025-02-14T05:04:00+0000", None), (None, 8190.25),
                          ("[Fri Feb 14 05:04:12 2025]", None)]
    assert f["events"][-1]["pci"] is None and f["events"][-1]["driver"] == "mlx4_en"
    assert f["module_events"] == [{"pci": "0000:5e:00.0", "module": 3,
                                   "event": "Cable error, Bus stuck (I2C or data shorted)"}]
    assert f["flaps"] == {"ens1np0": 1, "ibp94s0": 1}


def test_dmesg_link_quiet_kernel_log_has_no_events() -> None:
    # a kernel log without link lines is a healthy answer, not an error
    f = parse("dmesg-link", "[    0.000000] Linux version 5.15.0-91-generic\n"
                            "[    1.234567] nvidia: module license 'NVIDIA' taints kernel.\n")
    assert f == {"events": [], "module_events": [], "flaps": {}}


@pytest.mark.parametrize("text", ["NCCL INFO Using network IB\n", "eth0: Link is up\n",
                                  "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n"])
def test_dmesg_link_refuses_text_that_is_no_kernel_log(text: str) -> None:
    with pytest.raises(ParseError, match=r"^not kernel log output"):
        parse("dmesg-link", text)


# --- ib-hw-counters -----------------------------------------------------------------------

def test_hw_counters_bare_listing_of_one_port() -> None:
    # the AMD guide's loop: name:value lines, no path, so device and port are unknown
    f = facts("ib-hw-counters__mlx5-rnic-initiator-name-colon-value-loop-amd-ernic-guide.txt")
    assert len(f["ports"]) == 1
    port = f["ports"][0]
    assert port["device"] is None and port["port"] is None
    assert port["counters"]["rx_write_requests"] == 108307999
    assert port["counters"]["lifespan"] == 10
    assert port["counters"]["local_ack_timeout_err"] == 0
    assert len(port["counters"]) == 11


GREP_LISTING = """\
/sys/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err:3
/sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence:120
/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0
/sys/class/infiniband/mlx5_1/ports/1/hw_counters/np_cnp_sent:N/A (no PMA)
/sys/class/infiniband/mlx5_1/ports/1/hw_counters/rp_cnp_handled:4455
/sys/class/infiniband/bnxt_re0/hw_counters/to_retransmits:7
"""


def test_hw_counters_grep_listing_per_port_in_order() -> None:
    # device and port from the path; IBA counters/ files skipped; N/A left out, not 0;
    # a device-level hw_counters directory has no port
    f = parse("ib-hw-counters", GREP_LISTING)
    assert f["ports"] == [
        {"device": "mlx5_0", "port": 1,
         "counters": {"local_ack_timeout_err": 3, "out_of_sequence": 120}},
        {"device": "mlx5_1", "port": 1, "counters": {"rp_cnp_handled": 4455}},
        {"device": "bnxt_re0", "port": None, "counters": {"to_retransmits": 7}},
    ]


@pytest.mark.parametrize("text", [
    "rx_packets: 12\ntx_packets: 14\n",                       # ethtool -S style, no known name
    "Max : 4\nCurrent : 1\n",                                   # nvidia-smi -q lines
    "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0\n",  # IBA counters only
])
def test_hw_counters_refuses_other_listings(text: str) -> None:
    with pytest.raises(ParseError, match=r"^not RDMA hw_counters listing output"):
        parse("ib-hw-counters", text)


# --- nvidia-smi -q, PCIe ------------------------------------------------------------------

def test_smi_q_pcie_titan_v_idle_gen1() -> None:
    # driver 560: Max 3, Current 1 (idle down-train), Device Max 3, Host Max 3, x16/x16
    gpu = facts("nvidia-smi-q__1x-titan-v-driver560-gen3-idle-gen1-clocks-event-reasons.txt")[
        "gpus"][0]
    assert (gpu["pcie_gen_max"], gpu["pcie_gen_current"], gpu["pcie_gen_device_max"],
            gpu["pcie_gen_host_max"]) == (3, 1, 3, 3)
    assert (gpu["pcie_width_max"], gpu["pcie_width_current"]) == (16, 16)
    assert (gpu["pcie_replays"], gpu["pcie_replay_rollovers"]) == (0, 0)


def test_smi_q_pcie_4090_host_max_above_device_max() -> None:
    gpu = facts("nvidia-smi-q__8x-rtx4090-driver535-gen4-link-idle-at-gen1-host-max-5-first-gpu-"
                "part.txt")["gpus"][0]
    assert (gpu["pcie_gen_max"], gpu["pcie_gen_current"], gpu["pcie_gen_device_max"],
            gpu["pcie_gen_host_max"]) == (4, 1, 4, 5)


def test_smi_q_pcie_a10_host_max_na_is_null() -> None:
    gpu = facts("nvidia-smi-q__1x-a10-driver535-remapped-rows-pending.txt")["gpus"][0]
    assert gpu["pcie_gen_host_max"] is None
    assert gpu["pcie_gen_max"] == 4 and gpu["pcie_width_current"] == 16


OLD_DRIVER_PCI = """\
==============NVSMI LOG==============

Driver Version                            : 470.82.01
CUDA Version                              : 11.4

Attached GPUs                             : 1
GPU 00000000:3B:00.0
    Product Name                          : Tesla V100-SXM2-32GB
    PCI
        Bus                               : 0x3B
        Bus Id                            : 00000000:3B:00.0
        GPU Link Info
            PCIe Generation
                Max                       : 3
                Current                   : 3
            Link Width
                Max                       : 16x
                Current                   : 8x
        Bridge Chip
            Type                          : N/A
            Firmware                      : N/A
        Replays Since Reset               : 412
        Tx Throughput                     : 0 KB/s
    Power Readings
        Power Management                  : Supported
        Power Draw                        : 250.31 W
        Power Limit                       : 250.00 W
        Default Power Limit               : 300.00 W
        Enforced Power Limit              : 250.00 W
    Max Clocks
        SM                                : 1530 MHz
"""


def test_smi_q_old_driver_has_no_device_host_lines_and_no_rollovers() -> None:
    # before about R525 only Max/Current are printed: Device/Host Max stay null, not Max;
    # a driver without the rollover line gives null
    gpu = parse("nvidia-smi-q", OLD_DRIVER_PCI)["gpus"][0]
    assert (gpu["pcie_gen_max"], gpu["pcie_gen_current"]) == (3, 3)
    assert gpu["pcie_gen_device_max"] is None and gpu["pcie_gen_host_max"] is None
    assert (gpu["pcie_width_max"], gpu["pcie_width_current"]) == (16, 8)
    assert gpu["pcie_replays"] == 412 and gpu["pcie_replay_rollovers"] is None
    assert gpu["power_limit_enforced_w"] == 250.0 and gpu["power_limit_default_w"] == 300.0
    assert gpu["sm_clock_max_mhz"] == 1530
