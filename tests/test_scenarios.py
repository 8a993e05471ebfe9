"""Every simulated incident reaches its expected conclusion with `diag run --scenario --auto`."""

from __future__ import annotations

import json

import pytest

from assistant.cli import main
from assistant.fleet.scenario import load_scenario, scenario_names

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
    """(hosts the conclusion's evidence names, hosts an action of the walk would act on)."""
    named = {h for f in doc["conclusion"]["evidence"] for h in f["hosts"]}
    acted = {h for step in doc["steps"] for h in (step.get("action") or {}).get("hosts", [])}
    return named, acted


@pytest.mark.parametrize("name", NAMES)
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
    for runbook in shipped_ids():
        code, doc = run_json(["run", runbook, "--scenario", name, "--auto", "--json"], capsys)
        assert code != 2, (runbook, doc)
        assert not (doc.get("conclusion") or {}).get("hosts"), (runbook, doc["conclusion"])
