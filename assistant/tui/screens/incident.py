"""One incident from the home screen's recent list: each walk with its path and conclusion, and
the walks that stopped (waiting on a question, interrupted) one key away from going on.

The store is read in a worker (``hooks.incident_walks``); resuming loads the walk state in a
worker too and posts ``ResumeRequested``, which the app turns into a walk screen over the hosts
the walk used. Host text (titles, answers, results) goes through ``safe_text``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from .. import hooks
from .. import messages as msg
from ..context import DiagContext
from ..safe_text import host_line, join

STATUS_STYLE = {"concluded": "green", "waiting": "bold yellow", "interrupted": "bold magenta",
                "running": "magenta"}


def session_prompt(session: dict[str, Any]) -> Text:
    """One line per walk: runbook, status, when, who; resumable ones say so."""
    started = session.get("started")
    when = started.strftime("%m-%d %H:%M") if isinstance(started, datetime) else ""
    status = str(session.get("status") or "")
    out = Text.assemble((f"{when} ", "dim"), (f"{session['runbook']} ", "bold"),
                        (status, STATUS_STYLE.get(status, "")))
    if session.get("resumable"):
        out.append("  Enter: resume", style="dim")
    elif session.get("conclusion"):
        out.append_text(host_line(f"  → {session['conclusion']}", "dim"))
    out.no_wrap = True
    out.overflow = "ellipsis"
    return out


def session_text(session: dict[str, Any]) -> Text:
    """The walk: its path (answers shown), then its conclusion, or the question it waits on."""
    steps = []
    for step in session.get("path") or []:
        label = str(step["node"])
        if step.get("answer"):
            label += f" ({step['answer']})"
        steps.append(label)
    out = Text.assemble(("Path  ", "bold"))
    out.append_text(host_line(" → ".join(steps) or "no step finished yet"))
    for action in session.get("actions") or []:
        if action.get("command"):
            out.append("\nAction  ", style="bold")
            out.append_text(host_line(f"{action['node']}: {action.get('result') or '-'}"))
    if session.get("outcome"):
        out.append("\nConclusion  ", style="bold")
        out.append_text(host_line(f"{session['outcome']} [{session.get('severity') or '-'}]"))
    elif session.get("resumable"):
        out.append("\nStopped at  ", style="bold")
        out.append_text(host_line(str(session.get("current") or "?")))
        out.append(f"  ({session.get('status')}) — Enter resumes it here; or "
                   f"`diag run --resume {session['id']}`", style="dim")
    return out


class IncidentScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "resume", "Resume"),
        Binding("h", "history", "Findings in History"),
    ]

    def __init__(self, ctx: DiagContext, incident_id: str) -> None:
        super().__init__()
        self.ctx = ctx
        self.incident_id = incident_id
        self.sessions: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Static(join([Text("Incident ", style="bold"), host_line(self.incident_id)]),
                     id="incident-title")
        yield OptionList(id="incident-sessions")
        with VerticalScroll(id="incident-detail"):
            yield Static(Text("loading…", style="dim"), id="incident-walk")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#incident-sessions").focus()
        self._load()

    @work(thread=True, exclusive=True, group="incident", exit_on_error=False)
    def _load(self) -> None:
        try:
            detail = hooks.incident_walks(self.incident_id)
        except Exception as exc:  # a busy store: say so, keep the screen
            self.post_message(msg.IncidentWalksLoaded(self.incident_id, {}, str(exc)))
            return
        self.post_message(msg.IncidentWalksLoaded(self.incident_id, detail))

    def on_incident_walks_loaded(self, message: msg.IncidentWalksLoaded) -> None:
        walk = self.query_one("#incident-walk", Static)
        if message.error:
            walk.update(host_line(message.error, "red"))
            return
        incident = message.detail.get("incident") or {}
        title = join([Text("Incident ", style="bold"), host_line(self.incident_id, "dim"),
                      Text("  "), host_line(incident.get("title") or "")])
        if incident.get("simulated"):
            title.append("  simulated", style="italic magenta")
        self.query_one("#incident-title", Static).update(title)
        self.sessions = list(message.detail.get("sessions") or [])
        listing = self.query_one("#incident-sessions", OptionList)
        listing.clear_options()
        listing.add_options(Option(session_prompt(s), id=s["id"]) for s in self.sessions)
        if self.sessions:
            listing.highlighted = 0
        else:
            walk.update(Text("no walk recorded for this incident", style="dim"))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        session = self._session(event.option.id)
        if session is not None:
            self.query_one("#incident-walk", Static).update(session_text(session))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_resume()

    def _session(self, session_id: str | None) -> dict[str, Any] | None:
        return next((s for s in self.sessions if s["id"] == session_id), None)

    def action_resume(self) -> None:
        listing = self.query_one("#incident-sessions", OptionList)
        highlighted = listing.highlighted
        if highlighted is None or not self.sessions:
            return
        session = self.sessions[highlighted]
        if not session.get("resumable"):
            self.notify("this walk reached its conclusion: nothing to resume", markup=False)
            return
        self._resume(session["id"])

    @work(thread=True, exclusive=True, group="resume", exit_on_error=False)
    def _resume(self, session_id: str) -> None:
        try:
            saved, state = hooks.saved_walk(session_id)
            ctx = self.ctx.for_session(saved)  # may open another target: off the UI thread
        except Exception as exc:
            self.app.call_from_thread(self.notify, f"cannot resume: {exc}", severity="error",
                                      markup=False)
            return
        self.post_message(msg.ResumeRequested(saved, state, ctx))

    def action_history(self) -> None:
        from .history import HistoryScreen

        self.app.push_screen(HistoryScreen(self.ctx, incident=self.incident_id))
