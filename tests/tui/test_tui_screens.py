"""Every screen reachable by keyboard: help (F1, ?), the command palette, KB articles and their
links, the theme switch, recent incidents, and a home with no hosts."""

from __future__ import annotations

from typing import Any

from assistant.tui import messages as m
from assistant.tui import registry
from assistant.tui.app import DiagApp
from assistant.tui.context import DiagContext, FleetOptions
from assistant.tui.hooks import IncidentSummary
from assistant.tui.screens.help import HelpScreen
from assistant.tui.screens.home import HomeScreen
from assistant.tui.screens.kb import KBScreen
from tests.tui.tui_support import Messages, make_app, ranked, screen_text, wait_for


async def test_help_opens_with_f1_and_question_mark_and_lists_every_screen() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-body Static").render())
        for needle in ("Walk", "1-9", "answer the question", "Cancel step", "Host output",
                       "Yes", "ctrl+p"):
            assert needle in text
        for entry in registry.SCREENS:
            assert entry.title in text
        await pilot.press("escape")
        assert isinstance(app.screen, HomeScreen)
        await pilot.press("tab")  # off the symptom box, "?" is a key, not a character
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)


async def test_palette_reaches_runbooks_and_articles() -> None:
    app = make_app()
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await pilot.press("ctrl+p")
        await pilot.press(*"XID errors")
        await wait_for(pilot, lambda: "XID errors" in screen_text(app))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, KBScreen))
        assert app.screen.article.id == "xid-codes"
        await pilot.press("escape", "ctrl+p", *"walk runbook: training stalls")
        await wait_for(pilot, lambda: "checkpoint-stall" in screen_text(app))
        await pilot.press("enter")
        await wait_for(pilot, lambda: seen.of(m.RunbookChosen))
        assert seen.of(m.RunbookChosen)[-1].runbook_id == "checkpoint-stall"


async def test_kb_article_related_links_by_keyboard() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(m.ArticleChosen("xid-codes"))
        await wait_for(pilot, lambda: isinstance(app.screen, KBScreen))
        first = app.screen
        assert "What it is" in screen_text(app)  # the Markdown rendered
        assert first.links and "gpu-fallen-off-bus" in first.links
        await pilot.press("l")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is not first)
        assert app.screen.article.id == first.links[0]
        await pilot.press("escape")
        assert app.screen is first


async def test_enter_on_a_kb_result_opens_the_article() -> None:
    app = make_app()
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await pilot.press(*"xid")
        update = await ranked(pilot, seen, "xid")
        index = next(i for i, r in enumerate(update.results) if r.type == "kb")
        await pilot.press("down", *["down"] * index, "enter")  # Enter in the box walks the top
        await wait_for(pilot, lambda: isinstance(app.screen, KBScreen))
        assert app.screen.article.id == update.results[index].id


async def test_theme_switch_and_the_home_key() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.current_theme.dark
        await pilot.press("ctrl+t")
        assert not app.current_theme.dark
        await pilot.press("f1")
        await app.run_action("open('home')")  # what the palette's "Go to Home" does
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)


async def test_recent_incidents_hook() -> None:
    incidents = [IncidentSummary("inc-1", "hang on job 7 [bold]x[/]", "2024-06-01 03:12")]
    app = make_app(incidents=lambda: incidents)
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        listing = app.screen.query_one("#recent-list")
        await wait_for(pilot, lambda: listing.option_count == 1)
        assert "hang on job 7 [bold]x[/]" in screen_text(app)  # titles are text, not markup
        listing.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: seen.of(m.IncidentChosen))
        assert seen.of(m.IncidentChosen)[0].incident_id == "inc-1"


async def test_no_incidents_shows_only_the_title() -> None:
    app = make_app()  # the hook returns []
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        assert "Recent incidents" in screen_text(app)
        assert not app.screen.query_one("#recent-list").display


async def test_without_hosts_home_says_why_and_walks_are_refused() -> None:
    app = DiagApp(DiagContext(FleetOptions()), still=True)  # like `diag` with no options
    assert app.ctx.target is None
    async with app.run_test(size=(80, 24)) as pilot:
        assert "no hosts: which hosts?" in screen_text(app)
        app.post_message(m.RunbookChosen("hang"))
        await pilot.pause(0.2)
        assert isinstance(app.screen, HomeScreen)
        assert any("no hosts to walk against" in n.message for n in app._notifications)


def test_run_app_signature_takes_the_cli_host_options() -> None:
    import inspect

    from assistant.tui.app import run_app

    params: dict[str, Any] = dict(inspect.signature(run_app).parameters)
    for name in ("hosts", "inventory", "scenario", "transport", "concurrency", "timeout",
                 "deadline", "demo"):
        assert name in params


async def test_meaningless_symptom_says_no_runbook_matches_and_lists_them() -> None:
    app = make_app()
    seen = Messages()
    async with app.run_test(size=(100, 30), message_hook=seen) as pilot:
        await pilot.press(*"lorem ipsum")
        update = await ranked(pilot, seen, "lorem ipsum")
        await pilot.pause()
        assert [r.id for r in update.results if r.type == "runbook"] == sorted(
            r.id for r in update.results if r.type == "runbook")  # the whole list, unranked
        assert {"hang", "low-bandwidth", "queue-idle"} <= {r.id for r in update.results}
        assert "No runbook matches" in str(app.screen.query_one("#results-title").render())
