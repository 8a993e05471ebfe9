"""Every message the TUI sends, typed, in one module.

Widgets and the walk thread talk to screens and the app through these, never by reaching into
each other; tests assert on them with ``run_test(message_hook=...)``. Engine events arrive as
``EngineEvent`` subclasses named after the core event they carry (``messages.ProbeFinished``
carries an ``assistant.runbook.events.ProbeFinished``), posted from the walk's thread with
``post_message`` (thread-safe).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.message import Message

from assistant.match import Result
from assistant.runbook import events as ev
from assistant.runbook.model import Node
from probes.model import Finding

# --- home --------------------------------------------------------------------------------------


class MatchesUpdated(Message):
    """The symptom box was ranked: *results* best first (empty query: every runbook)."""

    def __init__(self, query: str, results: tuple[Result, ...]) -> None:
        super().__init__()
        self.query = query
        self.results = results


class RunbookChosen(Message):
    """Walk this runbook for this symptom (the app opens a walk screen)."""

    def __init__(self, runbook_id: str, symptom: str = "") -> None:
        super().__init__()
        self.runbook_id = runbook_id
        self.symptom = symptom


class ArticleChosen(Message):
    """Read this KB article (the app opens it)."""

    def __init__(self, article_id: str) -> None:
        super().__init__()
        self.article_id = article_id


class IncidentChosen(Message):
    """An incident picked on the home screen: the app opens the incident screen on it."""

    def __init__(self, incident_id: str) -> None:
        super().__init__()
        self.incident_id = incident_id


class IncidentWalksLoaded(Message):
    """One incident's walks (``hooks.incident_walks``), or *error*."""

    def __init__(self, incident_id: str, detail: dict[str, Any], error: str = "") -> None:
        super().__init__()
        self.incident_id = incident_id
        self.detail = detail
        self.error = error


class ResumeRequested(Message):
    """Continue a recorded walk in the TUI: *saved* is its session (with the target it used),
    *state* the walk to resume from (``walks.load_saved``), *ctx* the context over the hosts
    it used (``DiagContext.for_session``)."""

    def __init__(self, saved: dict[str, Any], state: dict[str, Any], ctx: Any) -> None:
        super().__init__()
        self.saved = saved
        self.state = state
        self.ctx = ctx


# --- history and the node view -----------------------------------------------------------------


class HistoryLoaded(Message):
    """The store answered the history screen's filters (*filters* as sent; *result* is
    ``history.history``'s dict, or empty with *error* set)."""

    def __init__(self, filters: dict[str, str], result: dict[str, Any], error: str = "") -> None:
        super().__init__()
        self.filters = filters
        self.result = result
        self.error = error


class IncidentDetailLoaded(Message):
    """One incident's sessions and findings (``hooks.incident_detail``)."""

    def __init__(self, incident_id: str, detail: dict[str, Any], error: str = "") -> None:
        super().__init__()
        self.incident_id = incident_id
        self.detail = detail
        self.error = error


class NodeChosen(Message):
    """Open the node view of *host* (its past findings and incidents)."""

    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host


class NodeLoaded(Message):
    """The node view's data (``hooks.node_history``)."""

    def __init__(self, host: str, data: dict[str, Any], error: str = "") -> None:
        super().__init__()
        self.host = host
        self.data = data
        self.error = error


# --- the engine, relayed -----------------------------------------------------------------------


class EngineEvent(Message):
    """A walk event from the engine; ``event`` is the core's frozen dataclass."""

    def __init__(self, event: ev.Event) -> None:
        super().__init__()
        self.event = event


class StepEntered(EngineEvent):
    event: ev.StepEntered


class StepFinished(EngineEvent):
    event: ev.StepFinished


class ProbeStarted(EngineEvent):
    event: ev.ProbeStarted


class ProbeFinished(EngineEvent):
    event: ev.ProbeFinished


class FiguresReady(EngineEvent):
    """An acceptance test judged on one host: the walk screen's matrix fills in from it."""

    event: ev.FiguresReady


class FindingRaised(EngineEvent):
    event: ev.FindingRaised


class BranchTaken(EngineEvent):
    event: ev.BranchTaken


class QuestionAsked(EngineEvent):
    event: ev.QuestionAsked


class AnswerGiven(EngineEvent):
    event: ev.AnswerGiven


class AnswerUndone(EngineEvent):
    event: ev.AnswerUndone


class ActionDecided(EngineEvent):
    event: ev.ActionDecided


class ConclusionReached(EngineEvent):
    event: ev.ConclusionReached


class ProbeEvents(Message):
    """Several hosts' ProbeStarted / ProbeFinished events, in order, as one message.

    A 128-host probe is 256 such events and a 512-host one 1,024: one message each cost the
    walk's thread a post and the event loop a dispatch per host (``bench/tui.py``). The walk
    driver gathers them (``walk_driver.ProbeEventBatcher``) and sends them together, always
    before the next message of any other kind."""

    def __init__(self, events: tuple[ev.ProbeStarted | ev.ProbeFinished, ...]) -> None:
        super().__init__()
        self.events = events

    def messages(self) -> list[EngineEvent]:
        """Each event as the message it would have been on its own."""
        return [relay(event) for event in self.events]


_RELAY: dict[type[ev.Event], type[EngineEvent]] = {
    ev.StepEntered: StepEntered, ev.StepFinished: StepFinished, ev.ProbeStarted: ProbeStarted,
    ev.ProbeFinished: ProbeFinished, ev.FiguresReady: FiguresReady,
    ev.FindingRaised: FindingRaised,
    ev.BranchTaken: BranchTaken, ev.QuestionAsked: QuestionAsked, ev.AnswerGiven: AnswerGiven,
    ev.AnswerUndone: AnswerUndone, ev.ActionDecided: ActionDecided,
    ev.ConclusionReached: ConclusionReached,
}


def relay(event: ev.Event) -> EngineEvent:
    """The message for an engine event (an unknown future event type still gets through)."""
    return _RELAY.get(type(event), EngineEvent)(event)


# --- the walk, as the UI drives it -------------------------------------------------------------


class WalkStarted(Message):
    def __init__(self, runbook_id: str, session: str, hosts: int) -> None:
        super().__init__()
        self.runbook_id = runbook_id
        self.session = session
        self.hosts = hosts


class WalkBusy(Message):
    """The walk's thread started an operation: "run", "answer", "undo" or "retry"."""

    def __init__(self, operation: str) -> None:
        super().__init__()
        self.operation = operation


class WalkIdle(Message):
    """The walk's thread is done for now. *status*: ready, waiting, concluded, cancelled or
    failed; *state* is ``Walk.to_dict()`` taken on that thread, safe to read on the UI's."""

    def __init__(self, status: str, state: dict[str, Any]) -> None:
        super().__init__()
        self.status = status
        self.state = state


class StepCancelled(Message):
    """The running step was cancelled: its hosts ended ``cancelled``, the walk waits on it."""

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node


class WalkFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class AnswerChosen(Message):
    """The operator chose *choice* for question *node* (keys 1-9, Enter or a click)."""

    def __init__(self, node: str, choice: str) -> None:
        super().__init__()
        self.node = node
        self.choice = choice


class ConfirmationDue(Message):
    """The walk thread waits on an action's confirmation; the screen puts the modal up when
    it reaches this message (after the findings posted before it), and *reply* gets the answer."""

    def __init__(self, node: Node, hosts: tuple[str, ...],
                 reply: Callable[[bool], None]) -> None:
        super().__init__()
        self.node = node
        self.hosts = hosts
        self.reply = reply


class ConfirmationRequested(Message):
    """An action wants to run *command* on *hosts*; the modal is up, the walk waits."""

    def __init__(self, node: str, command: str, hosts: tuple[str, ...]) -> None:
        super().__init__()
        self.node = node
        self.command = command
        self.hosts = hosts


class ConfirmationAnswered(Message):
    def __init__(self, node: str, confirmed: bool) -> None:
        super().__init__()
        self.node = node
        self.confirmed = confirmed


class FindingSelected(Message):
    """A finding row was highlighted: its evidence is shown."""

    def __init__(self, finding: Finding) -> None:
        super().__init__()
        self.finding = finding


class RawOutputRequested(Message):
    """Show what *hosts* printed for *probe* (from the selected finding)."""

    def __init__(self, probe: str, hosts: tuple[str, ...]) -> None:
        super().__init__()
        self.probe = probe
        self.hosts = hosts


class ConclusionExported(Message):
    """The conclusion was saved as Markdown (*path*) or copied (*path* empty)."""

    def __init__(self, path: str, markdown: str) -> None:
        super().__init__()
        self.path = path
        self.markdown = markdown


# --- drills ------------------------------------------------------------------------------------


class HintShown(Message):
    """The trainee asked for a hint (``i``): *text* was shown; the drill counts it."""

    def __init__(self, text: str, hints: int) -> None:
        super().__init__()
        self.text = text
        self.hints = hints


class DrillScored(Message):
    """The drill's walk concluded: *score* (``store.drills.DrillScore``) was written (unless
    *error*), *past* are the trainee's drills newest first, this one included."""

    def __init__(self, score: Any, past: list[dict[str, Any]], error: str = "") -> None:
        super().__init__()
        self.score = score
        self.past = past
        self.error = error
