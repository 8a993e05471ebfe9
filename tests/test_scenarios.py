"""Every simulated incident reaches its expected conclusion with `diag run --scenario --auto`."""

from __future__ import annotations

import json

import pytest

from assistant.cli import main
from assistant.fleet.scenario import load_scenario, scenario_names
from probes.catalog import load_catalog

NAMES = scenario_names()


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_there_are_scenarios_for_each_family() -> None:
    families = {load_scenario(n).runbook for n in NAMES}
    assert len(NAMES) >= 10
    assert {"hang", "low-bandwidth", "low-utilization", "checkpoint-stall", "crash"} <= families


def accused(doc: dict) -> tuple[set[str], set[str]]:
    """(hosts the conclusion's evidence names, hosts an action of the walk would act on).
    A host "not measured" is not named: a "No cause found" cites it as its blind spot, not as
    a cause (diag's access failures do name hosts: the scenarios of diag's access expect them)."""
    named = {h for f in doc["conclusion"]["evidence"] if f["code"] != "not-measured"
             for h in f["hosts"]}
    acted = {h for step in doc["steps"] for h in (step.get("action") or {}).get("hosts", [])}
    return named, acted


INCIDENTS = [n for n in NAMES if not load_scenario(n).expect.get("healthy")]
HEALTHY = [n for n in NAMES if load_scenario(n).expect.get("healthy")]


@pytest.mark.parametrize("name", INCIDENTS)
def test_scenario_reaches_its_conclusion(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = load_scenario(name)
    # --allow-active: a replayed acceptance loads no node (the others have no active step)
    code, doc = run_json(["run", scenario.runbook, "--scenario", name, "--auto",
                          "--allow-active", "--json"], capsys)
    assert doc["status"] == "concluded", doc.get("question")
    assert doc["conclusion"]["id"] == scenario.expect["conclusion"], doc["path"]
    named, acted = accused(doc)
    # The walk names the planted hosts and only them, and acts (drains) only on those the
    # scenario says: a fleet-wide cause (diag's access, the subnet manager, a hung filesystem)
    # drains nothing.
    if "only_hosts" in scenario.expect:  # the walk names that node and only that node
        assert named == set(scenario.expect["only_hosts"]), doc["conclusion"]["evidence"]
    else:
        assert named == set(scenario.expect.get("hosts", [])), doc["conclusion"]["evidence"]
    if "drained" in scenario.expect:
        assert acted == set(scenario.expect["drained"]), doc["steps"]
    assert set(doc["hosts"]) == set(scenario.hosts)  # every host accounted for
    # An incident is never reported healthy, unless its scenario says the hosts are (a cause
    # in the job's code or settings, concluded at warning: expect.exit 0; a healthy-but-unusual
    # twin: nothing against any host, nothing to act on).
    if "exit" in scenario.expect:
        assert code == scenario.expect["exit"], (code, doc["findings"])
    elif scenario.expect.get("hosts") == []:
        assert not acted and code == 0, (code, doc["findings"])
    else:
        assert code in (1, 3)
    # every answer the scenario gives is one the walk asks (a drill makes the trainee answer it,
    # from the clue shown with the question)
    assert set(scenario.answers) <= set(doc["path"]), doc["path"]
    assert set(scenario.clues) <= set(scenario.answers)
    if scenario.expect.get("twin_of"):  # a healthy twin: looks alarming, no host is accused
        assert doc["conclusion"]["hosts"] == [], doc["conclusion"]
        assert load_scenario(scenario.expect["twin_of"]).expect["conclusion"] != \
            scenario.expect["conclusion"]


def test_a_third_of_the_drills_need_answers_and_each_answer_has_a_clue() -> None:
    """Issue 16: drills are not all "Enter on the first row". A drill whose walk asks a
    question makes the trainee read the clue and answer it; the clue is what they would find
    on checking, so every question a scenario answers has one."""
    from assistant.tui.drill import drillable

    names = drillable()
    asking = [n for n in names if load_scenario(n).answers]
    assert len(asking) * 3 >= len(names), asking
    for name in asking:
        scenario = load_scenario(name)
        assert set(scenario.clues) == set(scenario.answers), name


TWINS = [n for n in NAMES if load_scenario(n).expect.get("twin_of")]


@pytest.mark.parametrize("name", TWINS)
def test_no_runbook_accuses_a_host_in_a_healthy_twin(name: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A twin's alarming finding (warm GPUs, an XID 13 from new code, old IB counters) must not
    make any runbook blame a host, whichever a trainee or an operator picks. Before, walking a
    runbook other than the scenario's was refused: its answers named foreign questions."""
    from assistant.runbook.library import shipped_ids

    assert len(TWINS) >= 5
    # its own runbook is walked by test_scenario_reaches_its_conclusion, which asserts more
    own = load_scenario(name).runbook
    for runbook in [r for r in shipped_ids() if r != own]:
        code, doc = run_json(["run", runbook, "--scenario", name, "--auto", "--json"], capsys)
        assert code != 2, (runbook, doc)
        assert not (doc.get("conclusion") or {}).get("hosts"), (runbook, doc["conclusion"])


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_twin_accuses_no_host(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    # A fleet that looks alarming and is normal (power at its default cap, a hot GPU at full
    # clocks, heavy traffic with no errors, an idle GPU down-trained to Gen1): the walk ends
    # at its expected conclusion, no evidence finding names a host, no action targets one,
    # and no finding of severity warning or worse names any host at all.
    scenario = load_scenario(name)
    code, doc = run_json(["run", scenario.runbook, "--scenario", name, "--auto", "--json"],
                         capsys)
    assert doc["status"] == "concluded", doc.get("question")
    assert doc["conclusion"]["id"] == scenario.expect["conclusion"], doc["path"]
    # "diag could not look" (not-measured: no nccl-tests result yet) accuses nobody
    blind = set(load_catalog().category("not-evidence"))
    assert [f for f in doc["conclusion"]["evidence"] if f["hosts"] and f["code"] not in blind] \
        == []
    accusing = [f for f in doc["findings"] if f["code"] not in blind
                and f["severity"] in ("warning", "error", "critical") and f["hosts"]]
    assert accusing == [], accusing
    assert code == 0 and set(doc["hosts"]) == set(scenario.hosts)


def test_every_fault_family_of_issue_11_has_a_healthy_twin() -> None:
    # the twins named by their fault scenario's "twin:" key exist and are healthy
    for name in INCIDENTS:
        twin = load_scenario(name).expect.get("twin")
        if twin:
            assert twin in HEALTHY, f"{name}: twin {twin} is not a healthy scenario"
