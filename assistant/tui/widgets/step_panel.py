"""The current step: what it is, why it is taken (``explain``), live probe progress, and —
for a question — the choices, numbered so keys 1-9 answer without moving the cursor."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from assistant.runbook.model import Node

from .. import messages as msg
from ..look import KIND_MARK, folded
from .probe_progress import ProbeProgress


class ChoiceList(OptionList):
    """A question's choices; choosing one posts ``AnswerChosen``."""

    def __init__(self) -> None:
        super().__init__(id="choices")
        self.node_id = ""

    def ask(self, node: Node) -> None:
        self.node_id = node.id
        self.clear_options()
        self.add_options(Option(Text.assemble((f"{i} ", "bold"), c.label), id=c.id)
                         for i, c in enumerate(node.choices, 1))
        self.highlighted = 0
        self.display = True

    def close(self) -> None:
        self.clear_options()
        self.node_id = ""
        self.display = False

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.node_id and event.option.id:
            self.post_message(msg.AnswerChosen(self.node_id, event.option.id))


class StepPanel(VerticalScroll):
    """Filled by the walk screen as the engine reports."""

    _explain = Text()

    def compose(self) -> ComposeResult:
        yield Static(id="step-title")
        yield Static(id="step-explain")
        yield ProbeProgress(id="progress")
        yield Static(id="step-notice")
        yield ChoiceList()

    def on_mount(self) -> None:
        self.query_one(ChoiceList).display = False

    @property
    def progress(self) -> ProbeProgress:
        return self.query_one(ProbeProgress)

    @property
    def choices(self) -> ChoiceList:
        return self.query_one(ChoiceList)

    def enter(self, node: Node, number: int) -> None:
        """A new step: its title and explanation; progress and notices start empty."""
        title = Text.assemble((f"Step {number} · ", "dim"), (node.title, "bold"),
                              (f"  {KIND_MARK[node.kind]}", "dim"))
        if node.kind == "probe":
            title.append(f" {', '.join(node.probes)}", style="dim")
        self.query_one("#step-title", Static).update(title)
        explain = Text(node.explain.strip())
        if node.kind in ("question", "action") and node.text:
            explain.append("\n\n")
            explain.append(node.text.strip(), style="bold")
        self._explain = explain
        self.query_one("#step-explain", Static).update(explain)
        if node.kind == "probe":  # an action or a conclusion reads the last probe's results
            self.progress.reset()
        # A question's answer is the operator's: the last probe's progress bars would only
        # push its choices below the fold at 80x24.
        self.progress.display = node.kind != "question"
        if node.kind != "conclusion":  # an action's per-host result stays up at the end
            self.notice(Text())
        self.choices.close()

    def about(self, hosts: Sequence[str], of: int) -> None:
        """Under a question: the hosts it asks about (all of them, or those it names)."""
        label = "asked of all hosts: " if len(hosts) == of else "asked about: "
        self.query_one("#step-explain", Static).update(
            Text.assemble(self._explain, "\n", (label, "dim"), folded(hosts, "bold")))

    def notice(self, text: Text) -> None:
        """A line under the progress: an action's outcome, a cancel, an error."""
        widget = self.query_one("#step-notice", Static)
        widget.update(text)
        widget.display = bool(text.plain)
