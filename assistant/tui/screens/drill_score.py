"""A drill's score: right conclusion?, steps against the shortest path, hints, time; what an
expert would have looked at (the expected runbook's shortest path, each step with its
explain); and the trainee's past drills (progress). Plain text from fixtures and the store goes
through ``safe_text``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from assistant.store.drills import DrillScore

from ..drill import Drill, expert_path
from ..safe_text import host_line, host_text, join


def verdict(score: DrillScore) -> Text:
    if score.correct:
        head = Text("Right conclusion: ", style="bold green")
    else:
        head = Text("Not the expected conclusion: ", style="bold red")
    reached = score.conclusion or "none"
    body = host_line(reached if score.correct else f"{reached} (expected {score.expected})")
    return join([head, body])


def figures(score: DrillScore) -> Text:
    shortest = ("the chosen runbook cannot reach it" if score.shortest is None
                else f"shortest {score.shortest}")
    minutes, seconds = divmod(round(score.seconds), 60)
    return Text.assemble(("steps ", "bold"), f"{score.steps} ({shortest})   ",
                         ("hints ", "bold"), f"{score.hints}   ",
                         ("time ", "bold"), f"{minutes}m{seconds:02d}s   ",
                         ("runbook ", "bold"), score.runbook)


class DrillScoreScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back to the walk"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, drill: Drill, score: DrillScore, past: list[dict[str, Any]],
                 error: str = "") -> None:
        super().__init__()
        self.drill = drill
        self.score = score
        self.past = past
        self.error = error

    def compose(self) -> ComposeResult:
        yield Static(join([Text("Drill score", style="bold"),
                           host_line(f"  {self.score.scenario}", "dim")]), id="drill-title")
        yield Static(verdict(self.score), id="score-verdict")
        yield Static(figures(self.score), id="score-figures")
        with VerticalScroll(id="score-expert"):
            yield Static(Text("What an expert would have looked at", style="bold"))
            for i, (node, kind, explain) in enumerate(expert_path(self.drill.scenario), 1):
                yield Static(join([Text(f"{i}. ", style="bold"), host_line(node, "bold"),
                                   Text(f" ({kind}) ", style="dim"),
                                   host_text(" ".join(explain.split()))]),
                             classes="expert-step")
        yield Static(Text("Your drills", style="bold") if not self.error else
                     host_line(f"scores not saved: {self.error}", "red"), id="score-past-title")
        yield DataTable(id="score-past", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#score-past", DataTable)
        table.add_columns("finished", "scenario", "ok", "steps", "hints", "time")
        for row in self.past:
            finished = row.get("finished")
            shortest = row.get("shortest")
            table.add_row(finished.strftime("%m-%d %H:%M") if finished else "",
                          host_line(row.get("scenario")),
                          Text("yes", style="green") if row.get("correct")
                          else Text("no", style="red"),
                          f"{row.get('steps')}/{shortest if shortest is not None else '-'}",
                          str(row.get("hints")), f"{int(row.get('seconds') or 0)}s")
        table.focus()

    def action_back(self) -> None:
        self.app.pop_screen()
