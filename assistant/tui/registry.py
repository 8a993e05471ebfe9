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


def _help(ctx: DiagContext) -> Screen[object]:
    from .screens.help import HelpScreen

    return HelpScreen()


SCREENS: tuple[ScreenEntry, ...] = (
    ScreenEntry("home", "Home", "symptom search, recent incidents, the fleet in use"),
    ScreenEntry("help", "Help", "every screen's keys", key="f1,question_mark",
                key_display="?", factory=_help),
    # Second step, once the store lands:
    # ScreenEntry("history", "History", "incidents by host, runbook, code, time", key="H",
    #             factory=lambda ctx: HistoryScreen(ctx)),
    # ScreenEntry("drill", "Drill", "walk a simulated incident and get scored", key="D", ...),
)


def entry(name: str) -> ScreenEntry:
    for screen in SCREENS:
        if screen.name == name:
            return screen
    raise KeyError(f"no screen '{name}'")
