"""A drill's score: the overall score out of 100 and each part with what it measured (right
conclusion, steps against the shortest path, hints, time); after a wrong pick, the runbook and
conclusion the incident called for and its cause; what happened (the scenario's description);
what an expert would have looked at (the expected runbook's shortest path, each step with its
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

from ..drill import Drill, Part, expert_path, grade, right_answer
from ..safe_text import host_line, host_text, join


def verdict(score: DrillScore, total: int) -> Text:
    head = Text.assemble(("Score ", "bold"), (f"{total}/100", "bold reverse"), "   ")
    if score.correct:
        said = Text("Right conclusion: ", style="bold green")
    else:
        said = Text("Not the expected conclusion: ", style="bold red")
    return join([head, said, host_line(score.conclusion or "none (the walk did not conclude)")])


def parts_text(parts: list[Part]) -> Text:
    """One line a part: its name, points out of its weight, and what it measured."""
    lines = [Text.assemble((f"{p.name:<11}", "bold"),
                           (f"{p.points:>2}/{p.out_of:<3}", "green" if p.points == p.out_of
                            else "yellow" if p.points else "red"), f" {p.meaning}")
             for p in parts]
    return Text("\n").join(lines)


def reveal(drill: Drill, score: DrillScore) -> Text:
    """After a wrong pick: the runbook and conclusion the incident called for, and its cause."""
    runbook, conclusion, cause = right_answer(drill.scenario)
    picked = ("the right runbook, but" if score.runbook == runbook else
              f"you walked '{score.runbook}';")
    return join([Text("The right pick: ", style="bold"),
                 host_line(f"{picked} the '{runbook}' runbook leads to {conclusion}. "),
                 host_text(cause)])


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
        total, parts = grade(self.score)
        yield Static(join([Text("Drill score", style="bold"),
                           host_line(f"  {self.score.scenario}", "dim")]), id="drill-title")
        yield Static(verdict(self.score, total), id="score-verdict")
        with VerticalScroll(id="score-body"):
            yield Static(parts_text(parts), id="score-parts")
            if not self.score.correct:
                yield Static(reveal(self.drill, self.score), id="score-reveal")
            description = " ".join(self.drill.scenario.description.split())
            if description:
                yield Static(join([Text("What happened: ", style="bold"),
                                   host_text(description)]), id="score-why")
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
        self.query_one("#score-body").focus()  # arrows and PgDn read the rest

    def action_back(self) -> None:
        self.app.pop_screen()
