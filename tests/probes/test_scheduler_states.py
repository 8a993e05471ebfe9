"""Every node state spelling Slurm 20.11-24.11 prints, as the scheduler probe reads it, and what
each means for diag's verdicts (probes/parsers/sinfo.py node_state, probes/scheduler.py).

The spellings are Slurm's own (src/common/slurm_protocol_defs.c): node_state_string (sinfo
%T / StateLong, lowercased), node_state_string_compact (%t / StateCompact, the default table)
and node_state_string_complete (StateComplete: the base state and a "+FLAG" per flag, named
as in node_state_flags[]: MAINTENANCE, INVALID_REG, REBOOT_REQUESTED, REBOOT_ISSUED ...).
"""

from __future__ import annotations

import pytest

from probes.faults.apply import judge
from probes.faults.catalogue import load_faults
from probes.parsers.sinfo import node_state
from probes.scheduler import check_fleet, command, parse
from tests.probes.probe_outputs import SectionSpec, baseline, context, real, replace

BASE = baseline("scheduler")
FAMILY = {s.id for s in load_faults().signatures.values() if s.family == "scheduler"}
HEADER = "NODELIST|PARTITION|STATECOMPLETE|GRES|GRES_USED|CPUS(A/I/O/T)|TIMESTAMP|USER|REASON|"
BUSY = "gpu001|gpu*|mixed|gpu:h100:8|gpu:h100:8(IDX:0-7)|1/7/0/8|Unknown|Unknown|none|"


def nodes(state: str, reason: str = "none", user: str = "Unknown",
          when: str = "Unknown") -> str:
    return (f"{HEADER}\n{BUSY}\n"
            f"gpu003|gpu*|{state}|gpu:h100:8|gpu:h100:0(IDX:N/A)|0/0/8/8|{when}|{user}|"
            f"{reason}|\n")


def verdicts(nodes_text: str, **sections: SectionSpec) -> dict[str, list[str]]:
    """Finding code -> hosts, of the catalogue and the probe's own checks, error and worse."""
    facts = parse(replace(BASE, nodes=nodes_text, **sections))
    found = judge("scheduler", {"gpu001": facts}, {}) + check_fleet({"gpu001": facts},
                                                                      context())
    out: dict[str, list[str]] = {}
    for f in found:
        if f.severity in ("error", "critical"):
            out.setdefault(f.code, []).extend(f.hosts)
    return {code: sorted(set(hosts)) for code, hosts in out.items()}


# --- every spelling is a state, not a parse error -------------------------------------------

LONG = ["idle~", "idle#", "idle!", "idle%", "idle$", "idle@", "idle^", "idle*", "mixed-",
        "allocated+", "planned", "blocked", "resume", "future", "future~", "inval", "reboot",
        "reboot^", "reboot*", "reboot_issued", "cancel_reboot", "external", "power_down",
        "power_up", "powering_down", "powered_down", "powering_up", "undrain",
        "dynamic_future", "dynamic_norm", "maint", "maint*", "drained$", "draining@",
        "down~", "fail*", "failing", "unknown*", "reserved", "completing"]
COMPACT = ["mix-", "alloc+", "plnd", "block", "resm", "futr", "futr#", "boot", "boot^",
           "boot*", "canc_r", "ext", "pow_dn", "pow_up", "powring_dn", "powered_dn", "drng$",
           "drain^", "failg*", "unk", "resv", "comp%"]
COMPLETE = ["idle+cloud+powered_down", "idle+planned", "idle+invalid_reg",
            "idle+drain+invalid_reg", "idle+reboot_requested", "down+reboot_issued",
            "idle+blocked", "idle+maintenance", "down+maintenance", "future+cloud+powered_down",
            "idle+dynamic_future", "idle+external", "mixed+completing", "error",
            "down+drain+not_responding", "idle+resume"]


@pytest.mark.parametrize("raw", LONG + COMPACT + COMPLETE)
def test_every_slurm_state_spelling_is_read(raw: str) -> None:
    # one unknown spelling made the whole sinfo reading a parse error (all nodes unread)
    facts = parse(replace(BASE, nodes=nodes(raw)))
    assert facts["nodes_total"] == 2
    assert node_state(raw)["known_state"]


@pytest.mark.parametrize(("raw", "usable"), [
    ("idle+invalid_reg", False), ("idle+maintenance", False), ("idle+blocked", False),
    # a reboot requested without ASAP: still scheduled, weighted last (cons_tres job_test.c)
    ("idle+reboot_requested", True), ("mixed@", True), ("mixed+drain+reboot_requested", False),
    ("idle+cloud+powered_down", True), ("mixed-", True),
    ("alloc+", True), ("futr", False), ("idle+external", False),
])
def test_which_states_take_new_jobs(raw: str, usable: bool) -> None:
    assert node_state(raw)["usable"] is usable


# --- planned work is not a fault ---------------------------------------------------------------

@pytest.mark.parametrize(("state", "reason"), [
    # `scontrol reboot gpu003` on an idle node: controller.c sets DOWN+REBOOT_ISSUED,
    # reason "reboot issued" (appended to an earlier one with " : ")
    ("down+reboot_issued", "reboot issued"),
    ("down+reboot_issued", "Reboot ASAP : reboot issued"),
    ("down+drain+reboot_issued", "Reboot ASAP : reboot issued"),
    # the same in %T / %t spelling
    ("reboot^", "reboot issued"), ("boot^", "reboot issued"),
    # Slurm 20.11 shows no REBOOT_ISSUED: a node booting on `scontrol reboot` is 'reboot*'
    # (mej/nhc PR 84: "State=REBOOT*+DRAIN" while booting, 20.11.7); the reason says it was sent
    ("reboot*", "reboot requested : reboot issued"), ("reboot*", "Reboot ASAP : reboot issued"),
    # `scontrol reboot ASAP` under a running job: drained until the job ends, resumed by
    # Slurm after the reboot (proc_req.c: next state RESUME, UNDRAIN)
    ("mixed+drain+reboot_requested", "Reboot ASAP"),
    ("draining@", "Reboot ASAP"),
])
def test_a_reboot_an_admin_asked_for_is_planned(state: str, reason: str) -> None:
    assert verdicts(nodes(state, reason, "root(0)", "2025-01-20T08:31:40")) == {}


def test_recorded_reboots_on_slurm_22_05_are_planned():
    # recorded on Slurm 22.05.8 (fixtures/real/SOURCES.md): `scontrol reboot ASAP gpu002` under
    # a job (draining@, allocated+drain+reboot_requested) and `scontrol reboot gpu003`
    # (reboot^, down+reboot_issued, "reboot requested : reboot issued")
    text = real("sinfo__4-node-h100-reboot-asap-draining-and-reboot-issued-slurm22.05")
    assert verdicts(text) == {}
    facts = parse(replace(BASE, nodes=text))
    assert (facts["nodes_down"], facts["nodes_drained"], facts["nodes_usable"]) == (0, 1, 2)


def test_a_reboot_requested_but_not_sent_to_a_silent_node_is_still_silent():
    # REBOOT* without "reboot issued": slurmd stopped answering before any reboot was sent
    found = verdicts(nodes("reboot*", "reboot requested", "root(0)", "2025-01-20T08:31:40"))
    assert found.get("slurm-node-not-responding") == ["gpu003"]


def test_left_down_after_a_reboot_on_purpose_is_planned():
    # `scontrol reboot nextstate=DOWN` (mej/nhc PR 115: NHC resumes the node once healthy):
    # node_mgr.c leaves it DOWN with "... : reboot complete"; silent again, it is a fault
    done = "reboot requested : reboot issued : reboot complete"
    assert verdicts(nodes("down", done, "slurm(64030)", "2025-01-20T08:35:02")) == {}
    found = verdicts(nodes("down+not_responding", done, "slurm(64030)", "2025-01-20T08:35:02"))
    assert found == {"nodes-down": ["gpu003"], "slurm-node-not-responding": ["gpu003"]}


def test_a_reboot_that_never_came_back_is_down():
    # node_mgr.c: not back within ResumeTimeout -> DOWN "reboot timed out", flags cleared
    found = verdicts(nodes("down", "Reboot ASAP : reboot issued : reboot timed out",
                           "slurm(64030)", "2025-01-20T08:41:40"))
    assert found.get("nodes-down") == ["gpu003"]


def test_a_drain_older_than_the_reboot_request_stays():
    # the node was drained (Kill task failed) before `scontrol reboot`: Slurm keeps the drain
    found = verdicts(nodes("idle+drain+reboot_requested", "Kill task failed",
                           "slurm(64030)", "2025-01-20T08:31:40"))
    assert found == {"nodes-drained": ["gpu003"], "slurm-kill-task-failed": ["gpu003"]}


def test_statecomplete_spells_the_maint_flag_maintenance():
    # node_state_flags[]: NODE_STATE_MAINT is "+MAINTENANCE" in StateComplete (never "+maint");
    # a node DOWN or silent in a maintenance reservation is planned work even when the
    # reservations could not be read
    failed = ("scontrol: error: Socket timed out on send/recv operation", 1)
    for state in ("down+maintenance", "down+maintenance+not_responding"):
        text = nodes(state, "BIOS update", "root(0)", "2025-01-20T08:02:11")
        assert verdicts(text, reservations=failed) == {}, state
    assert node_state("idle+maintenance")["maintenance"]


# --- Slurm's own reasons for a missing GPU, in every wording -----------------------------------

@pytest.mark.parametrize(("reason", "signature"), [
    ("gres/gpu count reported lower than configured (7 < 8)", "slurm-gpu-missing"),
    ("gres/gpu count too low (7 < 8)", "slurm-gpu-missing"),
    ("gres/gpu:h100 count too low (6 < 8)", "slurm-gpu-missing"),
    ("gres/gpu count reported lower than configured (0 < 8)", "slurm-gpus-not-detected"),
    ("gres/gpu count too low (0 < 8)", "slurm-gpus-not-detected"),
    ("gres/gpu:h100 count too low (0 < 8)", "slurm-gpus-not-detected"),
])
def test_gres_count_reasons(reason: str, signature: str) -> None:
    # src/interfaces/gres.c (20.11-24.11) words it three ways
    facts = parse(replace(BASE, nodes=nodes("idle+drain+invalid_reg", reason, "slurm(64030)",
                                            "2025-01-20T08:31:40")))
    found = {f.code: list(f.hosts) for f in judge("scheduler", {"gpu001": facts}, {})
             if f.code in FAMILY}
    assert found == {signature: ["gpu003"]}
    hardware = [f for f in check_fleet({"gpu001": facts}, context())
                if f.code == "drained-for-hardware"]
    # no GPU seen at all is the driver or gres.conf, not a part to replace
    assert bool(hardware) is (signature == "slurm-gpu-missing")


# --- Slurm 20.11: no StateComplete -------------------------------------------------------------

def test_slurm_20_11_sinfo_without_statecomplete_is_read():
    # 20.11's sinfo -O knows no StateComplete (src/sinfo/opts.c, added in 21.08): it prints
    # "Invalid job format specification" on stderr, an empty unnamed column, and exits 0. The
    # probe asks StateLong too, so the node's state is still read.
    assert "StateLong:|,StateComplete:|" in command({})
    text = ("sinfo: error: Invalid job format specification: StateComplete\n"
            "NODELIST|PARTITION|STATE||GRES|GRES_USED|CPUS(A/I/O/T)|TIMESTAMP|USER|REASON|\n"
            "gpu001|gpu*|mixed||gpu:8|gpu:8(IDX:0-7)|1/7/0/8|Unknown|Unknown|none|\n"
            "gpu003|gpu*|down*||gpu:8|gpu:0(IDX:N/A)|0/0/8/8|2025-01-20T08:31:40|"
            "slurm(64030)|Not responding|\n")
    facts = parse(replace(BASE, nodes=text))
    assert [(n["node"], n["state"]) for n in facts["nodes"]] == [
        ("gpu001", "mixed"), ("gpu003", "down*")]
    assert verdicts(text) == {"slurm-node-not-responding": ["gpu003"],
                              "nodes-down": ["gpu003"]}
    # on 22.05+ both columns are there and StateComplete (every flag) is the one read
    both = ("NODELIST|PARTITION|STATE|STATECOMPLETE|GRES|GRES_USED|CPUS(A/I/O/T)|TIMESTAMP|"
            "USER|REASON|\n"
            "gpu001|gpu*|mixed|mixed|gpu:8|gpu:8(IDX:0-7)|1/7/0/8|Unknown|Unknown|none|\n"
            "gpu003|gpu*|down|down+reboot_issued|gpu:8|gpu:0(IDX:N/A)|0/0/8/8|"
            "2025-01-20T08:31:40|root(0)|reboot issued|\n")
    facts = parse(replace(BASE, nodes=both))
    assert facts["nodes"][1]["state"] == "down+reboot_issued"
    assert verdicts(both) == {}


# --- Slurm's own time-outs: diag's side, never the node's, never healthy -----------------------

@pytest.mark.parametrize("message", [
    "slurm_load_node error: Socket timed out on send/recv operation",
    "slurm_load_partitions: Unable to contact slurm controller (connect failure)",
])
def test_slurm_not_answering_is_not_measured(message: str) -> None:
    facts = parse(replace(BASE, nodes=(f"sinfo: error: {message}", 1)))
    found = check_fleet({"gpu001": facts}, context())
    assert [f.code for f in found if f.code != "not-measured"] == []
    assert any(f.code == "not-measured" and "Slurm's node states" in f.message for f in found)
    assert [f.code for f in judge("scheduler", {"gpu001": facts}, {}) if f.code in FAMILY] == []


def _run_with_fake_slurm(tmp_path, sinfo: str) -> tuple[str, str]:
    """The probe's real script against fake Slurm clients: *sinfo* is the fake sinfo's body;
    squeue and scontrol record that they were called."""
    import os
    import subprocess

    calls = tmp_path / "calls"
    for name, body in (("sinfo", sinfo), ("squeue", f'echo squeue >> {calls}; exit 1'),
                       ("scontrol", f'echo scontrol >> {calls}; exit 1')):
        tool = tmp_path / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(["sh", "-c", command({})], capture_output=True, text=True, env=env,
                         timeout=60).stdout
    return out, calls.read_text() if calls.exists() else ""


def test_a_controller_that_does_not_answer_costs_one_call(tmp_path):
    # sinfo failing after MessageTimeout with Slurm's own words (slurm_errno.c) - often just
    # inside diag's limit - skips squeue and scontrol, as a timeout does: a silent slurmctld
    # must not spend the probe's whole time limit (which would read as the probe hanging)
    out, calls = _run_with_fake_slurm(tmp_path, (
        'case "$1" in --version) echo "slurm 23.11.10";; *) echo "slurm_load_node error: '
        'Socket timed out on send/recv operation" >&2; exit 1;; esac'))
    assert calls == ""
    facts = parse(out)
    assert set(facts["errors"]) == {"nodes", "pending", "reservations"}
    assert "Socket timed out" in facts["errors"]["nodes"]
    found = check_fleet({"gpu001": facts}, context())
    assert {f.code for f in found} == {"not-measured"}


def test_a_healthy_reading_still_runs_every_call(tmp_path):
    # a node's reason may say "timed out" ("reboot timed out"): only a failed call counts
    table = ("NODELIST|PARTITION|STATE|STATECOMPLETE|GRES|GRES_USED|CPUS(A/I/O/T)|TIMESTAMP|"
             "USER|REASON|\\n"
             "gpu001|gpu*|down|down|gpu:8|gpu:0(IDX:N/A)|0/0/8/8|2025-01-20T08:41:40|"
             "slurm(64030)|Reboot ASAP : reboot issued : reboot timed out|\\n")
    out, calls = _run_with_fake_slurm(tmp_path, (
        f'case "$1" in --version) echo "slurm 23.11.10";; *) printf "{table}";; esac'))
    assert calls.split() == ["squeue", "scontrol"]
    assert parse(out)["nodes"][0]["reason"].endswith("reboot timed out")
