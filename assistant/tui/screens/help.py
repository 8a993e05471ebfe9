"""Every key of every screen, built from the screens' own BINDINGS and the screen registry, so
the help can never drift from what the keys really do."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from .. import registry

GENERAL = [
    ("ctrl+p", "command palette: screens, runbooks, KB articles, theme"),
    ("tab / shift+tab", "move between panes; the mouse works too"),
    ("ctrl+q", "quit"),
]


def _keys(bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
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


def help_text() -> Text:
    from ..app import DiagApp
    from ..widgets.findings_view import FindingsView
    from .confirm import ConfirmationModal
    from .drill import DrillScreen
    from .drill_score import DrillScoreScreen
    from .drill_walk import DrillWalkScreen
    from .history import HistoryScreen
    from .home import HomeScreen
    from .kb import KBScreen
    from .node import NodeScreen
    from .walk import WalkScreen

    sections: list[tuple[str, list[tuple[str, str]]]] = [
        ("Everywhere", GENERAL + _keys(DiagApp.BINDINGS)),
        ("Home", [("type / paste", "rank runbooks and KB articles"),
                  ("↓ or Enter", "go to the results; Enter walks a runbook or opens an article"),
                  *_keys(HomeScreen.BINDINGS)]),
        ("Walk", _keys(WalkScreen.BINDINGS)),
        ("Findings tab", [*_keys(FindingsView.BINDINGS), ("click a header", "sort by column"),
                          ("/", "filter")]),
        ("Confirmation", _keys(ConfirmationModal.BINDINGS)),
        ("KB article", _keys(KBScreen.BINDINGS)),
        ("History", [("type in a filter", "host, runbook, code, window (7d, 30d, all)"),
                     ("Enter", "an incident: its sessions and findings; a finding: its node"),
                     *_keys(HistoryScreen.BINDINGS)]),
        ("Node view", [("Enter", "open the incident in History"),
                       *_keys(NodeScreen.BINDINGS)]),
        ("Drill", [("Enter", "walk the highlighted runbook (scored)"),
                   *_keys(DrillScreen.BINDINGS),
                   *[k for k in _keys(DrillWalkScreen.BINDINGS) if k[0] == "i"],
                   *_keys(DrillScoreScreen.BINDINGS)]),
        ("Screens", [(e.key_display or e.key or "ctrl+p", f"{e.title}: {e.help}")
                     for e in registry.SCREENS]),
    ]
    out = Text()
    for title, rows in sections:
        out.append(f"{title}\n", style="bold underline")
        for keys, what in rows:
            out.append(f"  {keys:<16}", style="bold")
            out.append(f"{what}\n")
        out.append("\n")
    return out


class HelpScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f1,question_mark", "app.pop_screen", "Close"),
    ]

    def compose(self) -> ComposeResult:
        yield Static(Text("Keys", style="bold"), id="help-title")
        with VerticalScroll(id="help-body"):
            yield Static(help_text())
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()
