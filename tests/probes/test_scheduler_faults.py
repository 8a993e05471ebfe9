"""The scheduler family of the fault catalogue against the scheduler probe's facts, beyond the
fault/twin examples (fixtures/signatures/scheduler.yaml, judged by test_signature_examples.py):
the baseline raises none, the per-node facts the signatures read are there, recorded sinfo
outputs raise what they show, and an operator's own note raises nothing of the family."""

from __future__ import annotations

from probes.faults.apply import judge
from probes.faults.catalogue import load_faults
from probes.scheduler import parse
from tests.probes.probe_outputs import baseline, real, replace

BASE = baseline("scheduler")
FAMILY = {s.id for s in load_faults().signatures.values() if s.family == "scheduler"}
HEADER = "NODELIST|PARTITION|STATECOMPLETE|GRES|GRES_USED|CPUS(A/I/O/T)|TIMESTAMP|USER|REASON|"
BUSY = "gpu001|gpu*|mixed|gpu:h100:8|gpu:h100:8(IDX:0-7)|1/7/0/8|Unknown|Unknown|none|"


def nodes(gpu003: str) -> str:
    """A two-node ``sinfo -N -O`` table: gpu001 busy, gpu003 as *gpu003* (STATE|...|REASON)."""
    return f"{HEADER}\n{BUSY}\ngpu003|gpu*|{gpu003}|\n"


def raised(nodes_text: str) -> dict[str, list[str]]:
    """Signature id -> the Slurm nodes the catalogue raises it on, sinfo read on gpu001 (the
    applier credits each matching node, never the host that read the output)."""
    facts = parse(replace(BASE, nodes=nodes_text))
    out: dict[str, list[str]] = {}
    for found in judge("scheduler", {"gpu001": facts}, {}):
        if found.code in FAMILY:
            out.setdefault(found.code, []).extend(found.hosts)
    return {code: sorted(hosts) for code, hosts in out.items()}


def test_baseline_raises_no_scheduler_signature():
    facts = parse(BASE)
    assert [f.code for f in judge("scheduler", {"gpu001": facts}, {}) if f.code in FAMILY] == []


def test_nodes_carry_state_reason_and_who():
    # the per-node facts the signatures read (added for the catalogue)
    facts = parse(replace(BASE, nodes=nodes(
        "idle+drain|gpu:h100:8|gpu:h100:0(IDX:N/A)|0/0/8/8|2026-11-30T08:57:47|slurm(64030)|"
        "Kill task failed")))
    [gpu003] = [n for n in facts["nodes"] if n["node"] == "gpu003"]
    assert {k: gpu003[k] for k in (
        "state", "base_state", "not_responding", "reason", "since", "by", "hardware_fault",
        "drain")} == {"state": "idle+drain", "base_state": "idle", "not_responding": False,
                      "reason": "Kill task failed", "since": "2026-11-30T08:57:47",
                      "by": "slurm", "hardware_fault": None, "drain": True}
    healthy = next(n for n in facts["nodes"] if n["node"] == "gpu001")
    assert healthy["reason"] is None and healthy["since"] is None


def test_recorded_queue_samples():
    # real sinfo outputs recorded on a Slurm 22.05 cluster (fixtures/real/SOURCES.md)
    down_drained = raised(real("sinfo__4-node-h100-one-down-one-drained-idle"))
    assert down_drained == {"slurm-node-not-responding": ["gpu002"],
                            "slurm-kill-task-failed": ["gpu003"]}
    # an NHC-style health check naming a missing GPU is a hardware drain, not slurm-nhc-drain
    # (no "NHC:" prefix and a hardware fault named): no scheduler-family signature of its own
    assert raised(real("sinfo__4-node-h100-two-drained-by-healthcheck-gpus-scattered")) == {}


def test_an_operators_note_raises_no_signature():
    # free text an admin wrote: nodes-drained names it, the family stays silent
    assert raised(nodes("idle+drain|gpu:h100:8|gpu:h100:0(IDX:N/A)|0/0/8/8|"
                        "2026-11-30T08:57:47|jdoe(1001)|rack 12 PDU swap tuesday")) == {}


MAINT = ("ReservationName=fw StartTime=2025-01-20T08:00:00 EndTime=2025-01-20T20:00:00 "
         "Duration=12:00:00 Nodes=gpu003 NodeCnt=1 CoreCnt=8 Features=(null) "
         "PartitionName=(null) Flags=MAINT,SPEC_NODES TRES=cpu=8 Users=root Groups=(null) "
         "Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a "
         "MaxStartDelay=(null)\n")


def test_a_node_down_in_an_active_maint_reservation_is_planned():
    # the MAINT flag in sinfo, or (Slurm 22.05 shows no flag) an ACTIVE Flags=MAINT
    # reservation naming the node: planned work, neither nodes-down nor not-responding
    from probes.scheduler import check_fleet
    from tests.probes.probe_outputs import context
    silent = ("down+not_responding|gpu:h100:8|gpu:h100:0(IDX:N/A)|0/0/8/8|"
              "2025-01-20T08:31:40|slurm(64030)|Not responding")
    for text, resv in ((silent, MAINT), ("down+maintenance|gpu:h100:8|gpu:h100:0(IDX:N/A)|0/0/8/8|"
                                         "2025-01-20T08:02:11|root(0)|BIOS update", "")):
        facts = parse(replace(BASE, nodes=nodes(text), reservations=resv or MAINT))
        assert [n["maintenance"] for n in facts["nodes"]] == [False, True]
        found = {f.code for f in judge("scheduler", {"gpu001": facts}, {})}
        assert "slurm-node-not-responding" not in found
        assert "nodes-down" not in {f.code for f in check_fleet({"gpu001": facts}, context())}
    # the same silence outside any reservation is the fault
    assert raised(nodes(silent)) == {"slurm-node-not-responding": ["gpu003"]}


def test_a_node_down_after_an_unexpected_reboot_is_not_told_to_reboot():
    # Slurm keeps a node that rebooted unasked DOWN: slurm-node-unexpected-reboot names it
    # (find why), and nodes-down (action: reboot) leaves it out; another DOWN node stays in
    from probes.scheduler import check_fleet
    from tests.probes.probe_outputs import context
    rebooted = ("down|gpu:h100:8|gpu:h100:0(IDX:N/A)|0/0/8/8|2025-01-20T08:31:40|"
                "slurm(64030)|Node unexpectedly rebooted boot_time=1737361900 last_boot_time=1")
    assert raised(nodes(rebooted)) == {"slurm-node-unexpected-reboot": ["gpu003"]}
    facts = parse(replace(BASE, nodes=nodes(rebooted)))
    assert "nodes-down" not in {f.code for f in check_fleet({"gpu001": facts}, context())}
    other = nodes("down|gpu:h100:8|gpu:h100:0(IDX:N/A)|0/0/8/8|2025-01-20T08:31:40|"
                  "root(0)|swapped PSU")
    facts = parse(replace(BASE, nodes=other))
    down = [f for f in check_fleet({"gpu001": facts}, context()) if f.code == "nodes-down"]
    assert [f.hosts for f in down] == [("gpu003",)]
