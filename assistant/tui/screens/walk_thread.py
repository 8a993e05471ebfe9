"""The walk screen's walk thread: each operation (run, answer, undo, retry) runs the engine
off the UI thread, records the walk, asks for confirmations and says when the store refuses.

A mixin of ``WalkScreen`` (``walk.py``), split from it by job: the screen reacts to the
engine's messages, this drives the thread that posts them, ``walk_keys.py`` answers the keys.
Nothing here runs on the event loop except ``_start`` and ``_set_status``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import work
from textual.content import Content
from textual.widgets import Static

from assistant.probeworker import WorkerError
from assistant.runbook.engine import WalkError
from assistant.runbook.model import Node
from assistant.walks import Recording

from .. import messages as msg
from ..context import DiagContext
from ..walk_driver import WalkDriver, keep_gc_off_the_loop, yield_to_the_ui
from ..widgets.incident_bar import IncidentBar
from .confirm import action_confirmation

if TYPE_CHECKING:
    from textual.screen import Screen

    _Screen = Screen[None]
else:
    _Screen = object

# Theme variables, not ANSI names: a status badge must read in textual-dark and -light alike.
STATUS_STYLE = {"running": "bold $text-warning", "waiting": "bold $text-accent",
                "concluded": "bold $text-success", "cancelled": "bold $text-secondary",
                "failed": "bold $text-error", "ready": "bold"}


class WalkThread(_Screen):
    """The walk thread's side of ``WalkScreen`` (which sets these attributes up)."""

    ctx: DiagContext
    driver: WalkDriver
    symptom: str
    session: str
    resumed_session: str | None
    recorded: bool
    recording: Recording | None
    store_warned: bool
    status: str
    busy: bool
    closing: threading.Event

    def _set_status(self, status: str) -> None:
        self.status = status
        label = {"running": "running…", "waiting": "waiting for you"}.get(status, status)
        self.query_one("#walk-status", Static).update(
            Content.styled(f" {label} ", STATUS_STYLE.get(status, "")))
        self.refresh_bindings()

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
            self.driver.post(msg.WalkFailed(str(exc)))
        except Exception as exc:  # a bug or a broken transport must not take the app down
            self.driver.post(msg.WalkFailed(f"{type(exc).__name__}: {exc}"))
        self.driver.post(msg.WalkIdle(status, self.driver.snapshot()))

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
        """On the walk thread: put the modal up on the UI thread; *reply* gets the answer.

        Through the screen's own queue, behind the step's findings the thread posted before:
        the operator confirms with the evidence for the action on screen (``call_from_thread``
        could put the modal up before the screen had shown them)."""
        if not self.post_message(msg.ConfirmationDue(node, hosts, reply)):
            reply(False)  # the screen is closing: that is a no

    def on_confirmation_due(self, message: msg.ConfirmationDue) -> None:
        message.stop()
        self._open_confirmation(message.node, message.hosts, message.reply)

    def _open_confirmation(self, node: Node, hosts: tuple[str, ...],
                           reply: Callable[[bool], None]) -> None:
        self.post_message(msg.ConfirmationRequested(node.id, node.command or "", hosts))

        def answered(confirmed: bool | None) -> None:
            self.post_message(msg.ConfirmationAnswered(node.id, bool(confirmed)))
            reply(bool(confirmed))

        self.app.push_screen(action_confirmation(node, hosts, simulated=self.ctx.simulated),
                             answered)

    def _mark_interrupted(self) -> None:
        """Off the UI thread (the store may be busy): once the walk thread has stopped,
        record the session as interrupted; ``diag --resume`` continues it. (The cancelled
        step is not taken, so the walk thread writes nothing after this.) Through the walk's
        own recording, as ``diag accept`` does: the store it was recorded in (``--db``, not
        the default one), or its journal when that store refuses writes."""
        recording = self.recording
        if recording is None:
            return
        with contextlib.suppress(Exception):
            recording.recorder.submit({"op": "status", "status": "interrupted"})
