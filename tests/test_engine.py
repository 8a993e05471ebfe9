"""The engine walking a small runbook on recorded probe results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assistant.runbook import events as ev
from assistant.runbook.engine import Walk, WalkError
from assistant.runbook.model import Runbook
from assistant.runbook.rehearsal import RecordedProvider
from assistant.runbook.validate import validate_text

HOSTS = ["gpu001", "gpu002", "gpu003"]


@pytest.fixture(scope="module")
def mini() -> Runbook:
    path = Path(__file__).parent / "data" / "mini.yaml"
    runbook, issues = validate_text(path.read_text(), str(path), kb_ids={"xid-codes"})
    assert runbook is not None, issues
    return runbook


def walk(runbook: Runbook, recorded: dict[str, Any] | None = None, **kwargs: Any) -> Walk:
    """A walk of the runbook's own steps (the evidence sweep before them has tests of its own,
    tests/test_sweep_walk.py)."""
    kwargs.setdefault("sweep", False)
    return Walk(runbook, HOSTS, RecordedProvider(recorded or {}), clock=lambda: 0.0, **kwargs)


XID = {"gpu": {"findings": [{"code": "xid-drain", "hosts": ["gpu002"]}]}}


def test_finding_leads_through_action_to_conclusion(mini: Runbook) -> None:
    seen: list[ev.Event] = []
    w = walk(mini, XID, listeners=[seen.append])
    assert w.run() == "concluded"
    assert w.path() == ["check-gpu", "drain", "hardware"]
    # The drain command was never confirmed, so it did not run, and that is recorded.
    assert w.steps[1].action == {"command": mini.node("drain").command, "hosts": ["gpu002"],
                                 "confirmed": False, "result": "not confirmed; not run",
                                 "outcome": "declined", "per_host": {}}
    kinds = [type(e).__name__ for e in seen]
    assert kinds[:2] == ["StepEntered", "ProbeStarted"]
    assert kinds.count("ProbeFinished") == 3
    assert "FindingRaised" in kinds and kinds[-1] == "ConclusionReached"
    conclusion = seen[-1]
    assert isinstance(conclusion, ev.ConclusionReached)
    assert [f.code for f in conclusion.evidence] == ["xid-drain"]


def test_confirmed_action_runs_through_the_runner(mini: Runbook) -> None:
    ran: list[tuple[str, tuple[str, ...]]] = []

    def runner(command: str, hosts: tuple[str, ...]) -> dict[str, dict[str, str]]:
        ran.append((command, hosts))
        return {h: {"state": "done", "detail": ""} for h in hosts}

    w = walk(mini, XID, confirm=lambda node, hosts: True, run_action=runner)
    w.run()
    assert ran == [(mini.node("drain").command, ("gpu002",))]
    action = w.steps[1].action
    assert action["confirmed"] is True and action["outcome"] == "done"
    assert action["per_host"] == {"gpu002": {"state": "done", "detail": ""}}
    assert action["result"] == "gpu002: done"
    assert w.actions() == [{"node": "drain", **action}]


def test_fact_threshold_on_any_host(mini: Runbook) -> None:
    hot = {"gpu": {"facts": {"gpu003": {"temperature_max_c": 91},
                             "gpu001": {"temperature_max_c": 60}}}}
    w = walk(mini, hot)
    w.run()
    assert w.conclusion().id == "too-hot"


def test_missing_fact_is_not_a_pass(mini: Runbook) -> None:
    # No host reported a temperature: the threshold branch must not be taken.
    w = walk(mini, {})
    assert w.run() == "waiting"
    assert w.current == "ask-change"


def test_question_waits_then_answer_continues(mini: Runbook) -> None:
    seen: list[ev.Event] = []
    drift = {"versions": {"findings": [{"code": "version-drift", "hosts": ["gpu001"]}]}}
    w = walk(mini, drift, listeners=[seen.append])
    assert w.run() == "waiting"
    asked = [e for e in seen if isinstance(e, ev.QuestionAsked)]
    assert asked == [ev.QuestionAsked("ask-change", "Did anything change?",
                                      (("yes", "Yes"), ("no", "No")),
                                      ("gpu001", "gpu002", "gpu003"))]
    w.answer("ask-change", "yes")
    assert w.run() == "concluded"
    assert w.path() == ["check-gpu", "ask-change", "check-versions", "drift"]


def test_up_front_answers(mini: Runbook) -> None:
    w = walk(mini, {}, answers={"ask-change": "no"})
    assert w.run() == "concluded"
    assert w.conclusion().id == "nothing"


def test_question_loop_asks_again_instead_of_reusing_the_answer(mini: Runbook) -> None:
    # yes + no drift loops back to the same question: the up-front answer is used only once.
    w = walk(mini, {}, answers={"ask-change": "yes"})
    assert w.run() == "waiting"
    assert w.path() == ["check-gpu", "ask-change", "check-versions"]
    assert w.current == "ask-change"


def test_undo_last_answer(mini: Runbook) -> None:
    seen: list[ev.Event] = []
    w = walk(mini, {}, listeners=[seen.append])
    w.run()
    w.answer("ask-change", "no")
    w.run()
    assert w.conclusion().id == "nothing"
    assert w.undo() is True
    assert w.status == "waiting" and w.current == "ask-change"
    assert w.path() == ["check-gpu"]
    assert isinstance(seen[-2], ev.AnswerUndone) and isinstance(seen[-1], ev.QuestionAsked)
    assert w.undo() is False  # nothing answered any more


def test_bad_answers_are_refused(mini: Runbook) -> None:
    with pytest.raises(WalkError, match="no choice 'maybe'"):
        walk(mini, answers={"ask-change": "maybe"})
    with pytest.raises(WalkError, match="not a question"):
        walk(mini, answers={"check-gpu": "yes"})
    w = walk(mini, XID)
    with pytest.raises(WalkError, match="not waiting"):
        w.answer("ask-change", "yes")


def test_serialize_and_resume_gives_the_same_walk(mini: Runbook) -> None:
    drift = {"versions": {"findings": [{"code": "version-drift", "hosts": ["gpu001"]}]}}
    straight = walk(mini, drift, answers={"ask-change": "yes"})
    straight.run()

    first = walk(mini, drift)
    first.run()
    saved = json.loads(json.dumps(first.to_dict()))  # survives a round trip through JSON
    provider = RecordedProvider(drift)
    resumed = Walk.from_dict(saved, mini, provider, clock=lambda: 0.0)
    assert resumed.run() == "waiting"
    assert provider.calls == []  # finished steps are not run again
    resumed.answer("ask-change", "yes")
    resumed.run()
    assert resumed.to_dict() == straight.to_dict()


def test_same_inputs_same_walk(mini: Runbook) -> None:
    a, b = walk(mini, XID), walk(mini, XID)
    a.run()
    b.run()
    assert a.to_dict() == b.to_dict()


def test_unreachable_hosts_become_a_finding(mini: Runbook) -> None:
    recorded = {"gpu": {"states": {"gpu003": "unreachable"}}}
    w = walk(mini, recorded, answers={"ask-change": "no"})
    w.run()
    codes = {f.code: f for f in w.findings()}
    assert codes["host-unreachable"].hosts == ("gpu003",)


def test_resume_refuses_another_runbooks_state(mini: Runbook) -> None:
    w = walk(mini, XID)
    saved = w.to_dict() | {"runbook": "hang"}
    with pytest.raises(WalkError, match="of runbook 'hang'"):
        Walk.from_dict(saved, mini, RecordedProvider({}))


def test_probe_step_aimed_at_suspects_runs_on_them_alone() -> None:
    # hang: the straggler's host is checked on its own before the fleet-wide checks.
    from assistant.runbook.library import get_runbook

    recorded = {"ranks": {"findings": [{"code": "straggler-rank", "hosts": ["gpu003"]}]}}
    w = Walk(get_runbook("hang"), ["gpu001", "gpu002", "gpu003", "gpu004"],
             RecordedProvider(recorded), clock=lambda: 0.0)
    w.run()
    steps = [s for s in w.steps if s.kind != "sweep"]
    suspect = steps[1]
    assert suspect.node == "check-suspect-host"
    assert {tuple(o.hosts) for o in suspect.outcomes} == {("gpu003",)}
    assert set(steps[2].outcomes[0].hosts) == {"gpu001", "gpu002", "gpu003", "gpu004"}


def test_a_parser_slip_marks_that_host_not_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # A probe whose parser raises something unexpected on one host's output: that host is
    # parse-error, the others are fine, the walk goes on.
    from assistant.fleet.replay import ReplayTransport
    from assistant.fleet.scenario import load_scenario
    from assistant.runbook import provider as provider_module
    from probes.base import Probe

    def fragile(text: str) -> dict[str, Any]:
        return {"value": int(text.split()[1])}  # IndexError/ValueError on odd text

    monkeypatch.setattr(provider_module, "get_probe",
                        lambda name: Probe(name, lambda params: "true", fragile))
    scenario = load_scenario("demo")
    scenario.outputs["fragile"] = {"gpu001": "value 3\n", "gpu002": "garbled\n"}
    fleet = provider_module.FleetProvider(ReplayTransport(scenario, delay_s=0))
    outcome = fleet.run_probe("fragile", ["gpu001", "gpu002"], {}, lambda e: None)
    assert outcome.hosts["gpu001"].state == "ok"
    assert outcome.hosts["gpu001"].facts == {"value": 3}
    assert outcome.hosts["gpu002"].state == "parse-error"
    assert "IndexError" in outcome.hosts["gpu002"].reason
