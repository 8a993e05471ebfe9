"""The screens the app can open by name: one list feeding the key bindings, the command
palette and the help screen, so a new screen (history, node view, drills) is one entry here.

Factories import their screen lazily: the app starts without loading screens it may never show.
Screens that need an argument (a runbook, an article, a host) are opened by messages instead
(``RunbookChosen``, ``ArticleChosen``) and listed in the palette by ``commands.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.binding import Binding, BindingType

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
    factory: Callable[[DiagContext], Screen[Any]] | None = None  # None: "home" (pop to it)
    footer: bool = True  # False: the key works everywhere but the footer leaves it to the help
    # screen and the palette (the walk's footer is full of the walk's own keys at 80 columns)


def _help(ctx: DiagContext) -> Screen[Any]:
    from .screens.help import HelpScreen

    return HelpScreen(help_sections())


def _history(ctx: DiagContext) -> Screen[Any]:
    from .screens.history import HistoryScreen

    return HistoryScreen(ctx)


def _drill(ctx: DiagContext) -> Screen[Any]:
    """A drill on a random scenario, in a context of its own (its replay fleet, nothing
    recorded as an incident); the running session's drill if it is one (``diag drill``)."""
    from .drill import drill_context
    from .screens.drill import DrillScreen

    if ctx.drill is None:
        ctx = drill_context(None, done=set(), export_dir=ctx.export_dir)
    return DrillScreen(ctx, ctx.drill)


SCREENS: tuple[ScreenEntry, ...] = (
    ScreenEntry("home", "Home", "symptom search, recent incidents, the fleet in use"),
    # F1 works everywhere, even while typing in a box; ? only where no box takes the key
    # (a symptom may well contain a '?'), so the footer offers F1.
    ScreenEntry("help", "Help", "every screen's keys (? too, when not typing in a box)",
                key="f1,question_mark", key_display="F1", factory=_help),
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


def app_bindings() -> list[BindingType]:
    """The keys that work on every screen: one per registry entry, and the theme switch."""
    return [*(Binding(e.key, f"open('{e.name}')", e.title, key_display=e.key_display or None,
                      show=e.footer) for e in SCREENS if e.key),
            Binding("ctrl+t", "toggle_dark", "Light/dark", show=False)]


HelpRows = list[tuple[str, str]]

GENERAL: HelpRows = [
    ("ctrl+p", "command palette: screens, runbooks, KB articles, theme"),
    ("tab / shift+tab", "move between panes; the mouse works too"),
    ("ctrl+q", "quit"),
]


def help_sections() -> list[tuple[str, HelpRows]]:
    """The help screen's sections, built from each screen's own BINDINGS so the help can never
    drift from what the keys do. Screens are imported here, when help is asked for."""
    from .screens.confirm import ConfirmationModal
    from .screens.drill import DrillScreen
    from .screens.drill_score import DrillScoreScreen
    from .screens.drill_walk import DrillWalkScreen
    from .screens.help import binding_rows as keys
    from .screens.history import HistoryScreen
    from .screens.home import HomeScreen
    from .screens.incident import IncidentScreen
    from .screens.kb import KBScreen
    from .screens.node import NodeScreen
    from .screens.walk import WalkScreen
    from .widgets.findings_view import FindingsView

    return [
        ("Everywhere", GENERAL + keys(app_bindings())),
        ("Home", [("type / paste", "rank runbooks and KB articles"),
                  ("Enter", "in the box: walk the top match; in a list: walk or open that one"),
                  ("↓", "go to the results to pick another"),
                  ("Enter on an incident", "its walks: path, conclusion; resume one that "
                                           "stopped"),
                  *keys(HomeScreen.BINDINGS)]),
        ("Incident", [("Enter", "resume the highlighted walk if it stopped"),
                      *keys(IncidentScreen.BINDINGS)]),
        ("Walk", keys(WalkScreen.BINDINGS)),
        ("Findings tab", [*keys(FindingsView.BINDINGS), ("click a header", "sort by column"),
                          ("/", "filter")]),
        ("Confirmation", keys(ConfirmationModal.BINDINGS)),
        ("KB article", keys(KBScreen.BINDINGS)),
        ("History", [("type in a filter", "host, runbook, code, window (7d, 30d, all)"),
                     ("Enter", "an incident: its sessions and findings; a finding: its node"),
                     *keys(HistoryScreen.BINDINGS)]),
        ("Node view", [("Enter", "open the incident in History"),
                       *keys(NodeScreen.BINDINGS)]),
        ("Drill", [("Enter", "walk the highlighted runbook (scored)"),
                   *keys(DrillScreen.BINDINGS),
                   *[k for k in keys(DrillWalkScreen.BINDINGS) if k[0] == "i"],
                   *keys(DrillScoreScreen.BINDINGS)]),
        ("Screens", [(e.key_display or e.key or "ctrl+p", f"{e.title}: {e.help}")
                     for e in SCREENS]),
        ("Typing in a box", [("F1", "help (? types a question mark)"),
                             ("↓ / Tab / Esc", "leave the box: ?, h and D then work")]),
    ]
