"""Home: type (or paste) the symptom, pick a runbook or an article; recent incidents; the fleet.

Ranking runs in a thread worker after a short debounce: ``match()`` takes milliseconds once
its index exists, but building the index validates every runbook (about half a second), and
the first paint must not wait for that. One Enter in the symptom box walks the top match (once
the ranking of what is typed has arrived); ↓ goes to the list to pick another.

The symptom box takes every printable key (a symptom may well hold a ``?``), so while it has
the focus the footer offers only keys that work there (F1 for help, Esc, ↓); ``?``, ``h`` and
``D`` work as soon as the focus is elsewhere (↓, Tab). Recent incidents are read again each
time the screen comes back, so a walk just finished is there.
"""

from __future__ import annotations

import contextlib
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, Static

from assistant.match import Result, match, shipped_index

from .. import messages as msg
from ..context import DiagContext
from ..widgets.fleet_bar import FleetBar
from ..widgets.match_results import MatchResults
from ..widgets.recent_incidents import RecentIncidents

DEBOUNCE_S = 0.12
LIMIT = 8


def browse() -> tuple[Result, ...]:
    """Every runbook, for an empty symptom box."""
    docs = [d for d in shipped_index().documents if d.type == "runbook"]
    return tuple(Result(d.type, d.id, d.title, 0.0) for d in sorted(docs, key=lambda d: d.id))


class HomeScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear", "Clear the symptom", show=False),
        Binding("down", "results", "To the results", show=False),
        Binding("enter", "walk_top", "Walk the top match", show=False),
    ]

    def __init__(self, ctx: DiagContext) -> None:
        super().__init__()
        self.ctx = ctx
        self._debounce: Timer | None = None
        self._ranked: str | None = None
        self._shown: str | None = None  # the query whose results are on screen
        self._walk_when_ranked = False
        self._matched = False  # did a runbook match what is on screen (else: the list of all)

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("diag", "bold"), "  what is the job doing? "
                                   "describe it, or paste a log line"), id="home-title")
        yield FleetBar(self.ctx, id="fleet")
        yield Input(value=self.ctx.demo_symptom(), id="symptom",
                    placeholder="e.g. training hangs at step 0 / NCCL watchdog timeout …")
        yield Static(Text("ranking…", style="dim"), id="results-title")
        yield MatchResults(id="results")
        yield RecentIncidents(id="recent")
        yield Footer()

    def on_mount(self) -> None:
        symptom = self.query_one("#symptom", Input)
        symptom.focus()
        if symptom.value:  # the demo's symptom, selected: typing replaces it, Enter walks it
            symptom.select_all()
        self.rank(symptom.value)
        self.load_incidents()
        self.call_after_refresh(self.prewarm)

    @work(thread=True, group="prewarm", exit_on_error=False)
    def prewarm(self) -> None:
        """After the first paint: import the walk and KB screens (Tree, DataTable, Markdown...)
        so the first Enter on a runbook opens it at once instead of after a second of imports.
        Then what a walk's first step reads in this process — the probe catalog (parsed YAML)
        and the probe modules (which facts each builds on): done during the step, that work
        held the event loop's GIL while 64 hosts streamed in (``bench/tui.py``)."""
        from probes.base import REGISTRY, get_probe
        from probes.catalog import load_catalog

        from . import kb, walk  # noqa: F401

        load_catalog()
        for name in REGISTRY:
            with contextlib.suppress(KeyError):  # a probe this build does not ship
                get_probe(name)

    @property
    def symptom(self) -> str:
        return self.query_one("#symptom", Input).value

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "symptom":
            return
        if self._debounce is not None:
            self._debounce.stop()
        if event.value != self._ranked:
            self._debounce = self.set_timer(DEBOUNCE_S, lambda: self.rank(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "symptom":
            event.stop()
            self.action_walk_top()

    def on_screen_resume(self) -> None:
        self.load_incidents()  # a walk may have just been recorded

    def action_walk_top(self) -> None:
        """Walk the top match (or open the top article), once the ranking of what is in the
        box has arrived; with an empty box, go to the list of runbooks."""
        if not self.symptom.strip():
            self.action_results()
            return
        if self._shown != self.symptom:  # still ranking what was just typed
            self._walk_when_ranked = True
            if self._ranked != self.symptom:
                self.rank(self.symptom)
            return
        self._walk_when_ranked = False
        if not self._matched:  # nothing matched: the list is every runbook, not a pick
            self.action_results()
            return
        self.query_one(MatchResults).choose_top()

    def rank(self, text: str) -> None:
        """Rank *text* off the event loop; the answer comes back as ``MatchesUpdated``."""
        self._ranked = text
        self._rank(text)

    @work(thread=True, exclusive=True, group="rank", exit_on_error=False)
    def _rank(self, text: str) -> None:
        results = tuple(match(text, limit=LIMIT)) if text.strip() else browse()
        if not any(r.type == "runbook" for r in results):
            # Text that means nothing gets no runbook, and the list to pick one from after
            # whatever articles did match (as `diag match` prints them).
            results = (*results, *browse())
        self.post_message(msg.MatchesUpdated(text, results))

    def on_matches_updated(self, message: msg.MatchesUpdated) -> None:
        if message.query != self.symptom:
            return  # a stale ranking: the operator typed on
        matched = any(r.type == "runbook" and r.score > 0 for r in message.results)
        self._matched = matched
        title = ("Runbooks" if not message.query.strip() else
                 "Matches" if matched else "No runbook matches: the runbooks")
        hint = ("   Enter: the top one   ↓: pick another" if matched and message.query.strip()
                else "   ↓ then Enter: walk a runbook or read an article" if message.results
                else "")
        self.query_one("#results-title", Static).update(
            Text.assemble((title, "bold"), (hint, "dim")))
        self.query_one(MatchResults).show(message.results, message.query)
        self._shown = message.query
        if self._walk_when_ranked:
            self.action_walk_top()

    @work(thread=True, group="incidents", exit_on_error=False)
    def load_incidents(self) -> None:
        try:
            incidents = self.ctx.incidents()
        except Exception as exc:  # the store is someone else's: never break home over it
            self.app.call_from_thread(self.notify, f"recent incidents unavailable: {exc}",
                                      severity="warning", markup=False)
            return
        self.app.call_from_thread(self.query_one(RecentIncidents).show, incidents)

    def action_results(self) -> None:
        results = self.query_one(MatchResults)
        if results.option_count:
            results.focus()

    def action_clear(self) -> None:
        symptom = self.query_one("#symptom", Input)
        symptom.value = ""
        symptom.focus()
