"""RoCE v1 and v2 GIDs across a walk: a lone RoCE v1 host among RoCE v2 peers is that host's fault
(both ends of a RoCE connection must use the same type: Red Hat, "Temporarily changing the
default RoCE version"); a fleet alike on RoCE v1 is the site's design (one L2 domain: a warning
naming no fault of a host); a job whose NCCL settings pick a v1 GID where v2 exists is the job's
misconfiguration (NCCL_IB_GID_INDEX / NCCL_IB_ROCE_VERSION_NUM, NCCL docs and net_ib.cc).
"""

from __future__ import annotations

from typing import Any

from probes.base import default_thresholds, get_probe
from probes.faults.apply import judge
from probes.faults.catalogue import load_faults
from tests.probes.rdma_roce import rdma_roce

AMONG, ALONE, PINNED = "roce-v1-only-among-v2", "roce-v1-only", "roce-nccl-gid-index-v1"
HOSTS = ("gpu001", "gpu002", "gpu003", "gpu004")


def v1_only(**kw: Any) -> str:
    """A host whose NIC offers RoCE v1 only: a link-local and an IPv4 GID, both "IB/RoCE v1"
    (ConnectX-3's mlx4 layout, or a ConnectX with RoCE v2 off)."""
    text = rdma_roce(gids=(0, 2), **kw)
    assert "RoCE v2" not in text
    return text


def env(**values: str) -> str:
    return "".join(f"--- pid {pid}\n" + "".join(f"{k}={v}\n" for k, v in values.items())
                   for pid in (48230, 48231))


def walk(texts: dict[str, str]) -> list[Any]:
    parse = get_probe("rdma").parse
    return judge("rdma", {h: parse(t) for h, t in texts.items()}, default_thresholds())


def raised(found: list[Any], code: str) -> list[str]:
    return sorted(h for f in found if f.code == code for h in f.hosts)


def serious(found: list[Any]) -> list[tuple[str, str]]:
    return sorted((f.code, h) for f in found if f.severity in ("error", "critical")
                  and load_faults().signatures.get(f.code) is not None
                  and load_faults().signatures[f.code].standing for h in f.hosts)


def test_the_facts_name_the_gid_types() -> None:
    facts = get_probe("rdma").parse(v1_only())
    assert facts["roce_gid_types"] == "v1"
    assert {p["gid_types"] for p in facts["ports"]} == {"v1"}
    assert get_probe("rdma").parse(rdma_roce())["roce_gid_types"] == "v1|v2"


def test_a_lone_roce_v1_host_among_v2_peers_is_that_hosts_fault() -> None:
    found = walk({"gpu001": v1_only(), **{h: rdma_roce() for h in HOSTS[1:]}})
    assert raised(found, AMONG) == ["gpu001"]
    assert (AMONG, "gpu001") in serious(found)
    assert [h for f in found for h in f.hosts if f.severity in ("error", "critical")
            and h != "gpu001"] == []


def test_a_fleet_alike_on_roce_v1_is_a_warning_not_a_host_fault() -> None:
    found = walk({h: v1_only() for h in HOSTS})
    assert raised(found, AMONG) == []
    assert serious(found) == []
    alone = [f for f in found if f.code == ALONE]
    assert alone and {f.severity for f in alone} == {"warning"}
    assert load_faults().signatures[ALONE].scope == "fabric"


def test_one_host_is_judged_on_its_own() -> None:
    found = walk({"gpu001": v1_only()})
    assert raised(found, AMONG) == [] and serious(found) == []
    assert raised(found, ALONE) == ["gpu001"]


def test_v1_beside_v2_and_v2_only_nics_are_healthy() -> None:
    # the mlx5 layout (v1 and v2 per address) beside RoCE v2-only NICs: no v1-only host
    v2_only = rdma_roce(gids=(1, 3))
    assert "IB/RoCE v1" not in v2_only
    found = walk({"gpu001": v2_only, "gpu002": v2_only, "gpu003": rdma_roce(),
                  "gpu004": rdma_roce()})
    assert raised(found, AMONG) == raised(found, ALONE) == [] and serious(found) == []


def test_a_job_pinning_a_v1_gid_where_v2_exists_is_the_jobs_misconfiguration() -> None:
    for bad in (env(NCCL_IB_GID_INDEX="0"), env(NCCL_IB_GID_INDEX="2"),
                env(NCCL_IB_ROCE_VERSION_NUM="1")):
        found = walk({"gpu001": rdma_roce(extra={"ncclenv": bad})})
        assert raised(found, PINNED) == ["gpu001"], bad
        assert serious(found) == []  # the job's, not the host's: nothing to drain
    for good in (env(NCCL_IB_GID_INDEX="3"), env(NCCL_IB_GID_INDEX="-1"), env(), "",
                 env(NCCL_IB_ROCE_VERSION_NUM="2")):
        assert raised(walk({"gpu001": rdma_roce(extra={"ncclenv": good})}), PINNED) == [], good
    # a RoCE v1-only port has no v2 GID to prefer: roce-v1-only's business, not the job's
    v1 = walk({"gpu001": v1_only(extra={"ncclenv": env(NCCL_IB_GID_INDEX="2")})})
    assert raised(v1, PINNED) == []
    # no training process read: not measured, not excused, not accused
    assert get_probe("rdma").parse(rdma_roce())["ports"][0]["nccl_gid_version"] is None


def test_the_whole_job_pinning_a_v1_gid_names_no_host_at_fault() -> None:
    found = walk({h: rdma_roce(extra={"ncclenv": env(NCCL_IB_GID_INDEX="0")}) for h in HOSTS})
    assert raised(found, PINNED) == list(HOSTS)
    assert serious(found) == []


def test_gids_whose_types_were_refused_are_not_measured_not_missing_v2() -> None:
    # gid_attrs/types refused for every entry (EINVAL in a container for GIDs not mapped into
    # it: NCCL net_ib.cc ncclIbRoceGetVersionNum): the grep lists the GIDs and no type line
    text = "\n".join(line for line in rdma_roce().splitlines()
                     if "/gid_attrs/types/" not in line) + "\n"
    facts = get_probe("rdma").parse(text)
    assert {p["roce_v2_gid"] for p in facts["ports"]} == {None}
    assert {p["gid_types"] for p in facts["ports"]} == {None}
    found = walk({h: text if h == "gpu001" else rdma_roce() for h in HOSTS})
    assert [f.code for f in found if "gpu001" in f.hosts and f.severity != "info"] == []
    from probes.base import Context
    notes = get_probe("rdma").check("gpu001", facts, Context())
    assert any("GID table" in n.message for n in notes)
