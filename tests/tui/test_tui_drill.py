"""Drills: the symptom only, a walk on the replay fleet, the score and the store row."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from assistant.fleet.scenario import load_scenario
from assistant.runbook.library import get_runbook
from assistant.store import Store
from assistant.store.drills import DrillScore
from assistant.tui import messages as m
from assistant.tui.app import DiagApp
from assistant.tui.drill import (
    Drill,
    drill_context,
    expert_path,
    grade,
    pick_scenario,
    shortest_path,
)
from assistant.tui.screens.drill import DrillScreen
from assistant.tui.screens.drill_score import DrillScoreScreen
from tests.tui.tui_support import Messages, make_app, screen_lines, screen_text, wait_for

T0 = 1_780_000_000.0  # a fixed instant: 2026-05-28


class Clock:
    """Each call moves 30 s on: a drill "takes" 30 s per clock reading."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        value = self.now
        self.now += 30.0
        return value


def drill_app(scenario: str, tmp_path: Path) -> DiagApp:
    ctx = drill_context(scenario, trainee="trainee", clock=Clock(), export_dir=tmp_path)
    assert ctx.target is not None
    ctx.target.transport.delay_s = 0.0  # type: ignore[attr-defined]
    return DiagApp(ctx, still=True)


def stored() -> list[tuple[Any, ...]]:
    return Store().read(lambda con: con.execute(
        "SELECT trainee, scenario, runbook, conclusion, correct, steps, shortest, hints, "
        "seconds FROM drills ORDER BY finished").fetchall())


async def walk_drill(app: DiagApp, seen: Messages, runbook: str, hints: int = 0) -> Any:
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DrillScreen), what="drill screen")
        scenario = app.ctx.drill.scenario  # type: ignore[union-attr]
        shown = screen_text(app)
        assert scenario.symptom.split()[0] in shown
        assert scenario.title not in shown and str(scenario.expect["conclusion"]) not in shown
        results = app.screen.query_one("#drill-results")
        # the matcher's ranking is hidden until a hint: every runbook, in alphabetical order
        ids = [r.id for r in results.results]  # type: ignore[attr-defined]
        assert ids == sorted(ids) and len(ids) >= 6, ids
        for _ in range(hints):
            await pilot.press("i")
        if hints:
            await wait_for(pilot, lambda: [r.id for r in results.results] != ids,  # type: ignore[attr-defined]
                           what="the ranking, revealed by the hint")
            assert results.results[0].score > 0  # type: ignore[attr-defined]
        results.post_message(m.RunbookChosen(runbook))
        await wait_for(pilot, lambda: isinstance(app.screen, DrillScoreScreen),
                       what="score screen")
        await pilot.pause()
        app.screen.shown = screen_lines(app)  # type: ignore[attr-defined]
        return app.screen


async def test_drill_right_runbook_scores_correct(tmp_path: Path) -> None:
    seen = Messages()
    score_screen = await walk_drill(drill_app("checkpoint-stall-slow-lustre", tmp_path), seen,
                                    "checkpoint-stall")
    score = seen.of(m.DrillScored)[-1].score
    assert score.correct and score.conclusion == "storage-slow"
    assert score.steps == score.shortest == 2 and score.hints == 0
    assert stored() == [("trainee", "checkpoint-stall-slow-lustre", "checkpoint-stall",
                         "storage-slow", True, 2, 2, 0, 30.0)]
    assert len(score_screen.past) == 1
    total, parts = grade(score)
    assert total == 50 + 20 + 15 + 15 and [p.name for p in parts] == [
        "conclusion", "path", "hints", "time"]
    shown = "\n".join(score_screen.shown)
    assert "Score 100/100" in shown and "The right pick" not in shown
    for part in parts:  # each part and what it means
        assert f"{part.points:>2}/{part.out_of}" in shown and part.meaning in shown


async def test_drill_wrong_runbook_and_hints(tmp_path: Path) -> None:
    seen = Messages()
    screen = await walk_drill(drill_app("crash-xid48-dbe", tmp_path), seen, "low-bandwidth",
                              hints=1)
    score = seen.of(m.DrillScored)[-1].score
    # a wrong pick scores 0 overall and reveals the right runbook, conclusion and why
    lines = screen.shown
    assert "Score 0/100" in lines[1] and "Not the expected conclusion" in lines[1]
    shown = " ".join(" ".join(lines).split())
    assert "The right pick: you walked 'low-bandwidth'; the 'crash' runbook leads to" in shown
    assert "(gpu-hardware-fault)" in shown and "What happened:" in shown
    assert "cannot reach the expected conclusion" in shown and "1 taken" in shown
    assert not score.correct and score.conclusion == "job-spans-leaves"
    assert score.shortest is None  # gpu-hardware-fault is not in the low-bandwidth runbook
    assert seen.of(m.HintShown)[0].text.count("'crash'") == 1
    assert stored() == [("trainee", "crash-xid48-dbe", "low-bandwidth", "job-spans-leaves",
                         False, 5, None, 1, 30.0)]


def test_pick_and_shortest_path() -> None:
    assert pick_scenario("demo", set()) == "demo"
    picked = pick_scenario(None, {"demo"}, names=["_baseline", "demo", "hang-ib-port-down"])
    assert picked == "hang-ib-port-down"
    assert shortest_path(get_runbook("checkpoint-stall"), "storage-slow") == [
        "check-ckpt-storage", "storage-slow"]
    assert shortest_path(get_runbook("low-bandwidth"), "storage-slow") is None
    expert = expert_path(load_scenario("hang-ib-port-down"))
    assert expert[-1][0] == "ib-link-fault" and all(explain for _, _, explain in expert)


def test_drill_score_snapshot(snap_compare: Any) -> None:
    """The score screen at 80x24 with a frozen clock and fixed past scores."""
    scenario = load_scenario("hang-ib-port-down")
    drill = Drill(scenario, "trainee", clock=lambda: T0)
    score = DrillScore("trainee", scenario.name, "hang", "ib-link-fault", "ib-link-fault",
                       True, 5, 4, 1, 192.0, finished=datetime(2026, 5, 28, 9, 0), id="d1")
    past = [{"finished": datetime(2026, 5, 28, 9, 0), "scenario": scenario.name,
             "correct": True, "steps": 5, "shortest": 4, "hints": 1, "seconds": 192.0},
            {"finished": datetime(2026, 5, 27, 16, 30), "scenario": "crash-xid48-dbe",
             "correct": False, "steps": 5, "shortest": None, "hints": 0, "seconds": 301.0}]

    async def show(pilot: Any) -> None:
        await pilot.app.push_screen(DrillScoreScreen(drill, score, past))
        await pilot.pause()

    assert snap_compare(make_app("demo"), terminal_size=(80, 24), run_before=show)


async def test_drill_key_from_home() -> None:
    app = make_app("demo")
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.query_one("#results").focus()
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, DrillScreen), what="drill screen")
        drill = app.screen.drill  # type: ignore[attr-defined]
        assert drill.scenario.name != "_baseline" and drill.expected
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, DrillScreen), what="home")


def test_grade_parts() -> None:
    """Path points follow shortest/steps, each hint costs 5, time is full within 5 minutes and
    nothing after 20; a wrong conclusion is 0 overall."""
    def score(**kw: Any) -> DrillScore:
        base = {"correct": True, "steps": 4, "shortest": 4, "hints": 0, "seconds": 60.0}
        base.update(kw)
        return DrillScore("t", "s", "hang", "c", "c", base["correct"], base["steps"],
                          base["shortest"], base["hints"], base["seconds"])

    assert grade(score())[0] == 100
    assert {p.name: p.points for p in grade(score(steps=8, hints=1, seconds=750))[1]} == {
        "conclusion": 50, "path": 10, "hints": 10, "time": 8}
    assert grade(score(hints=5, seconds=5000))[0] == 70
    assert grade(score(correct=False))[0] == 0


async def test_a_drill_question_shows_its_clue(tmp_path: Path) -> None:
    """The trainee answers from what they would find on checking: the scenario's clue."""
    app = drill_app("crash-xid13-new-kernel", tmp_path)
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DrillScreen), what="drill screen")
        app.screen.query_one("#drill-results").post_message(m.RunbookChosen("crash"))
        await wait_for(pilot, lambda: seen.of(m.QuestionAsked), what="the question")
        await pilot.pause()
        await pilot.pause()
        shown = " ".join(screen_text(app).split())
        assert "On checking you find:" in shown and "fused-attention" in shown
        assert seen.of(m.QuestionAsked)[0].event.node == "ask-xid-follows-node"
