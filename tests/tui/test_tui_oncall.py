"""The on-call flow end to end in the TUI (issue: what diag says it did is what it did):
actions run through the CLI's runner and each host's result is shown; conclusions and
questions name their hosts; walks are easy to get back to (recent incidents refresh, an
incident shows its walks, a stopped walk resumes, leaving one asks first); keys work where the
footer says; a demo stays out of the real history."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from assistant.store.history import history
from assistant.tui import messages as m
from assistant.tui.app import DiagApp
from assistant.tui.context import DiagContext, FleetOptions
from assistant.tui.screens.confirm import ConfirmationModal
from assistant.tui.screens.drill import DrillScreen
from assistant.tui.screens.help import HelpScreen
from assistant.tui.screens.history import HistoryScreen
from assistant.tui.screens.home import HomeScreen
from assistant.tui.screens.incident import IncidentScreen
from assistant.tui.screens.walk import WalkScreen
from assistant.tui.widgets.step_panel import StepPanel
from assistant.walks import load_saved
from tests.tui.tui_support import (
    Messages,
    make_app,
    ranked,
    screen_text,
    status,
    wait_for,
    write_scenario,
)


def recording_app(scenario: str | Path, *, demo: bool = False, **kwargs: Any) -> DiagApp:
    """An app that records its walks in the test's store and reads recent incidents from it,
    as `diag` does (the session id is the store's)."""
    ctx = DiagContext(FleetOptions(scenario=str(scenario)), demo=demo,
                      export_dir=Path(tempfile.mkdtemp(prefix="diag-tui-test-")), **kwargs)
    return DiagApp(ctx, still=True)


def footer_keys(app: DiagApp) -> str:
    return str(screen_text(app).splitlines()[-1])


# --- 1 and 2: actions, accused hosts, question hosts -----------------------------------------

async def test_a_confirmed_action_in_a_replay_is_simulated_and_the_conclusion_says_so() -> None:
    app = make_app("demo")
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        assert "simulated, nothing runs anywhere" in app.screen.body.plain
        await pilot.press("y")
        await status(pilot, "concluded")
        decided = seen.of(m.ActionDecided)[0].event
        assert (decided.outcome, decided.per_host) == (
            "simulated", (("gpu013", "simulated", "replayed incident: nothing ran"),))
        text = screen_text(app)
        # Before: "Keep the host drained" with nothing drained and nothing said.
        assert "Conclusion: IB link down or flapping — gpu013 (1)" in text
        assert "NOT done: drain-ib-node on gpu013 (1) (simulated" in text
        # the accused host's evidence is above the fold at 80x24
        assert "ib-link-flapping gpu013: link going down" in text
        # and the walk tab keeps each host's result
        await pilot.press("w")
        await pilot.pause()
        assert "gpu013 simulated: replayed incident" in screen_text(app)
        # what does not fit 80x24 is reachable from the keyboard: Tab from the tree focuses
        # the step panel, End scrolls it to its last line
        await pilot.press("tab")
        panel = app.screen.query_one(StepPanel)
        assert app.focused is panel
        await pilot.press("end")
        await pilot.pause()
        assert panel.scroll_y == panel.max_scroll_y


async def test_a_declined_action_is_not_done_in_the_conclusion() -> None:
    app = make_app("demo")
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        await pilot.press("n")
        await status(pilot, "concluded")
        assert "NOT done: drain-ib-node on gpu013 (1) (not confirmed)" in screen_text(app)


async def test_a_question_lists_the_hosts_it_asks_about(tmp_path: Path) -> None:
    app = make_app(write_scenario(tmp_path / "healthy", hosts="gpu[001-004]"))
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await status(pilot, "waiting")
        # the status changes before the question is painted: wait for the paint, not a pause
        await wait_for(pilot, lambda: "asked of all hosts: gpu[001-004] (4)" in screen_text(app),
                       what="the question's host line on screen")


# --- 3: walks are easy to get back to ---------------------------------------------------------

async def test_recent_incidents_refresh_and_a_stopped_walk_resumes(tmp_path: Path) -> None:
    healthy = write_scenario(tmp_path / "healthy", hosts="gpu[001-004]")
    app = recording_app(healthy)
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        assert not app.screen.query_one("#recent-list").display  # nothing recorded yet
        app.post_message(m.RunbookChosen("hang", "training hangs"))
        await status(pilot, "waiting")
        walk_screen = app.screen
        session = walk_screen.session
        await pilot.press("escape")  # leaving a walk that waits asks first
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        assert f"diag --resume {session}" in app.screen.body.plain
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen))
        recent = app.screen.query_one("#recent-list")
        await wait_for(pilot, lambda: recent.display and recent.option_count == 1,
                       what="the walk just left, in recent incidents")
        recent.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, IncidentScreen))
        await wait_for(pilot, lambda: "Path" in screen_text(app), what="the incident's walks")
        text = screen_text(app)
        assert "check-ranks → check-gpu → check-network" in text
        assert "Stopped at  ask-phase" in text
        await pilot.press("enter")  # resume it, here
        await wait_for(pilot, lambda: isinstance(app.screen, WalkScreen)
                       and app.screen is not walk_screen)
        resumed = app.screen
        assert resumed.session == session
        await status(pilot, "waiting")
        assert resumed.driver.walk.current == "ask-phase"
        assert resumed.driver.walk.path()[:2] == ["check-ranks", "check-gpu"]
        await pilot.press("2")  # ran for a while, then stopped
        await wait_for(pilot, lambda: resumed.driver.walk.current == "ask-change")
        await status(pilot, "waiting")
        await pilot.press("3")  # nothing changed
        await status(pilot, "concluded")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, IncidentScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen))
        await wait_for(pilot, lambda: "nothing-found" in screen_text(app),
                       what="the concluded walk in recent incidents")


async def test_diag_resume_opens_the_walk_in_the_tui(tmp_path: Path) -> None:
    from assistant.cli import main
    from assistant.store import Store

    healthy = write_scenario(tmp_path / "healthy", hosts="gpu[001-004]")
    assert main(["run", "hang", "--scenario", str(healthy), "--auto"]) == 4
    session = Store().read(lambda con: con.execute("SELECT id FROM sessions").fetchone())[0]
    saved, state = load_saved(Store(), session)
    options = FleetOptions().resumed(saved["target"])  # what `diag --resume` builds
    app = DiagApp(DiagContext(options), still=True, resume=(saved, state))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, WalkScreen))
        await status(pilot, "waiting")
        assert app.screen.session == session
        assert app.screen.driver.walk.current == "ask-phase"
        assert "Init or mid-training?" in screen_text(app)


# --- 4: keys that work where the footer says ---------------------------------------------------

async def test_keys_on_home_work_where_the_footer_says() -> None:
    app = make_app("demo", demo=True)
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        symptom = app.ctx.demo_symptom()
        await ranked(pilot, seen, symptom)
        box = app.screen.query_one("#symptom")
        assert app.focused is box and box.selected_text == symptom  # typing replaces it
        # the screen's last line is the footer once the ranking's relayout is painted (under
        # load, a read right after the ranking saw the line above it)
        await wait_for(pilot, lambda: "F1" in footer_keys(app), what="F1 in the footer")
        assert "? " not in footer_keys(app)  # no key the box would swallow
        await pilot.press("end", "question_mark")  # a '?' is part of a symptom
        assert box.value == symptom + "?" and isinstance(app.screen, HomeScreen)
        await pilot.press("f1")  # help while typing
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "down")  # focus leaves the box: the keys work
        assert app.focused is app.screen.query_one("#results")
        for key, kind in (("question_mark", HelpScreen), ("h", HistoryScreen),
                          ("D", DrillScreen)):
            await pilot.press(key)
            await wait_for(pilot, lambda kind=kind: isinstance(app.screen, kind))
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen))


async def test_one_enter_walks_the_top_match() -> None:
    app = make_app("demo", demo=True)
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await pilot.press("enter")  # at once, even before the ranking arrives
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal),
                       what="the walk of the top match, up to its drain")
        assert seen.of(m.RunbookChosen)[0].runbook_id == "hang"
        await pilot.press("n")
        await status(pilot, "concluded")


# --- 5: a demo stays out of the real history ---------------------------------------------------

async def test_a_demo_walk_is_recorded_simulated_and_not_in_history() -> None:
    from assistant.store import Store

    app = recording_app("demo", demo=True)
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(m.RunbookChosen("hang", app.ctx.demo_symptom()))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        await pilot.press("y")
        await status(pilot, "concluded")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen))
        # the demo lists its own walk, marked simulated ...
        await wait_for(pilot, lambda: "sim " in screen_text(app), what="the demo's walk")
    # ... and the operator's history does not
    result = Store().read(lambda con: history(con))
    assert result["counts"]["incidents"] == 0
    assert Store().read(lambda con: history(con, include_simulated=True))["counts"][
        "incidents"] == 1


# --- 9: drill-down that fits 80x24 ---------------------------------------------------------------

def longest_words(texts: list[tuple[str, str]], width: int) -> list[tuple[str, str]]:
    """(where, word) for each word of *texts* longer than *width*: the terminal would have to
    break it mid-word (Rich wraps at spaces and folds only a word longer than the line)."""
    return [(where, word) for where, text in texts for word in text.split() if len(word) > width]


async def test_questions_and_fixes_fit_80x24_without_breaking_a_word(tmp_path: Path) -> None:
    """Each question's text (with its commands) fits the step panel, each fix the conclusion
    tab, at 80x24, without a word broken across lines. Widths are measured on the screen.
    Before: oom's question named `--query-compute-apps=pid,process_name,used_memory` (49
    columns) in a 42-column panel."""
    from assistant.runbook.library import all_runbooks

    app = make_app(write_scenario(tmp_path / "healthy", hosts="gpu[001-004]"))
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await status(pilot, "waiting")
        panel = app.screen.query_one(StepPanel)
        explain = app.screen.query_one("#step-explain")
        # the narrowest the text gets: with the panel's scrollbar shown
        step_width = explain.content_region.width - (
            0 if panel.show_vertical_scrollbar else panel.styles.scrollbar_size_vertical)
    app = make_app("demo")
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        await pilot.press("n")
        await status(pilot, "concluded")
        view = app.screen.query_one("#conclusion")
        fix_width = view.content_region.width - (
            0 if view.show_vertical_scrollbar else view.styles.scrollbar_size_vertical)
    assert 38 <= step_width < fix_width, (step_width, fix_width)
    books = all_runbooks()
    questions = [(f"{b.id}:{n.id}", n.text) for b in books for n in b.nodes.values()
                 if n.kind in ("question", "action")]
    fixes = [(f"{b.id}:{n.id}", n.fix) for b in books for n in b.nodes.values()
             if n.kind == "conclusion"]
    assert questions and fixes
    assert longest_words(questions, step_width) == []
    assert longest_words(fixes, fix_width) == []
