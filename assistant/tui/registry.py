"""The screens the app can open by name: one list feeding the key bindings, the command
palette and the help screen, so a new screen (history, node view, drills) is one entry here.

Factories import their screen lazily: the app starts without loading screens it may never show.
Screens that need an argument (a runbook, an article, a host) are opened by messages instead
(``RunbookChosen``, ``ArticleChosen``) and listed in the palette by ``commands.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.screen import Screen

    from .context import DiagContext


@dataclass(frozen=True)
class ScreenEntry:
    name: str
    title: str
    help: str
    key: str = ""  # app-wide binding that opens it ("" = palette only)
    key_display: str = ""
    factory: Callable[[DiagContext], Screen[object]] | None = None  # None: "home" (pop to it)
    footer: bool = True  # False: the key works everywhere but the footer leaves it to the help
    # screen and the palette (the walk's footer is full of the walk's own keys at 80 columns)


def _help(ctx: DiagContext) -> Screen[object]:
    from .screens.help import HelpScreen

    return HelpScreen()


def _history(ctx: DiagContext) -> Screen[object]:
    from .screens.history import HistoryScreen

    return HistoryScreen(ctx)


def _drill(ctx: DiagContext) -> Screen[object]:
    """A drill on a random scenario, in a context of its own (its replay fleet, nothing
    recorded as an incident); the running session's drill if it is one (``diag drill``)."""
    from .app import drill_context
    from .screens.drill import DrillScreen

    if ctx.drill is None:
        ctx = drill_context(None, done=set(), export_dir=ctx.export_dir)
    return DrillScreen(ctx, ctx.drill)


SCREENS: tuple[ScreenEntry, ...] = (
    ScreenEntry("home", "Home", "symptom search, recent incidents, the fleet in use"),
    ScreenEntry("help", "Help", "every screen's keys", key="f1,question_mark",
                key_display="?", factory=_help),
    ScreenEntry("history", "History", "incidents by host, runbook, code, time; node view",
                key="h", factory=_history, footer=False),
    ScreenEntry("drill", "Drill", "walk a simulated incident and get scored", key="D",
                factory=_drill, footer=False),
)


def entry(name: str) -> ScreenEntry:
    for screen in SCREENS:
        if screen.name == name:
            return screen
    raise KeyError(f"no screen '{name}'")
