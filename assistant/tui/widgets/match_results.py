"""Ranked runbooks and KB articles for the symptom box; Enter walks a runbook or opens an
article. With an empty box it lists every runbook, so a new hire can browse."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from assistant.match import Result

from .. import messages as msg

KIND_LABEL = {"runbook": ("walk", "bold green"), "kb": ("read", "bold blue")}


class MatchResults(OptionList):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.results: tuple[Result, ...] = ()
        self.symptom = ""

    def show(self, results: Sequence[Result], symptom: str) -> None:
        self.results = tuple(results)
        self.symptom = symptom
        self.clear_options()
        if not results:
            self.add_option(Option(Text("nothing matches: try other words, or paste the log "
                                        "line", style="dim"), disabled=True))
            return
        for r in results:
            kind, style = KIND_LABEL.get(r.type, (r.type, ""))
            prompt = Text.assemble((f"{kind} ", style), (r.title, ""), (f"  {r.id}", "dim"))
            prompt.no_wrap = True
            prompt.overflow = "ellipsis"
            self.add_option(Option(prompt, id=f"{r.type}:{r.id}"))
        self.highlighted = 0

    def choose_top(self) -> None:
        """What Enter in the symptom box does: the first result, as if selected. Run on this
        widget's own queue, so the message bubbles from here to the screen and the app (a
        message sent while the screen's handler runs would stop at the screen)."""
        if self.results:
            self.call_later(self._choose, f"{self.results[0].type}:{self.results[0].id}")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._choose(event.option.id or "")

    def _choose(self, option_id: str) -> None:
        kind, _, ident = option_id.partition(":")
        if kind == "runbook":
            self.post_message(msg.RunbookChosen(ident, self.symptom))
        elif kind == "kb":
            self.post_message(msg.ArticleChosen(ident))
