"""The walk: a runbook walked step by step against the fleet, live.

The engine runs on a thread worker (``WalkDriver``); this screen only reacts to the messages it
posts, so a 128-host fan-out never blocks a keypress. Escape or Ctrl-C during a probe step sets
the provider's cancel event: unfinished hosts end ``cancelled`` and the walk waits on the same
step (``r`` runs it again). Tabs keep 80x24 usable: the walk (tree + step), the findings table,
the conclusion, and — shown once a probe reports figures (an acceptance walk) — the node x test
matrix filling in live.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from assistant.kb import load_articles
from assistant.probeworker import WorkerError
from assistant.runbook.engine import WalkError
from assistant.runbook.model import Node, Runbook
from assistant.runbook.report import walk_document
from assistant.walks import Recording
from probes.model import Finding

from .. import messages as msg
from ..context import DiagContext
from ..export import export_path, walk_markdown
from ..safe_text import host_line, join
from ..walk_driver import (
    Confirmation,
    WalkDriver,
    keep_gc_off_the_loop,
    release_gc,
    yield_to_the_ui,
)
from ..widgets.accept_matrix import AcceptMatrix
from ..widgets.conclusion_view import ConclusionView, action_result_text
from ..widgets.findings_view import FindingsView
from ..widgets.incident_bar import IncidentBar
from ..widgets.runbook_tree import RunbookTree
from ..widgets.step_panel import StepPanel
from .confirm import ConfirmationModal, action_confirmation

# Theme variables, not ANSI names: a status badge must read in textual-dark and -light alike.
STATUS_STYLE = {"running": "bold $text-warning", "waiting": "bold $text-accent",
                "concluded": "bold $text-success", "cancelled": "bold $text-secondary",
                "failed": "bold $text-error", "ready": "bold"}


class WalkScreen(Screen[None]):
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
        self._start("run", self._first_run)

    def on_unmount(self) -> None:
        self.closing.set()
        self.driver.cancel()
        release_gc()
        if self.recorded and self.busy:  # the app closed mid-step: not "running" for ever
            threading.Thread(target=self._mark_interrupted, name="diag-interrupted").start()
        if self.owns_ctx:
            self.ctx.close()

    def _mark_interrupted(self) -> None:
        """Off the UI thread (the store may be busy): once the walk thread has stopped,
        record the session as interrupted; ``diag --resume`` continues it. (The cancelled
        step is not taken, so the walk thread writes nothing after this.)"""
        with contextlib.suppress(Exception):
            from assistant.store import Store, writes

            Store().write(lambda con: writes.set_status(con, self.session, "interrupted"))

    @property
    def step_panel(self) -> StepPanel:
        return self._step_panel

    @property
    def findings(self) -> FindingsView:
        return self._findings

    def _set_status(self, status: str) -> None:
        self.status = status
        label = {"running": "running…", "waiting": "waiting for you"}.get(status, status)
        self.query_one("#walk-status", Static).update(
            Content.styled(f" {label} ", STATUS_STYLE.get(status, "")))
        self.refresh_bindings()

    # --- the walk thread -----------------------------------------------------------------------

    def _start(self, operation: str, op: Callable[[], object]) -> None:
        self.busy = True
        self._set_status("running")
        self._drive(operation, op)

    @work(thread=True, group="walk", exit_on_error=False)
    def _drive(self, operation: str, op: Callable[[], object]) -> None:
        yield_to_the_ui()
        keep_gc_off_the_loop()
        self.post_message(msg.WalkBusy(operation))
        status = "failed"
        try:
            result = op()
            status = "cancelled" if result == "cancelled" else self.driver.walk.status
            if status == "concluded":
                self._import_journal()
        except (WalkError, WorkerError) as exc:  # a misuse, or the probe worker's own words
            self.post_message(msg.WalkFailed(str(exc)))
        except Exception as exc:  # a bug or a broken transport must not take the app down
            self.post_message(msg.WalkFailed(f"{type(exc).__name__}: {exc}"))
        self.post_message(msg.WalkIdle(status, self.driver.snapshot()))

    def _first_run(self) -> str:
        try:
            recording = self.ctx.record(self.driver.walk, self.driver.provider,
                                        symptom=self.symptom, on_error=self._store_refused,
                                        session=self.resumed_session)
        except Exception as exc:  # a busy or broken store must not stop a 3 a.m. walk
            recording = None
            self.app.call_from_thread(self.notify, f"this walk is not recorded: {exc}",
                                      severity="warning", markup=False)
        if recording is not None:
            self.recording = recording
            self.session, self.recorded = recording.session, True
            self.app.call_from_thread(self.query_one(IncidentBar).recorded,
                                      recording.incident, recording.joined)
        return self.driver.run()

    def _import_journal(self) -> None:
        """On the walk thread, at the conclusion: a walk kept in the journal (the store
        refused it) goes into the store now if it can; else the operator hears where it is."""
        recording = self.recording
        if recording is None or not recording.recorder.journalled:
            return
        if recording.flush():
            note = "the store took this walk's journal: every step is recorded"
        else:
            note = (f"the store still refuses this walk; it is kept in "
                    f"{recording.recorder.journal.path} (`diag store recover` imports it)")
        with contextlib.suppress(RuntimeError):
            self.app.call_from_thread(self.notify, note, title="Store", markup=False)

    def _store_refused(self, exc: Exception) -> None:
        """On the walk thread: the store refused a step (busy, full); said once per walk."""
        if self.store_warned:
            return
        self.store_warned = True
        with contextlib.suppress(RuntimeError):  # the app is shutting down
            self.app.call_from_thread(
                self.notify, f"{exc}; steps are kept and written when the store is free",
                title="Store", severity="warning", markup=False)

    def _ask_confirmation(self, node: Node, hosts: tuple[str, ...],
                          reply: Callable[[bool], None]) -> None:
        """On the walk thread: put the modal up on the UI thread; *reply* gets the answer."""
        try:
            self.app.call_from_thread(self._open_confirmation, node, hosts, reply)
        except RuntimeError:  # the app is shutting down: that is a no
            reply(False)

    def _open_confirmation(self, node: Node, hosts: tuple[str, ...],
                           reply: Callable[[bool], None]) -> None:
        self.post_message(msg.ConfirmationRequested(node.id, node.command or "", hosts))

        def answered(confirmed: bool | None) -> None:
            self.post_message(msg.ConfirmationAnswered(node.id, bool(confirmed)))
            reply(bool(confirmed))

        self.app.push_screen(action_confirmation(node, hosts, simulated=self.ctx.simulated),
                             answered)

    # --- engine messages -----------------------------------------------------------------------

    def on_step_entered(self, message: msg.StepEntered) -> None:
        node = self.runbook.node(message.event.node)
        self.current = node.id
        self.step_panel.enter(node, len(self.steps) + 1)
        self.query_one(RunbookTree).show(self.steps, node.id, "running")

    def on_probe_started(self, message: msg.ProbeStarted) -> None:
        self._progress.started(message.event.probe, message.event.host)

    def on_probe_finished(self, message: msg.ProbeFinished) -> None:
        event = message.event
        self._progress.finished(event.probe, event.host, event.state, event.reason)

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
        tabs.get_tab("tab-findings").label = f"Findings ({len(self.findings.findings)})"

    # --- actions -------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return self.busy  # idle: Ctrl-C falls through to the app (and to inputs' copy)
        if action == "answer":
            return self.status == "waiting" and not self.busy
        if action == "retry":
            return self.status in ("cancelled", "failed") and not self.busy
        if action == "undo":
            return not self.busy and any(s["kind"] == "question" and s.get("answer")
                                         for s in self.steps)
        if action == "back":
            return not self.busy
        if action == "tab":
            active = self.query_one("#walk-tabs", TabbedContent).active
            if parameters and active == f"tab-{parameters[0]}":
                return False
            if parameters == ("matrix",):
                return bool(self._matrix.rows)
            return parameters != ("conclusion",) or self.status == "concluded"
        if action in ("copy_markdown", "save_markdown"):
            return self.status == "concluded"
        if action == "close_incident":
            return self.status == "concluded" and self.query_one(IncidentBar).can_close
        return True

    def action_cancel(self) -> None:
        if self.busy and not self.cancel_event.is_set():
            self.driver.cancel()
            self.notify("cancelling the running step…", timeout=3)

    def action_back(self) -> None:
        """Escape when idle (when busy, Escape cancels): leave, asking first if unfinished."""
        if self.busy:
            return
        if self.status == "concluded" or not self.steps:
            self.app.pop_screen()
        elif self.recorded:
            waiting = f"waits on '{self.current}'" if self.status == "waiting" else \
                "has not reached a conclusion"
            body = Text.assemble(f"This walk {waiting}. It is kept: open it again from Recent "
                                 "incidents on the home screen, or run ",
                                 (f"diag --resume {self.session}", "bold"), ".")
            self.app.push_screen(ConfirmationModal("Leave this walk?", body, yes="Leave",
                                                   no="Stay"), self._leave_if)
        else:
            body = Text("This walk has not reached a conclusion and is not recorded (no "
                        "incident store yet): leaving loses its findings.")
            self.app.push_screen(ConfirmationModal("Leave this walk?", body, yes="Leave",
                                                   no="Stay"), self._leave_if)

    def _leave_if(self, leave: bool | None) -> None:
        if leave:
            self.app.pop_screen()

    def action_answer(self, number: int) -> None:
        node = self.runbook.node(self.current) if self.current else None
        if node is not None and node.kind == "question" and 1 <= number <= len(node.choices):
            self.post_message(msg.AnswerChosen(node.id, node.choices[number - 1].id))

    def action_undo(self) -> None:
        if self.busy:
            return
        if not any(s["kind"] == "question" and s.get("answer") for s in self.steps):
            self.notify("nothing to undo: no question answered yet", severity="warning")
            return
        self._start("undo", self.driver.undo)

    def action_retry(self) -> None:
        if not self.busy and self.status in ("cancelled", "failed"):
            self._start("retry", self.driver.run)

    def action_tab(self, name: str, focus: bool = True) -> None:
        tabs = self.query_one("#walk-tabs", TabbedContent)
        if tabs.active != f"tab-{name}":
            # Drop the focus first: a focused widget in the pane being hidden would hand it
            # to a sibling in that same pane, and TabbedContent follows focus right back.
            self.set_focus(None)
        tabs.active = f"tab-{name}"
        if focus:
            self.call_after_refresh(self._focus_tab, name)  # the pane shows after this refresh

    def _focus_tab(self, name: str, tries: int = 20) -> None:
        """Focus the tab's main widget once it can take focus: a pane just switched to, or
        a screen just resumed from a modal, only joins the focus chain a refresh or two later."""
        if self.query_one("#walk-tabs", TabbedContent).active != f"tab-{name}":
            return  # the operator moved on meanwhile
        target = {"walk": "#walk-tree", "findings": "#findings-table",
                  "conclusion": "#kb-links", "matrix": "#matrix-table"}[name]
        if name == "walk" and self.step_panel.choices.display:
            target = "#choices"  # a question is waiting: arrows and Enter answer it
        widget = self.query_one(target)
        if widget in self.focus_chain:
            if self.focused is not widget:
                widget.focus(scroll_visible=False)  # keep the conclusion's title in view
            self.refresh_bindings()
        elif tries and widget.display:
            self.set_timer(0.05, lambda: self._focus_tab(name, tries - 1))

    def action_filter(self) -> None:
        self.action_tab("findings", focus=False)
        self.call_after_refresh(self.findings.focus_filter)

    def action_read_step(self) -> None:
        """The current step's first KB article (the conclusion's, once concluded)."""
        node_id = self.current or (self.steps[-1]["node"] if self.steps else None)
        node = self.runbook.node(node_id) if node_id else None
        articles = (node.kb if node and node.kb else self.runbook.kb)
        if articles:
            self.post_message(msg.ArticleChosen(articles[0]))

    def _markdown(self) -> str:
        doc = walk_document(self.driver.walk, self.session)  # idle: the thread is not writing
        return walk_markdown(doc, self.runbook.title, self.kb_titles)

    def action_close_incident(self) -> None:
        self.query_one(IncidentBar).close_incident()
        self.refresh_bindings()

    def action_copy_markdown(self) -> None:
        if self.status != "concluded" or self.busy:
            return
        markdown = self._markdown()
        self.app.copy_to_clipboard(markdown)
        self.post_message(msg.ConclusionExported("", markdown))
        self.notify("conclusion copied as Markdown (your terminal must allow OSC 52)")

    def action_save_markdown(self) -> None:
        if self.status != "concluded" or self.busy:
            return
        markdown = self._markdown()
        path = export_path(self.ctx.export_dir, self.session)
        try:
            path.write_text(markdown, encoding="utf-8")
        except OSError as exc:
            self.notify(f"could not save {path}: {exc.strerror}", severity="error", markup=False)
            return
        self.post_message(msg.ConclusionExported(str(path), markdown))
        self.notify(f"saved {path}", title="Conclusion exported", markup=False)
