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


INCIDENTS = [n for n in NAMES if not load_scenario(n).expect.get("healthy")]
TWINS = [n for n in NAMES if load_scenario(n).expect.get("healthy")]


@pytest.mark.parametrize("name", INCIDENTS)
def test_scenario_reaches_its_conclusion(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = load_scenario(name)
    # --allow-active: a replayed acceptance loads no node (the others have no active step)
    code, doc = run_json(["run", scenario.runbook, "--scenario", name, "--auto",
                          "--allow-active", "--json"], capsys)
    assert doc["status"] == "concluded", doc.get("question")
    assert doc["conclusion"]["id"] == scenario.expect["conclusion"], doc["path"]
    named = {h for f in doc["conclusion"]["evidence"] for h in f["hosts"]}
    assert set(scenario.expect.get("hosts", [])) <= named, doc["conclusion"]["evidence"]
    if "only_hosts" in scenario.expect:  # the walk names that node and only that node
        assert named == set(scenario.expect["only_hosts"]), doc["conclusion"]["evidence"]
    assert set(doc["hosts"]) == set(scenario.hosts)  # every host accounted for
    assert code in (1, 3)  # an incident is never reported healthy


@pytest.mark.parametrize("name", TWINS)
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
            assert twin in TWINS, f"{name}: twin {twin} is not a healthy scenario"
