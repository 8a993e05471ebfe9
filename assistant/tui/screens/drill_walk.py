"""A drill's walk: the ordinary walk screen over the scenario's replay fleet, plus ``i`` (a
hint: the next step on the expert's path, counted) and, at the conclusion, the score.

A question shows the scenario's clue under it: what the operator would find on checking (the
log, the config, ``sinfo -R``). The trainee answers from that evidence; there is no one to ask.

The walk is not recorded as an incident (the drill's context records nothing); the score is
written to the store's ``drills`` table in a worker and the score screen opens on
``DrillScored``.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType

from assistant.runbook.model import Runbook

from .. import hooks
from .. import messages as msg
from ..context import DiagContext
from ..drill import Drill
from ..safe_text import host_text
from .walk import WalkScreen


class DrillWalkScreen(WalkScreen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("i", "hint", "Hint")]

    def __init__(self, ctx: DiagContext, runbook: Runbook, drill: Drill) -> None:
        super().__init__(ctx, runbook, drill.scenario.symptom)
        self.drill = drill

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "hint":
            return not self.busy and self.status != "concluded"
        return super().check_action(action, parameters)

    def action_hint(self) -> None:
        text = self.drill.hint_step(self.runbook, self.current)
        self.notify(text, title=f"hint {self.drill.hints}", timeout=12, markup=False)
        self.post_message(msg.HintShown(text, self.drill.hints))

    def on_question_asked(self, message: msg.QuestionAsked) -> None:
        # WalkScreen's handler runs after this one and clears the step's notice: show the
        # clue once it has.
        clue = self.drill.scenario.clues.get(message.event.node)
        if clue:
            self.call_later(self._clue, clue)

    def _clue(self, clue: str) -> None:
        panel = self.step_panel
        panel.notice(Text.assemble(("On checking you find: ", "bold cyan"), host_text(clue)))
        # the clue and the choices in view: the question itself is a scroll up
        panel.call_after_refresh(panel.scroll_to_widget, panel.choices, animate=False)

    def on_walk_idle(self, message: msg.WalkIdle) -> None:
        # Textual also calls WalkScreen.on_walk_idle (handlers run for each class in the MRO).
        if message.status == "concluded" and not self.drill.finished:
            self._score(message.state)

    @work(thread=True, group="drill-score", exit_on_error=False)
    def _score(self, state: dict[str, object]) -> None:
        score = self.drill.score(self.runbook, state)
        try:
            past = hooks.record_drill(score)
        except Exception as exc:  # the store is busy or broken: still show the score
            self.post_message(msg.DrillScored(score, [], str(exc)))
            return
        self.post_message(msg.DrillScored(score, past))

    def on_drill_scored(self, message: msg.DrillScored) -> None:
        from .drill_score import DrillScoreScreen

        self.app.push_screen(DrillScoreScreen(self.drill, message.score, message.past,
                                              message.error))
