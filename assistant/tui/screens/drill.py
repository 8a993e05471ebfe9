"""A drill's first screen: the symptom only (no scenario title, no expected conclusion), and
every runbook in alphabetical order: the matcher's ranking would pick for the trainee, so it
stays hidden until a hint is taken. Enter walks the highlighted runbook on the scenario's
replay fleet (``DrillWalkScreen``); ``i`` is a hint (it names the scenario's runbook, ranks the
list by the symptom, and counts).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static

from assistant.match import Result, match
from assistant.runbook.library import RunbookError, get_runbook

from .. import messages as msg
from ..context import DiagContext
from ..drill import Drill
from ..safe_text import host_text
from ..widgets.match_results import MatchResults
from .home import browse

LIMIT = 8


class DrillScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("i", "hint", "Hint (counts)"),
        Binding("escape", "back", "Leave"),
    ]

    def __init__(self, ctx: DiagContext, drill: Drill) -> None:
        super().__init__()
        self.ctx = ctx
        self.drill = drill
        self.ranked = False

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("Drill", "bold"), "  what is wrong? pick a runbook and "
                                   "walk it; you are scored"), id="drill-title")
        yield Static(Text("Reported symptom", style="bold"), classes="drill-heading")
        yield Static(host_text(self.drill.scenario.symptom.strip()), id="drill-symptom")
        yield Static(Text("Runbooks, A-Z: which fits?   Enter: walk it   i: hint (ranks them)",
                          style="dim"), classes="drill-heading", id="drill-list-heading")
        yield MatchResults(id="drill-results")
        yield Static("", id="drill-hint")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#drill-results").focus()
        self.query_one(MatchResults).show(runbooks_only(), self.drill.scenario.symptom)

    @work(thread=True, exclusive=True, group="rank", exit_on_error=False)
    def _rank(self, text: str) -> None:
        results = tuple(r for r in match(text, limit=LIMIT * 2) if r.type == "runbook")
        self.post_message(msg.MatchesUpdated(text, results or runbooks_only()))

    def on_matches_updated(self, message: msg.MatchesUpdated) -> None:
        self.query_one(MatchResults).show(message.results, message.query)

    def on_runbook_chosen(self, message: msg.RunbookChosen) -> None:
        from .drill_walk import DrillWalkScreen

        message.stop()
        try:
            runbook = get_runbook(message.runbook_id)
        except (KeyError, RunbookError) as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        if self.ctx.target is None:
            self.notify(f"no scenario to drill: {self.ctx.target_error}", severity="error",
                        markup=False)
            return
        self.drill.runbook = runbook.id
        self.app.push_screen(DrillWalkScreen(self.ctx, runbook, self.drill))

    def on_article_chosen(self, message: msg.ArticleChosen) -> None:
        message.stop()  # only runbooks are listed; an article would be a free hint

    def action_hint(self) -> None:
        text = self.drill.hint_runbook()
        self.query_one("#drill-hint", Static).update(Text(text, style="italic"))
        self.post_message(msg.HintShown(text, self.drill.hints))
        if not self.ranked:  # the hint also reveals the matcher's ranking
            self.ranked = True
            self.query_one("#drill-list-heading", Static).update(Text(
                "Runbooks ranked for this symptom   Enter: walk it", style="dim"))
            self._rank(self.drill.scenario.symptom)

    def action_back(self) -> None:
        """Back to home when opened from it (D); `diag drill` has nothing below: quit."""
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:
            self.app.exit()


def runbooks_only() -> tuple[Result, ...]:
    return browse()
