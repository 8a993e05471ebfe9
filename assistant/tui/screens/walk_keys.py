"""The walk screen's keys: what each does and when it is offered (cancel, answer, undo,
retry, the tabs, leaving, the conclusion's export and the incident's close).

A mixin of ``WalkScreen`` (``walk.py``), split from it by job; the bindings themselves stay on
the screen, which the drill's walk screen extends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.widgets import TabbedContent

from assistant.runbook.model import Runbook
from assistant.runbook.report import walk_document

from .. import messages as msg
from ..context import DiagContext
from ..export import export_path, walk_markdown
from ..walk_driver import WalkDriver
from ..widgets.accept_matrix import AcceptMatrix
from ..widgets.findings_view import FindingsView
from ..widgets.incident_bar import IncidentBar
from ..widgets.step_panel import StepPanel
from .confirm import ConfirmationModal

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen[None]
else:
    _Screen = object


class WalkKeys(_Screen):
    """The key actions of ``WalkScreen`` (which sets these attributes up)."""

    ctx: DiagContext
    driver: WalkDriver
    runbook: Runbook
    session: str
    recorded: bool
    status: str
    busy: bool
    steps: list[dict[str, Any]]
    current: str | None
    cancel_event: threading.Event
    kb_titles: dict[str, str]
    _matrix: AcceptMatrix
    _step_panel: StepPanel
    _findings: FindingsView
    _start: Callable[[str, Callable[[], object]], None]

    @property
    def step_panel(self) -> StepPanel:
        return self._step_panel

    @property
    def findings(self) -> FindingsView:
        return self._findings

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
        """The walk as Markdown for a ticket or a chat: it leaves diag, so it is redacted as
        the store is (host output in the evidence can carry a token)."""
        from assistant.store.redact import redact_text

        doc = walk_document(self.driver.walk, self.session)  # idle: the thread is not writing
        return redact_text(walk_markdown(doc, self.runbook.title, self.kb_titles))

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

