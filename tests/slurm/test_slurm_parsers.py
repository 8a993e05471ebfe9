"""The Slurm parsers on real recorded output (fixtures/real, recorded from the local test
cluster) and the scheduler probe's checks on real probe output (the queue-idle scenarios).

No Slurm needed: these are pure text -> facts -> findings tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes import scheduler
from probes.base import Context
from probes.parsers import ParseError, parse
from probes.parsers.sinfo import gres_gpus, node_state
from probes.parsers.squeue import reason_kind

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "real"
SCENARIOS = ROOT / "fixtures" / "scenarios"


def real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


def nodes_by_name(facts: dict) -> dict[str, dict]:
    return {n["node"]: n for n in facts["nodes"]}


# --- sinfo -----------------------------------------------------------------------------------

def test_sinfo_drained_nodes_and_scattered_gpus() -> None:
    # -N -O with '|' suffixes: nodes in two partitions are merged, drain reasons kept whole
    facts = parse("sinfo", real("sinfo__4-node-h100-two-drained-by-healthcheck-gpus-scattered.txt"))
    nodes = nodes_by_name(facts)
    assert list(nodes) == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert nodes["gpu001"]["partitions"] == ["gpu", "small"]
    assert facts["default_partition"] == "gpu"
    assert facts["partitions"]["small"] == ["gpu001", "gpu002"]
    for name in ("gpu003", "gpu004"):
        node = nodes[name]
        assert node["state"] == "allocated+drain" and node["drain"] and not node["usable"]
        assert node["reason"] == ("healthcheck: NHC check_nv_gpu_count: expected 8 GPUs, "
                                  "found 7; drained")
        assert node["reason_user"] == "root" and node["reason_time"].startswith("2026-")
    for node in nodes.values():
        assert (node["gpus_total"], node["gpus_used"], node["gpus_free"]) == (8, 3, 5)
    assert nodes["gpu001"]["usable"] and nodes["gpu001"]["reason"] is None
    json.dumps(facts, allow_nan=False)


def test_sinfo_down_and_idle_drain() -> None:
    facts = parse("sinfo", real("sinfo__4-node-h100-one-down-one-drained-idle.txt"))
    nodes = nodes_by_name(facts)
    assert nodes["gpu002"]["down"] and nodes["gpu002"]["reason"] == "Not responding"
    assert nodes["gpu003"]["state"] == "idle+drain" and nodes["gpu003"]["drain"]
    assert nodes["gpu003"]["base_state"] == "idle"
    assert nodes["gpu004"]["usable"] and nodes["gpu004"]["gpus_free"] == 8


def test_sinfo_default_table_expands_node_lists() -> None:
    # plain `sinfo`: one row per partition and state, node-list expressions expanded
    facts = parse("sinfo", real("sinfo__default-table-two-partitions-drain-down.txt"))
    nodes = nodes_by_name(facts)
    assert sorted(nodes) == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert nodes["gpu003"]["drain"] and nodes["gpu002"]["down"]
    assert nodes["gpu001"]["partitions"] == ["gpu", "small"]
    assert nodes["gpu001"]["gpus_total"] is None  # no GRES column: unknown, not zero


@pytest.mark.parametrize(("raw", "base", "drain", "down", "usable"), [
    ("idle", "idle", False, False, True),
    ("mixed", "mixed", False, False, True),
    ("mix", "mixed", False, False, True),
    ("draining", "draining", True, False, False),
    ("drng", "draining", True, False, False),
    ("drain", "drained", True, False, False),
    ("mixed+drain", "mixed", True, False, False),
    ("idle+drain*", "idle", True, True, False),
    ("down*", "down", False, True, False),
    ("idle*", "idle", False, True, False),
    # power saving: a powered-down node takes jobs (Slurm resumes it); one booting for a job
    # is NOT_RESPONDING until slurmd registers (recorded on Slurm 22.05): booting, not down
    ("idle~", "idle", False, False, True),
    ("idle+powered_down", "idle", False, False, True),
    ("idle#", "idle", False, False, False),
    ("mixed+not_responding+powering_up", "mixed", False, False, False),
    ("reserved", "reserved", False, False, False),
    ("maint", "maint", False, False, False),
    ("alloc", "allocated", False, False, True),
])
def test_node_states(raw: str, base: str, drain: bool, down: bool, usable: bool) -> None:
    # Slurm spells one state several ways; drain/down/usable is what queue-idle needs
    state = node_state(raw)
    assert (state["base_state"], state["drain"], state["down"], state["usable"]) == (
        base, drain, down, usable)


@pytest.mark.parametrize(("gres", "gpus"), [
    ("gpu:8", 8), ("gpu:h100:8(S:0-1)", 8), ("gpu:h100:3(IDX:0-2)", 3),
    ("gpu:h100:0(IDX:N/A)", 0), ("gpu:(null):1(IDX:0)", 1), ("gres:gpu:8", 8),
    ("gres/gpu=8", 8), ("gres:gpu:h100:32", 32), ("gpu", 1), ("gpu:a100", 1),
    ("gpu:a100:4(S:0),gpu:v100:2(IDX:0,2)", 6), ("gpu:4,nic:1", 4), ("nic:2", 0),
    ("(null)", 0), ("N/A", 0), (None, 0), ("gpu:h100:lots", None),
])
def test_gres_gpu_counts(gres: str | None, gpus: int | None) -> None:
    assert gres_gpus(gres) == gpus


def test_sinfo_refuses_headerless_and_unknown_states() -> None:
    with pytest.raises(ParseError, match=r"^not sinfo output: no header"):
        parse("sinfo", "gpu001|idle|none|gpu:8|0/8/0/8\n")
    with pytest.raises(ParseError, match="is not a Slurm node state"):
        parse("sinfo", "NODELIST|STATE|\ngpu001|sleepy|\n")


# --- squeue ----------------------------------------------------------------------------------

def test_squeue_pending_reasons_and_gpu_requests() -> None:
    facts = parse("squeue", real(
        "squeue__pending-resources-reqnodenotavail-partition-dependency-held.txt"))
    jobs = {j["job_id"]: j for j in facts["jobs"]}
    assert facts["pending"] == 6
    assert (jobs["6"]["gpus_per_node"], jobs["6"]["nodes"], jobs["6"]["gpus"]) == (8, 1, 8)
    assert jobs["6"]["reason_kind"] == "resources"
    assert (jobs["7"]["gpus_per_job"], jobs["7"]["gpus"]) == (32, 32)
    assert jobs["7"]["reason"] == "ReqNodeNotAvail, UnavailableNodes:gpu[003-004]"
    assert jobs["7"]["reason_kind"] == "nodes"
    assert jobs["8"]["reason_kind"] == "partition" and jobs["8"]["partition"] == "small"
    assert jobs["9"]["reason_kind"] == "dependency"
    assert jobs["10"]["reason_kind"] == "held"
    assert jobs["11"]["reason_kind"] == "reservation"
    assert jobs["8"]["qos"] is None  # "(null)" without accounting


def test_squeue_default_table() -> None:
    # the pending reason comes out of NODELIST(REASON)'s parentheses; running jobs keep nodes
    facts = parse("squeue", real("squeue__default-table-pending-and-running.txt"))
    jobs = {j["job_id"]: j for j in facts["jobs"]}
    assert jobs["6"]["state"] == "PENDING" and jobs["6"]["reason"] == "Resources"
    assert jobs["1"]["state"] == "RUNNING" and jobs["1"]["nodelist"] == "gpu[001-004]"
    assert facts["pending"] == 6


@pytest.mark.parametrize(("reason", "kind"), [
    ("Resources", "resources"), ("Priority", "priority"),
    ("QOSMaxGRESPerUser", "qos"), ("AssocGrpGRES", "qos"), ("QOSGrpGRES", "qos"),
    ("AssocMaxJobsLimit", "qos"), ("PartitionNodeLimit", "partition"),
    ("PartitionTimeLimit", "partition"), ("ReqNodeNotAvail, Reserved for maintenance",
                                          "reservation"),
    ("ReqNodeNotAvail,_May_be_reserved_for_other_job", "reservation"),
    ("ReqNodeNotAvail, UnavailableNodes:gpu[003-004]", "nodes"),
    ("Dependency", "dependency"), ("DependencyNeverSatisfied", "dependency"),
    ("JobHeldAdmin", "held"), ("BeginTime", "held"), ("None", None), ("Licenses", "nodes"),
    ("InvalidAccount", "other"),
])
def test_reason_kinds(reason: str, kind: str | None) -> None:
    assert reason_kind(reason) == kind


# --- scontrol show job -------------------------------------------------------------------------

def test_scontrol_job_one_line() -> None:
    text = real("scontrol-job__oneline-running-4-node-gres-gpu1.txt")
    job = parse("scontrol-job", text)["jobs"][0]
    assert (job["job_id"], job["state"], job["ended"]) == ("1", "RUNNING", False)
    assert (job["nodelist"], job["num_nodes"], job["partition"]) == ("gpu[001-004]", 4, "gpu")
    assert job["gres"] == "gres:gpu:1" and job["user"] == "root"
    assert job["start_time"] == "2026-11-30T08:57:31" and job["end_time"] is None
    assert job["fields"]["AllocNode:Sid"] == "localhost:3393"  # keys with ':' are kept


def test_scontrol_job_multi_line_pending() -> None:
    job = parse("scontrol-job",
                real("scontrol-job__multiline-pending-whole-node-gres-gpu8.txt"))["jobs"][0]
    assert (job["job_id"], job["state"], job["reason"]) == ("6", "PENDING", "Resources")
    assert job["nodelist"] is None and (job["num_nodes"], job["num_nodes_max"]) == (1, 1)
    assert job["gres"] == "gres:gpu:8" and job["start_time"] is None


def test_scontrol_job_refuses_other_output() -> None:
    with pytest.raises(ParseError, match=r"^not scontrol show job output"):
        parse("scontrol-job", "slurm_load_jobs error: Invalid job id specified\n")


# --- the scheduler probe -----------------------------------------------------------------------

def scenario_facts(name: str) -> dict:
    return scheduler.parse((SCENARIOS / name / "outputs" / "scheduler.txt").read_text())


def codes(findings: list) -> dict[str, tuple[str, ...]]:
    return {f.code: f.hosts for f in findings}


def test_scheduler_baseline_is_quiet() -> None:
    facts = scheduler.parse((SCENARIOS / "_baseline" / "scheduler.txt").read_text())
    assert facts["slurm_version"] == "22.05.8"
    assert (facts["nodes_total"], facts["gpus_total"], facts["gpus_free"]) == (4, 32, 0)
    assert facts["pending_jobs"] == 0
    assert scheduler.check_fleet({"gpu001": facts}, Context()) == []


def test_scheduler_drained_by_health_check() -> None:
    facts = scenario_facts("queue-idle-drained-healthcheck")
    assert (facts["nodes_drained"], facts["gpus_idle_unusable"], facts["gpus_free"]) == (2, 16, 0)
    assert all(d["health_check"] for d in facts["drained"])
    found = scheduler.check_fleet({"gpu001": facts}, Context())
    assert codes(found) == {"nodes-drained": ("gpu003", "gpu004"), "priority-wait": (),
                            "drained-for-hardware": ("gpu003", "gpu004")}
    assert found[1].evidence["faults"] == {"gpu003": "link", "gpu004": "link"}
    drained = found[0]
    assert "NHC: check_hw_ib" in drained.message
    assert drained.evidence["health_check"] == ["gpu003", "gpu004"]


def test_scheduler_node_down() -> None:
    facts = scenario_facts("queue-idle-node-down")
    assert facts["nodes_down"] == 1 and facts["down"][0]["reason"] == "Not responding"
    assert codes(scheduler.check_fleet({"h": facts}, Context()))["nodes-down"] == ("gpu002",)


def probe_output(sinfo: str, squeue: str, reservations: str) -> str:
    """The probe script's shape around real command outputs."""
    return (f"=== diag:section nodes\n{sinfo}=== diag:rc nodes 0\n"
            f"=== diag:section pending\n{squeue}=== diag:rc pending 0\n"
            f"=== diag:section reservations\n{reservations}=== diag:rc reservations 0\n")


# Recorded from the test cluster with the first sinfo/squeue fixtures (scontrol show
# reservation -o): a MAINT reservation on gpu002 starting 10 minutes later.
MAINT = ("ReservationName=maint-0300 StartTime=2026-11-30T09:07:43 EndTime=2026-11-30T11:07:43 "
         "Duration=02:00:00 Nodes=gpu002 NodeCnt=1 CoreCnt=8 Features=(null) "
         "PartitionName=(null) Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=8 Users=root "
         "Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) "
         "Watts=n/a MaxStartDelay=(null)\n")
# ... and an active one holding idle gpu004 for another team (second cluster state).
TEAM = ("ReservationName=team-vision StartTime=2026-11-30T08:57:47 EndTime=2026-12-01T08:57:47 "
        "Duration=1-00:00:00 Nodes=gpu004 NodeCnt=1 CoreCnt=8 Features=(null) "
        "PartitionName=(null) Flags=IGNORE_JOBS,SPEC_NODES TRES=cpu=8 Users=nobody "
        "Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) "
        "Watts=n/a MaxStartDelay=(null)\n")


def test_scheduler_every_finding_on_the_recorded_queue() -> None:
    # drained nodes, fragmentation (job 6: 8 GPUs on one node, 10 free but 5 per node),
    # a partition limit (job 8), a job waiting on the upcoming maintenance (job 11)
    text = probe_output(
        real("sinfo__4-node-h100-two-drained-by-healthcheck-gpus-scattered.txt"),
        real("squeue__pending-resources-reqnodenotavail-partition-dependency-held.txt"), MAINT)
    facts = scheduler.parse(text)
    assert (facts["gpus_free"], facts["largest_free_block"]) == (10, 5)
    assert facts["pending_reasons"]["ReqNodeNotAvail"] == 2
    found = codes(scheduler.check_fleet({"gpu001": facts}, Context()))
    assert found["nodes-drained"] == ("gpu003", "gpu004")
    assert found["gpus-fragmented"] == ("gpu001", "gpu002")
    assert found["partition-limit"] == ()
    assert found["reservation-holds-nodes"] == ("gpu002",)
    # job 6 pends on Resources because the free GPUs are scattered: gpus-fragmented explains
    # it, so it is not "the queue is simply full"
    assert "priority-wait" not in found
    assert "qos-limit" not in found and "nodes-down" not in found


def test_scheduler_active_reservation_holding_idle_gpus() -> None:
    squeue = ("JOBID|PARTITION|USER|STATE|NODES|QOS|RESERVATION|TRES_PER_NODE|TRES_PER_JOB|"
              "REASON|\n12|gpu|root|PENDING|2|(null)|(null)|gres:gpu:8|N/A|"
              "ReqNodeNotAvail, UnavailableNodes:gpu[002-003]|\n")
    facts = scheduler.parse(probe_output(
        real("sinfo__4-node-h100-one-down-one-drained-idle.txt"), squeue, TEAM))
    found = scheduler.check_fleet({"gpu001": facts}, Context())
    resv = next(f for f in found if f.code == "reservation-holds-nodes")
    assert resv.hosts == ("gpu004",) and "team-vision holds 8 idle GPU(s)" in resv.message
    assert {f.code for f in found} >= {"nodes-down", "nodes-drained"}


def test_scheduler_qos_limit() -> None:
    squeue = ("JOBID|PARTITION|USER|STATE|NODES|QOS|RESERVATION|TRES_PER_NODE|TRES_PER_JOB|"
              "REASON|\n81234|gpu|alice|PENDING|4|normal|(null)|gres:gpu:8|N/A|"
              "QOSMaxGRESPerUser|\n")
    facts = scheduler.parse(probe_output(
        real("sinfo__4-node-h100-one-down-one-drained-idle.txt"), squeue,
        "No reservations in the system\n"))
    qos = next(f for f in scheduler.check_fleet({"h": facts}, Context()) if f.code == "qos-limit")
    assert qos.evidence["users"] == ["alice"] and "QOSMaxGRESPerUser" in qos.message


def test_fragmentation_counts_only_the_jobs_partition_and_usable_nodes() -> None:
    nodes = [{"node": f"n{i}", "usable": i != 3, "partitions": ["gpu"], "gpus_free": 4}
             for i in range(4)]
    job = {"job_id": "1", "reason_kind": "resources", "partition": "gpu", "nodes": 1,
           "gpus_per_node": 8, "gpus": 8}
    frag = scheduler.fragmented_jobs({"nodes": nodes, "pending": [job]})
    assert frag and frag[0]["free_in_partition"] == 12 and "n3" not in frag[0]["scattered"]
    # --gpus=16 over 4 nodes fits when the 4 emptiest nodes hold 16: n3 is not usable
    job2 = {**job, "gpus_per_node": None, "nodes": 4, "gpus": 16}
    assert scheduler.fragmented_jobs({"nodes": nodes, "pending": [job2]}) == []  # 12 < 16
    job3 = {**job2, "nodes": 2, "gpus": 10}
    assert scheduler.fragmented_jobs({"nodes": nodes, "pending": [job3]})  # 8 < 10 <= 12
    other = {**job, "partition": "debug"}
    assert scheduler.fragmented_jobs({"nodes": nodes, "pending": [other]}) == []


def test_scheduler_shared_marker_and_failures() -> None:
    # hosts other than the reader get the shared marker; checks read the reader's facts
    shared = scheduler.parse(scheduler.shared_output("gpu001"))
    assert shared == {"shared": True, "read_on": "gpu001"}
    facts = scenario_facts("queue-idle-node-down")
    found = scheduler.check_fleet({"gpu002": shared, "gpu001": facts}, Context())
    assert [f.code for f in found].count("nodes-down") == 1
    # Slurm that does not answer: not measured, named, never a pass
    hung = ("=== diag:section nodes\n=== diag:rc nodes 124\n=== diag:section pending\n"
            "diag: skipped: Slurm did not answer the first call\n=== diag:rc pending 124\n")
    facts = scheduler.parse(hung)
    assert facts["nodes_total"] is None and "did not answer" in facts["errors"]["nodes"]
    found = scheduler.check_fleet({"gpu001": facts}, Context())
    assert {f.code for f in found} == {"not-measured"} and len(found) == 2
    missing = scheduler.parse("=== diag:missing version\n=== diag:missing nodes\n")
    found = scheduler.check_fleet({"gpu001": missing}, Context())
    assert [f.code for f in found] == ["not-measured"] and "sinfo not found" in found[0].message


def test_scheduler_command_is_bounded_and_names_the_job() -> None:
    text = scheduler.command({"job": "1234"})
    assert text.count("timeout -k 2 10 ") == 4
    assert "scontrol show job -o 1234" in text
    assert "1234; rm" not in scheduler.command({"job": "1234; rm -rf /"})  # not a job id
