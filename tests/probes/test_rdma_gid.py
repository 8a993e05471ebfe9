"""roce-no-v2-ipv4-gid on ONE host (no fleet to compare with): what the host's own evidence says.

A port without a RoCE v2 IPv4 GID is a fault when NCCL wants that GID from it: the job names the
port in NCCL_IB_HCA, or RDMA traffic runs over it, or its netdev has an IPv4 address the GID
table lacks. It is not when the job pins NCCL_IB_GID_INDEX to a GID the port has, when the port
is IPv6-only (or the job asks AF_INET6) with a RoCE v2 IPv6 GID, when the port runs RoCE v1
only (NCCL picks its IPv4 v1 GID: family before version, net_ib.cc ncclUpdateGidIndex), or when
it is the unused second port of a dual-port card. Evidence not read excuses nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from probes.base import default_thresholds, get_probe
from probes.faults.apply import judge
from tests.probes.probe_outputs import edit, sh_accepts
from tests.probes.rdma_roce import netdev, rdma_roce

CODE = "roce-no-v2-ipv4-gid"
IB = "/sys/class/infiniband"
GUID_A, GUID_B = "b83f:d203:00aa:0010", "b83f:d203:00aa:0020"


def _links(ipv4: tuple[bool, bool] = (True, False), v6: bool = False) -> str:
    lines = ["1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN\\    "
             "link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00"]
    for i in range(2):
        lines.append(f"{4 + i}: {netdev(i)}: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq "
                     f"state UP mode DEFAULT group default qlen 1000\\    link/ether "
                     f"5c:25:73:00:00:0{i} brd ff:ff:ff:ff:ff:ff")
    lines.append("1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever")
    for i, has in enumerate(ipv4):
        if has:
            lines.append(f"{4 + i}: {netdev(i)}    inet 10.1.{i}.11/24 brd 10.1.{i}.255 scope "
                         f"global {netdev(i)}\\       valid_lft forever preferred_lft forever")
        if v6 and i == 1:
            lines.append(f"{4 + i}: {netdev(i)}    inet6 2001:db8:1::11/64 scope global \\"
                         "       valid_lft forever preferred_lft forever")
        lines.append(f"{4 + i}: {netdev(i)}    inet6 fe80::5e25:73ff:fe00:{i}/64 scope link \\"
                     "       valid_lft forever preferred_lft forever")
    return "\n".join(lines) + "\n"


def _counters(packets: tuple[int, int] = (81234567, 0), same_card: bool = True) -> str:
    guids = (GUID_A, GUID_A if same_card else GUID_B)
    lines = [f"{IB}/mlx5_{i}/sys_image_guid:{g}" for i, g in enumerate(guids)]
    for i, n in enumerate(packets):
        lines += [f"{IB}/mlx5_{i}/ports/1/counters/port_rcv_packets:{n}",
                  f"{IB}/mlx5_{i}/ports/1/counters/port_xmit_packets:{n}"]
    return "\n".join(lines) + "\n"


def _env(**env: str) -> str:
    return "".join(f"--- pid {pid}\n" + "".join(f"{k}={v}\n" for k, v in env.items())
                   for pid in (48230, 48231))


def _host(gids: tuple[int, ...] = (0, 1), **extra: str) -> str:
    """Two RoCE ports; mlx5_1 has only its link-local GIDs unless *gids* says otherwise."""
    return rdma_roce(only={1: {"gids": gids}}, extra=extra)


def _accused(text: str) -> list[str]:
    facts = get_probe("rdma").parse(text)
    found = judge("rdma", {"gpu001": facts}, default_thresholds())
    return [f"{m['device']}/{m['port']}" for f in found if f.code == CODE
            for m in f.evidence["matched"]]


def test_the_script_still_parses_as_posix_shell() -> None:
    assert sh_accepts(get_probe("rdma").command({})).returncode == 0


def test_without_the_new_evidence_the_port_is_judged_as_before() -> None:
    # older output (no addrs/rdmacnt/ncclenv sections): nothing excuses it
    assert _accused(_host()) == ["mlx5_1/1"]


# --- the unused second port of a dual-port card -------------------------------------------------

def test_an_unused_second_port_of_a_dual_port_card_is_not_a_fault() -> None:
    text = _host(addrs=_links(), rdmacnt=_counters(), ncclenv=_env(NCCL_IB_HCA="mlx5_0"))
    assert _accused(text) == []
    # no training process on the host (the job not running): the port's own evidence suffices
    assert _accused(_host(addrs=_links(), rdmacnt=_counters(), ncclenv="")) == []
    # a single-port card the job's NCCL_IB_HCA leaves out: NCCL never opens it
    assert _accused(_host(addrs=_links(), rdmacnt=_counters(same_card=False),
                          ncclenv=_env(NCCL_IB_HCA="=mlx5_0"))) == []


@pytest.mark.parametrize("why, extra", [
    ("the job names it", dict(addrs=_links(), rdmacnt=_counters(),
                              ncclenv=_env(NCCL_IB_HCA="mlx5_0,mlx5_1"))),
    ("RDMA traffic counted on it", dict(addrs=_links(), rdmacnt=_counters((9, 4_000_000)),
                                        ncclenv="")),
    ("its netdev has an IPv4 address the GID table lacks",
     dict(addrs=_links((True, True)), rdmacnt=_counters(), ncclenv="")),
    ("a single-port card: no sibling port has the GID",
     dict(addrs=_links(), rdmacnt=_counters(same_card=False), ncclenv="")),
    ("a single-port card and a job without NCCL_IB_HCA (NCCL opens every device)",
     dict(addrs=_links(), rdmacnt=_counters(same_card=False),
          ncclenv=_env(NCCL_IB_GID_INDEX="-1"))),
    ("the counters were not read", dict(addrs=_links(), rdmacnt="", ncclenv="")),
    ("ip is not installed", dict(rdmacnt=_counters(), ncclenv="")),
])
def test_the_jobs_port_or_a_port_with_an_address_stays_a_fault(why: str,
                                                               extra: dict[str, Any]) -> None:
    assert _accused(_host(**extra)) == ["mlx5_1/1"], why


# --- the job's own GID choice ---------------------------------------------------------------------

def test_a_pinned_gid_index_the_port_has_is_what_nccl_uses() -> None:
    both = dict(addrs=_links(), rdmacnt=_counters((5, 5)))
    assert _accused(_host(ncclenv=_env(NCCL_IB_GID_INDEX="1"), **both)) == []
    # pinned to an index the port does not have: NCCL's GID query fails on it
    assert _accused(_host(ncclenv=_env(NCCL_IB_GID_INDEX="3"), **both)) == ["mlx5_1/1"]
    # -1 is the automatic selection (the default)
    assert _accused(_host(ncclenv=_env(NCCL_IB_GID_INDEX="-1"), **both)) == ["mlx5_1/1"]


def _ipv6_host(**extra: str) -> str:
    text = _host(**extra)
    v6 = "2001:0db8:0001:0000:0000:0000:0000:0011"
    add = (f"{IB}/mlx5_1/ports/1/gids/2:{v6}\n{IB}/mlx5_1/ports/1/gids/3:{v6}\n"
           f"{IB}/mlx5_1/ports/1/gid_attrs/types/2:IB/RoCE v1\n"
           f"{IB}/mlx5_1/ports/1/gid_attrs/types/3:RoCE v2\n"
           f"{IB}/mlx5_1/ports/1/gid_attrs/ndevs/2:{netdev(1)}\n"
           f"{IB}/mlx5_1/ports/1/gid_attrs/ndevs/3:{netdev(1)}\n")
    return edit(text, "gids", "roce_netdev mlx5_1 1", add + "roce_netdev mlx5_1 1")


def test_an_ipv6_only_port_is_not_a_missing_ipv4_gid() -> None:
    traffic = dict(addrs=_links(v6=True), rdmacnt=_counters((5, 5)))
    assert _accused(_ipv6_host(ncclenv="", **traffic)) == []
    assert _accused(_ipv6_host(ncclenv=_env(NCCL_IB_ADDR_FAMILY="AF_INET6",
                                            NCCL_IB_HCA="mlx5_1"), **traffic)) == []
    # the job runs with NCCL's default AF_INET over it: it finds no IPv4 GID there
    assert _accused(_ipv6_host(ncclenv=_env(NCCL_IB_HCA="mlx5_1"), **traffic)) == ["mlx5_1/1"]


def test_a_roce_v1_only_port_gives_nccl_its_ipv4_v1_gid() -> None:
    text = rdma_roce(extra=dict(addrs=_links((True, True)), rdmacnt=_counters((5, 5)),
                                ncclenv=_env(NCCL_IB_HCA="mlx5_0,mlx5_1")))
    v1 = text.replace("gid_attrs/types/1:RoCE v2", "gid_attrs/types/1:IB/RoCE v1").replace(
        "gid_attrs/types/3:RoCE v2", "gid_attrs/types/3:IB/RoCE v1")
    assert "RoCE v2" not in v1
    assert _accused(v1) == []
    # one v2 GID left (v1 and v2 both populated, the IPv4 one v1 only): not a v1-only port
    mixed = v1.replace("mlx5_1/ports/1/gid_attrs/types/1:IB/RoCE v1",
                       "mlx5_1/ports/1/gid_attrs/types/1:RoCE v2")
    assert _accused(mixed) == ["mlx5_1/1"]


def test_the_facts_say_what_was_read() -> None:
    facts = get_probe("rdma").parse(_host(addrs=_links(), rdmacnt=_counters(),
                                          ncclenv=_env(NCCL_IB_HCA="=mlx5_0")))
    port = {p["key"]: p for p in facts["ports"]}["mlx5_1/1"]
    assert (port["netdev_ipv4_addrs"], port["rdma_packets"], port["job_port"],
            port["sibling_v2_gid"]) == (0, 0, False, True)
    assert facts["nccl_addr_family"] == "AF_INET" and facts["nccl_gid_index"] is None
    unread = get_probe("rdma").parse(_host())
    port = {p["key"]: p for p in unread["ports"]}["mlx5_1/1"]
    assert (port["netdev_ipv4_addrs"], port["rdma_packets"], port["job_port"],
            port["sibling_v2_gid"], unread["nccl_addr_family"]) == (None, None, None, None, None)
