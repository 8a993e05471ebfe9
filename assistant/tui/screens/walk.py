"""The walk: a runbook walked step by step against the fleet, live.

The engine runs on a thread worker (``WalkDriver``); this screen only reacts to the messages it
posts, so a 128-host fan-out never blocks a keypress. Escape or Ctrl-C during a probe step sets
the provider's cancel event: unfinished hosts end ``cancelled`` and the walk waits on the same
step (``r`` runs it again). Tabs keep 80x24 usable: the walk (tree + step), the findings table,
the conclusion, and — shown once a probe reports figures (an acceptance walk) — the node x test
matrix filling in live.

Split by job: this module lays the screen out and reacts to the engine's messages;
``walk_thread.py`` drives the walk's thread (and records it), ``walk_keys.py`` answers keys.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from assistant.kb import load_articles
from assistant.runbook import events as ev
from assistant.runbook.model import Runbook
from assistant.walks import Recording
from probes.model import Finding

from .. import messages as msg
from ..context import DiagContext
from ..export import export_path
from ..safe_text import host_line, join
from ..walk_driver import (
    Confirmation,
    WalkDriver,
    release_gc,
)
from ..widgets.accept_matrix import AcceptMatrix
from ..widgets.conclusion_view import ConclusionView, action_result_text
from ..widgets.findings_view import FindingsView
from ..widgets.incident_bar import IncidentBar
from ..widgets.runbook_tree import RunbookTree
from ..widgets.step_panel import StepPanel
from .walk_keys import WalkKeys
from .walk_thread import WalkThread

EVENTS_EVERY_S = 0.05


class WalkScreen(WalkThread, WalkKeys, Screen[None]):
    # No auto-focus: after a modal closes it would focus the first focusable widget, which
    # may sit in another tab and drag the operator back there (TabbedContent follows focus).
    # ``_focus_tab`` decides instead.
    AUTO_FOCUS = ""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel step"),
        Binding("escape", "back", "Leave"),
        Binding("ctrl+c", "cancel", "Cancel step (also Esc)", show=False, priority=True),
        Binding("1", "answer(1)", "Answer", key_display="1-9"),
        *(Binding(str(n), f"answer({n})", f"Answer {n}", show=False) for n in range(2, 10)),
        Binding("u", "undo", "Undo"),
        Binding("r", "retry", "Retry"),
        Binding("f", "tab('findings')", "Findings"),
        Binding("c", "tab('conclusion')", "Conclusion"),
        Binding("a", "tab('matrix')", "Matrix"),
        Binding("w", "tab('walk')", "Walk", show=False),
        Binding("slash", "filter", "Filter findings", show=False),
        Binding("k", "read_step", "Read about step", show=False),
        Binding("m", "copy_markdown", "Copy MD"),
        Binding("x", "close_incident", "Close incident"),
        Binding("s", "save_markdown", "Save MD"),
    ]

    def __init__(self, ctx: DiagContext, runbook: Runbook, symptom: str = "", *,
                 resume: tuple[dict[str, Any], dict[str, Any]] | None = None,
                 owns_ctx: bool = False) -> None:
        """*resume*: (session, walk state) of a recorded walk to continue (``load_saved``);
        *owns_ctx*: close *ctx* when the screen goes (a context opened for that walk)."""
        super().__init__()
        self.ctx = ctx
        self.owns_ctx = owns_ctx
        self.runbook = runbook
        self.symptom = symptom
        saved, state = resume if resume is not None else (None, None)
        self.resumed_session: str | None = saved["id"] if saved else None
        self.session = self.resumed_session or ctx.new_session_id()
        self.recorded = False
        self.recording: Recording | None = None
        self.store_warned = False
        self.status = "starting"
        self.busy = False
        self.steps: list[dict[str, Any]] = list(state["steps"]) if state else []
        self.current: str | None = state["current"] if state else runbook.start
        self.closing = threading.Event()
        self.cancel_event = threading.Event()
        self.kb_titles = {a.id: a.title for a in load_articles().values()}
        target = ctx.target
        assert target is not None, "the app refuses walks without a target"
        self.driver = WalkDriver(runbook, target.hosts, ctx.provider(self.cancel_event),
                                 self.cancel_event, self.post_message,
                                 Confirmation(self._ask_confirmation, self.closing,
                                              self.cancel_event),
                                 run_action=ctx.action_runner(), saved_state=state)

    # --- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="walk-header"):
            yield Static(Text.assemble((self.runbook.id, "bold"), " · ", self.runbook.title),
                         id="walk-title")
            yield Static(id="walk-status")
        with TabbedContent(initial="tab-walk", id="walk-tabs"):
            with TabPane("Walk", id="tab-walk"), Horizontal(id="walk-main"):
                yield RunbookTree(self.runbook, id="walk-tree")
                yield StepPanel(id="step")
            with TabPane("Findings (0)", id="tab-findings"):
                yield FindingsView(id="findings")
            with TabPane("Conclusion", id="tab-conclusion"):
                yield IncidentBar(id="incident-bar")
                yield ConclusionView(id="conclusion")
            with TabPane("Matrix", id="tab-matrix"):
                yield AcceptMatrix(self.driver.walk.hosts, id="matrix")
        yield Footer()

    def on_mount(self) -> None:
        # Looked up once: a fan-out sends hundreds of messages, each would query the DOM.
        self._step_panel = self.query_one(StepPanel)
        self._progress = self._step_panel.progress
        self._findings = self.query_one(FindingsView)
        self._matrix = self.query_one(AcceptMatrix)
        self._matrix.add_steps(self.steps)  # a resumed walk: the figures it has
        if not self._matrix.rows:  # only walks whose probes report figures have a matrix
            self.query_one("#walk-tabs", TabbedContent).hide_tab("tab-matrix")
        self.query_one(RunbookTree).focus()
        if self.steps:  # a resumed walk: its path so far
            self.query_one(RunbookTree).show(self.steps, self.current, "running")
        self.post_message(msg.WalkStarted(self.runbook.id, self.session,
                                          len(self.driver.walk.hosts)))
        # Probe events gathered on the walk thread reach the progress at least this often.
        self.set_interval(EVENTS_EVERY_S, self.driver.events.flush)
        self._start("run", self._first_run)

    def on_unmount(self) -> None:
        self.closing.set()
        self.driver.cancel()
        release_gc()
        if self.recorded and self.busy:  # the app closed mid-step: not "running" for ever
            threading.Thread(target=self._mark_interrupted, name="diag-interrupted").start()
        if self.owns_ctx:
            self.ctx.close()


    # --- engine messages -----------------------------------------------------------------------

    def on_step_entered(self, message: msg.StepEntered) -> None:
        node = self.runbook.node(message.event.node)
        self.current = node.id
        self.step_panel.enter(node, len(self.steps) + 1)
        self.query_one(RunbookTree).show(self.steps, node.id, "running")

    def on_probe_events(self, message: msg.ProbeEvents) -> None:
        progress = self._progress
        for event in message.events:
            if isinstance(event, ev.ProbeStarted):
                progress.started(event.probe, event.host)
            else:
                progress.finished(event.probe, event.host, event.state, event.reason)

    def on_figures_ready(self, message: msg.FiguresReady) -> None:
        """A test judged on one host: its cell fills in (painted by the matrix's timer)."""
        if not self._matrix.rows:
            self.query_one("#walk-tabs", TabbedContent).show_tab("tab-matrix")
            self.refresh_bindings()
        self._matrix.add(message.event.host, message.event.figures)

    def on_finding_raised(self, message: msg.FindingRaised) -> None:
        self.findings.add(message.event.finding)
        self._count_findings()

    def on_step_finished(self, message: msg.StepFinished) -> None:
        self.steps = list(message.event.state["steps"])
        self.current = message.event.state["current"]

    def on_action_decided(self, message: msg.ActionDecided) -> None:
        """Each host's result stays on the step (and goes to the conclusion): a toast alone
        would vanish before a tired operator read which host the drain failed on."""
        event = message.event
        if not event.command:
            return
        self.step_panel.notice(action_result_text(event))
        done = event.outcome == "done"
        self.notify(f"{event.node}: {event.outcome or event.result}", title="Action",
                    severity="information" if done else "warning", markup=False)

    def on_question_asked(self, message: msg.QuestionAsked) -> None:
        node = self.runbook.node(message.event.node)
        self.current = node.id
        self.step_panel.enter(node, len(self.steps) + 1)
        self.step_panel.about(message.event.hosts, len(self.driver.walk.hosts))
        self.step_panel.choices.ask(node)
        self.action_tab("walk")  # focuses the choices: arrows and Enter answer

    def on_answer_undone(self, message: msg.AnswerUndone) -> None:
        self.notify(f"answer to '{message.event.node}' taken back", markup=False)

    def on_conclusion_reached(self, message: msg.ConclusionReached) -> None:
        hint = Text.assemble(("m", "bold"), " copy as Markdown   ", ("s", "bold"),
                             f" save to {export_path(self.ctx.export_dir, self.session).name}")
        self.query_one(ConclusionView).show(message.event, self.kb_titles, hint)
        self.query_one(IncidentBar).concluded(message.event)
        self.action_tab("conclusion")

    def on_step_cancelled(self, message: msg.StepCancelled) -> None:
        self._progress.cancel_pending()
        self._progress.flush()
        self.step_panel.notice(Text.assemble(
            ("Cancelled. ", "bold magenta"), "Hosts that had not answered are 'cancelled'; "
            "the step was not taken. ", ("r", "bold"), " runs it again, ", ("u", "bold"),
            " takes back the last answer, ", ("Esc", "bold"), " leaves."))

    def on_walk_failed(self, message: msg.WalkFailed) -> None:
        self.step_panel.notice(join([Text("The walk stopped: ", style="bold red"),
                                     host_line(message.error), Text("  (r retries)")]))

    def on_screen_resume(self) -> None:
        # Back from a modal or an article: Textual restores the old focus, but the walk may
        # have moved on meanwhile (a conclusion arrives while the confirmation closes).
        active = self.query_one("#walk-tabs", TabbedContent).active or "tab-walk"
        self.call_after_refresh(self._focus_tab, active.removeprefix("tab-"))

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.refresh_bindings()  # the footer hides the key of the tab already shown

    def on_walk_idle(self, message: msg.WalkIdle) -> None:
        self.busy = False
        self._progress.flush()
        self._matrix.flush()
        self.steps = list(message.state["steps"])
        self.current = message.state["current"]
        self._set_status(message.status)
        self.query_one(RunbookTree).show(self.steps, self.current, message.status)
        self.findings.replace(Finding.from_dict(f) for step in self.steps
                              for outcome in step["outcomes"] for f in outcome["findings"])
        self._count_findings()
        if message.status != "concluded":
            self.query_one(ConclusionView).clear()

    def on_raw_output_requested(self, message: msg.RawOutputRequested) -> None:
        from .raw_output import RawOutputScreen

        self.app.push_screen(RawOutputScreen(message.probe, message.hosts,
                                             self.driver.provider.raw, self.driver.walk.hosts))

    def on_answer_chosen(self, message: msg.AnswerChosen) -> None:
        if self.busy or self.status != "waiting" or message.node != self.current:
            return
        self.step_panel.choices.close()
        self._start("answer", lambda: self.driver.answer(message.node, message.choice))

    def _count_findings(self) -> None:
        tabs = self.query_one("#walk-tabs", TabbedContent)
        tabs.get_tab("tab-findings").label = f"Findings ({self.findings.rows})"  # as folded
