"""The help screen: every key of every screen, in sections the screen registry builds from the
screens' own BINDINGS (``registry.help_sections``), so the help can never drift from the keys."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static


def binding_rows(bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
    """(keys, what) rows; one key bound to several actions (Escape: cancel, else leave) is
    one row."""
    rows: dict[str, list[str]] = {}
    for b in bindings:
        if not isinstance(b, Binding) or not b.description:
            continue
        if b.action.startswith("answer("):
            rows.setdefault("1-9", ["answer the question with that choice"])
            continue
        keys = b.key.replace("question_mark", "?").replace("slash", "/")
        if b.description not in rows.setdefault(keys, []):
            rows[keys].append(b.description)
    return [(keys, " / ".join(what)) for keys, what in rows.items()]


def help_text(sections: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> Text:
    out = Text()
    for title, rows in sections:
        out.append(f"{title}\n", style="bold underline")
        for keys, what in rows:
            out.append(f"  {keys:<16}", style="bold")
            out.append(f"{what}\n")
        out.append("\n")
    return out


class HelpScreen(Screen[None]):
    """Every key of every screen; the sections come from the screen registry."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f1,question_mark", "app.pop_screen", "Close"),
    ]

    def __init__(self, sections: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        yield Static(Text("Keys", style="bold"), id="help-title")
        with VerticalScroll(id="help-body"):
            yield Static(help_text(self.sections))
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()
