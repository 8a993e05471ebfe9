"""ConfirmationModal: a yes/no question that defaults to no.

Used before an action changes a node (drain, reset) and before leaving an unfinished walk.
Escape, ``n`` and the "No" button all mean no; "No" has the focus when it opens, so a tired
Enter does nothing harmful. Details (the exact command per host) are ``Text``, never markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from assistant.runbook.actions import commands_for
from assistant.runbook.model import Node

from ..look import folded
from ..safe_text import host_line, join


class ConfirmationModal(ModalScreen[bool]):
    """Dismisses with True only on an explicit yes."""

    AUTO_FOCUS = "#no"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "no", "No"),
        Binding("y", "yes", "Yes"),
    ]

    def __init__(self, title: str, body: Text | str, details: Sequence[Text] = (), *,
                 yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.title_text = title
        self.body = body if isinstance(body, Text) else Text(body)
        self.details = list(details)
        self.yes_label = yes
        self.no_label = no

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self.title_text, style="bold"), id="dialog-title")
            yield Static(self.body, id="dialog-body")
            if self.details:
                with VerticalScroll(id="dialog-details"):
                    yield Static(Text("\n").join(self.details))
            with Horizontal(id="dialog-buttons"):
                yield Button(Text(f"{self.yes_label} (y)"), id="yes", variant="warning")
                yield Button(Text(f"{self.no_label} (n, Esc)"), id="no", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)


def action_confirmation(node: Node, hosts: tuple[str, ...],
                        simulated: bool = False) -> ConfirmationModal:
    """The modal for an action node: what it does, and the exact command on each host (as the
    runner will send it, ``$HOST`` quoted). *simulated*: a replayed incident, nothing runs.
    A probe step that loads the nodes (acceptance tests) is confirmed too: which tests, where."""
    if node.kind == "probe":
        body = join([Text(f"These tests load the nodes (GPUs, NVLink, network) while they run: "
                          f"{', '.join(node.probes)}. They start only where no job can land "
                          "(drained or reserved, no GPU processes).\n\nOn "),
                     folded(hosts, "bold"), Text(" — nothing runs unless you say yes.")])
        return ConfirmationModal(f"{node.title}: run these tests?", body,
                                 [host_line(h, "bold") for h in hosts], yes="Yes, run them",
                                 no="No, stop here")
    commands = commands_for(node.command or "", hosts)
    tail = (" — a replayed incident: this is simulated, nothing runs anywhere." if simulated
            else " — nothing runs unless you say yes.")
    body = join([Text(node.text.strip()), Text("\n\nOn "), folded(hosts, "bold"),
                 Text(tail)])
    details = [join([host_line(h, "bold"), Text("  "), host_line(commands[h])]) for h in hosts]
    return ConfirmationModal(f"{node.title}: run this command?", body, details,
                             yes="Yes, run it", no="No")
