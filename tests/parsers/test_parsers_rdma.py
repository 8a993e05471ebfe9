"""The rdma probe's parsers: mlnx_qos -i, show_gids (and its sysfs listing), ethtool -a, dcb.

Every real sample of these kinds in fixtures/real parses to the values its source shows; the
formats no public sample covers are written from the tools' source (cited per case).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probes.parsers import ParseError, dcb, ethtool_a, mlnx_qos, show_gids

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
ATT = "mlnx-qos__att-netarbiter-eth4-os-dcbx-trust-dscp-pfc-prio3-tsa-vendor"
PROXMOX = "mlnx-qos__proxmox-mce0-firmware-dcbx-dscp-buffers-pfc-prio3-ets-50-50"
POD_GIDS = "show-gids__nccl-1573-k8s-macvlan-pod-gids-4-to-7-net1-net2-tabs-excerpt"
PROXMOX_GIDS = "show-gids__proxmox-mce0-roce-v1-v2-ipv4-and-ib-port-v1-without-netdev-spaces"
DCB_ERROR = "dcb__iproute2-6.1-veth-eth0-pfc-show-attribute-read-operation-not-supported"
MODULES: dict[str, Any] = {"mlnx-qos": mlnx_qos, "show-gids": show_gids, "ethtool-a": ethtool_a,
                           "dcb": dcb}


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text(encoding="utf-8")


def samples(kind: str) -> list[Path]:
    return sorted(REAL.glob(f"{kind}__*.txt"))


@pytest.mark.parametrize("kind", sorted(MODULES))
def test_every_kind_has_real_samples_that_parse(kind: str) -> None:
    # the contract test runs them too once KINDS lists these kinds (merge note)
    assert samples(kind), kind
    for path in samples(kind):
        assert isinstance(MODULES[kind].parse(path.read_text(encoding="utf-8")), dict), path.name


# --- mlnx_qos -i ---------------------------------------------------------------------------

def test_mlnx_qos_os_controlled_trust_dscp_pfc_on_3():
    # att/netarbiter: OS-controlled DCBX, trust dscp, the default DSCP map, PFC on 3, no buffers
    out = mlnx_qos.parse(real(ATT))
    assert out["dcbx_mode"] == "os" and out["trust"] == "dscp"
    assert out["pfc_enabled"] == [3] and out["pfc_buffer"] is None and out["cable_len"] == 7
    assert out["dscp2prio"]["3"] == [31, 30, 29, 28, 27, 26, 25, 24]
    assert [t["tc"] for t in out["tcs"]] == list(range(8))
    assert out["tcs"][0] == {"tc": 0, "ratelimit": "unlimited", "tsa": "vendor", "bw_pct": None,
                             "priorities": [1]}


def test_mlnx_qos_firmware_dcbx_with_buffers_and_ets():
    # the Proxmox guide's output: buffers (max_buffer_size), a buffer row, ETS 50/50
    out = mlnx_qos.parse(real(PROXMOX))
    assert out["dcbx_mode"] == "firmware" and out["pfc_enabled"] == [3]
    assert out["buffer_sizes"] == [130944, 130944, 0, 0, 0, 0, 0, 0]
    assert out["max_buffer_size"] == 262016 and out["pfc_buffer"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert out["tcs"][0]["bw_pct"] == 50 and out["tcs"][0]["priorities"] == [0, 1, 2, 4, 5, 7]
    assert out["tcs"][2] == {"tc": 6, "ratelimit": "unlimited", "tsa": "vendor", "bw_pct": None,
                             "priorities": [6]}


def test_mlnx_qos_mlnx_ofed_4_2_layout_and_trust_pcp():
    # the MLNX_OFED 4.2 community page layout (rows without the leading tab, "tsa: ets, bw: N%"),
    # and a pcp host (no dscp2prio block), as mlnx-tools python/mlnx_qos pretty_print prints them
    text = ("DCBX mode: OS controlled\nPriority trust state: pcp\nCable len: 10\n"
            "PFC configuration:\npriority 0 1 2 3 4 5 6 7\nenabled 1 0 1 0 0 0 1 1\n"
            "tc: 0 ratelimit: unlimited, tsa: ets, bw: 10%\npriority: 1\n"
            "tc: 6 ratelimit: 25.0 Gbps, tsa: strict\npriority: 6\n")
    out = mlnx_qos.parse(text)
    assert out["trust"] == "pcp" and out["dscp2prio"] == {} and out["pfc_enabled"] == [0, 2, 6, 7]
    assert out["tcs"][1]["ratelimit"] == "25.0 Gbps" and out["tcs"][1]["tsa"] == "strict"


def test_mlnx_qos_trust_not_supported_and_lldpad_warning():
    # python/mlnx_qos: the lldpad warning, and trust "none" when the driver lacks trust support
    text = ("****** WARNING: lldpad service is running and may overwrite your settings ******\n\n"
            "Priority trust state is not supported on your system\nDCBX mode: OS controlled\n"
            "Priority trust state: none\nCable len: 7\nPFC configuration:\n"
            "\tpriority    0   1   2   3   4   5   6   7\n"
            "\tenabled     0   0   0   0   0   0   0   0   \n")
    out = mlnx_qos.parse(text)
    assert out["trust"] == "none" and out["pfc_enabled"] == []
    assert len(out["warnings"]) == 2


@pytest.mark.parametrize("text", [
    "",
    "Netlink error: Operation not permitted\n",
    "DCBX mode: OS controlled\nPriority trust state: dscp\n",  # cut before the PFC block
])
def test_mlnx_qos_without_pfc_block_is_a_parse_error(text):
    with pytest.raises(ParseError):
        mlnx_qos.parse(text)


# --- show_gids and the GID sysfs listing ---------------------------------------------------

def test_show_gids_spaces_two_link_local_pairs_then_ipv4():
    out = show_gids.parse(real("show-gids__ibm-nsdperf-cx6-mlx5_0-6-gids-ipv4-v1-v2-ens1f0-spaces"))
    assert out["count"] == 6 and len(out["gids"]) == 6
    assert out["gids"][5] == {"device": "mlx5_0", "port": 1, "index": 5,
                              "gid": "0000:0000:0000:0000:0000:ffff:ac13:003c",
                              "ipv4": "172.19.0.60", "version": "v2", "netdev": "ens1f0"}


def test_show_gids_tabs_pod_gids_from_index_4():
    out = show_gids.parse(real(POD_GIDS))
    v2 = [(g["device"], g["index"]) for g in out["gids"] if g["version"] == "v2" and g["ipv4"]]
    assert v2 == [("mlx5_0", 7), ("mlx5_1", 7)] and out["count"] is None  # excerpt: no total


def test_show_gids_ib_port_row_without_netdev_and_empty_table():
    out = show_gids.parse(real(PROXMOX_GIDS))
    assert out["gids"][-1]["device"] == "mlx5_1" and out["gids"][-1]["netdev"] is None
    empty = show_gids.parse(real("show-gids__k8s-pod-calico-cx4-lx-no-gids-n-gids-found-0-tabs"))
    assert empty == {"gids": [], "count": 0}


def test_gid_sysfs_listing_skips_unconfigured_entries():
    # grep -H over gids/*, gid_attrs/types/*, gid_attrs/ndevs/* (the files show_gids reads);
    # empty entries have no type (EINVAL) and zero/fe80:: GIDs are unconfigured (NCCL too)
    base = "/sys/class/infiniband/mlx5_2/ports/1"
    text = (f"{base}/gids/0:fe80:0000:0000:0000:0e42:a1ff:fe5d:4db8\n"
            f"{base}/gids/1:fe80:0000:0000:0000:0e42:a1ff:fe5d:4db8\n"
            f"{base}/gids/2:0000:0000:0000:0000:0000:ffff:ac13:003c\n"
            f"{base}/gids/3:0000:0000:0000:0000:0000:ffff:ac13:003c\n"
            f"{base}/gids/4:fe80:0000:0000:0000:0000:0000:0000:0000\n"
            f"{base}/gid_attrs/types/0:IB/RoCE v1\n{base}/gid_attrs/types/1:RoCE v2\n"
            f"{base}/gid_attrs/types/2:IB/RoCE v1\n{base}/gid_attrs/types/3:RoCE v2\n"
            f"{base}/gid_attrs/ndevs/0:ens1f0\n{base}/gid_attrs/ndevs/3:ens1f0\n")
    out = show_gids.parse(text)
    assert [(g["index"], g["version"], g["ipv4"], g["netdev"]) for g in out["gids"]] == [
        (0, "v1", None, "ens1f0"), (1, "v2", None, None), (2, "v1", "172.19.0.60", None),
        (3, "v2", "172.19.0.60", "ens1f0")]


@pytest.mark.parametrize("text", ["", "mlx5_0 port 1 ==> ens1f0 (Up)\n", "n_gids_found=\n"])
def test_show_gids_foreign_text_is_a_parse_error(text):
    with pytest.raises(ParseError):
        show_gids.parse(text)


# --- ethtool -a ----------------------------------------------------------------------------

def test_ethtool_a_with_negotiated_lines():
    out = ethtool_a.parse(real("ethtool-a__openwrt-mtk-eth2-autoneg-on-rx-tx-off-negotiated-lines"))
    assert (out["ifname"], out["autoneg"], out["rx"], out["tx"]) == ("eth2", True, False, False)
    assert out["rx_negotiated"] is False and out["error"] is None


def test_ethtool_a_ioctl_layout_with_statistics():
    # ethtool.c dump_pause (tabs), then -I's "Statistics:" block (netlink/pause.c)
    text = ("Pause parameters for ens1f0np0:\nAutonegotiate:\toff\nRX:\t\ton\nTX:\t\ton\n"
            "Statistics:\n  tx_pause_frames: 12\n  rx_pause_frames: 0\n")
    out = ethtool_a.parse(text)
    assert (out["autoneg"], out["rx"], out["tx"]) == (False, True, True)
    assert out["stats"] == {"tx_pause_frames": 12, "rx_pause_frames": 0}


def test_ethtool_a_not_supported_is_an_error_not_a_setting():
    out = ethtool_a.parse("Cannot get device pause settings: Operation not supported\n")
    assert out["rx"] is None and out["error"].startswith("Cannot get device pause")
    with pytest.raises(ParseError):
        ethtool_a.parse("Settings for eth0:\n\tSpeed: 100000Mb/s\n")


# --- dcb -----------------------------------------------------------------------------------

def test_dcb_real_not_supported_error():
    out = dcb.parse(real(DCB_ERROR))
    assert out["pfc_enabled"] is None
    assert out["errors"] == ["Attribute read: Operation not supported"]


def test_dcb_pfc_show_and_app_show():
    # iproute2 dcb/dcb_pfc.c dcb_pfc_print and dcb/dcb_app.c dcb_app_print
    pfc = dcb.parse("pfc-cap 8 macsec-bypass off delay 0 \n"
                    "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off \n")
    assert pfc["pfc_enabled"] == [3] and pfc["pfc_cap"] == 8 and pfc["trust"] is None
    app = dcb.parse("dscp-prio AF31:3 CS3:3 26:3 \n")
    assert app["trust"] == "dscp" and app["app"]["dscp-prio"] == ["AF31:3", "CS3:3", "26:3"]
    assert dcb.parse("pcp-prio 0:0 1:1 \n")["trust"] == "pcp"
    with pytest.raises(ParseError):
        dcb.parse("Usage: dcb [ OPTIONS ] OBJECT { COMMAND | help }\n")
