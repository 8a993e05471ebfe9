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


@pytest.mark.parametrize("name", NAMES)
def test_scenario_reaches_its_conclusion(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = load_scenario(name)
    # --allow-active: a replayed acceptance loads no node (the others have no active step)
    code, doc = run_json(["run", scenario.runbook, "--scenario", name, "--auto",
                          "--allow-active", "--json"], capsys)
    assert doc["status"] == "concluded", doc.get("question")
    assert doc["conclusion"]["id"] == scenario.expect["conclusion"], doc["path"]
    named = {h for f in doc["conclusion"]["evidence"] for h in f["hosts"]}
    assert set(scenario.expect.get("hosts", [])) <= named, doc["conclusion"]["evidence"]
    assert set(doc["hosts"]) == set(scenario.hosts)  # every host accounted for
    assert code in (1, 3)  # an incident is never reported healthy
