"""One walk, driven off the UI thread, reported as messages.

The engine is synchronous and blocking (probes fan out over SSH for seconds); the screen runs
each operation (run, answer, undo, retry) in a thread worker through this driver and learns
what happens only from the messages it posts. Two things the core does not do for a UI live
here:

- **Cancel.** ``FleetProvider`` ends a cancelled fan-out with every unfinished host
  ``cancelled`` and returns normally, and the engine would then branch on that empty data.
  ``CancellableProvider`` raises ``StepCancelled`` instead, which the engine treats as a step
  not taken (it pops it): the walk waits on the same node, ready to run it again.
- **Confirm.** The engine asks ``confirm(node, hosts)`` on its own thread; ``Confirmation``
  parks that thread on an Event until the modal on the UI thread answers (Escape = no).
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from textual.message import Message

from assistant.runbook import events as ev
from assistant.runbook.engine import ActionRunner
from assistant.runbook.model import Node, Runbook
from probes.model import ProbeOutcome

from . import messages as msg


class StepCancelled(Exception):
    """The operator cancelled the running probe step."""


class CancellableProvider:
    """Wraps a FleetProvider: probes run one by one, and a cancel ends the step untaken."""

    def __init__(self, inner: Any, cancel: threading.Event) -> None:
        self.inner = inner
        self.cancel = cancel

    @property
    def raw(self) -> Any:
        return self.inner.raw

    @property
    def prepared(self) -> Any:
        """The store's rows the probe worker made for its runs (None in-process)."""
        return getattr(self.inner, "prepared", None)

    @property
    def prior_samples(self) -> Any:
        """The soak rounds a resumed walk took before: the wrapped provider samples."""
        return getattr(self.inner, "prior_samples", {})

    @prior_samples.setter
    def prior_samples(self, value: Any) -> None:
        self.inner.prior_samples = value

    def run_sweep(self, components: Sequence[str], hosts: Sequence[str],
                  params: Mapping[str, Mapping[str, Any]],
                  emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        outcomes = self.inner.run_sweep(components, hosts, params, emit)
        if self.cancel.is_set():
            raise StepCancelled()
        return list(outcomes)

    def run_probes(self, probes: Sequence[str], hosts: Sequence[str],
                   params: Mapping[str, Mapping[str, Any]],
                   emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        from assistant.runbook.provider import run_in_order

        outcomes = run_in_order(self.inner.run_probe, probes, hosts, params, emit, self.cancel)
        if self.cancel.is_set():
            raise StepCancelled()
        return outcomes


class Confirmation:
    """The engine's ``confirm`` callback, answered by a modal on the UI thread.

    *ask* is called on the walk thread with (node, hosts, reply) and must arrange for
    ``reply(bool)`` to be called on any thread; the walk thread waits, giving up (= no) when
    the walk is cancelled or the screen goes away.
    """

    def __init__(self, ask: Callable[[Node, tuple[str, ...], Callable[[bool], None]], None],
                 give_up: threading.Event, *also: threading.Event) -> None:
        self.ask = ask
        self.give_up = (give_up, *also)

    def __call__(self, node: Node, hosts: tuple[str, ...]) -> bool:
        answered = threading.Event()
        answer = [False]

        def reply(value: bool) -> None:
            answer[0] = bool(value)
            answered.set()

        self.ask(node, hosts, reply)
        while not answered.wait(0.05):
            if any(event.is_set() for event in self.give_up):
                return False
        return answer[0]


def yield_to_the_ui(niceness: int = 10) -> None:
    """Lower the calling thread's CPU priority (Linux: nice is per thread, and threads it
    starts — the fan-out's pool — inherit it).

    The walk parses probe output on up to 64 fan-out threads; under the GIL they compete with
    the event loop, and on a two-core login node the loop lost often enough to stall the screen
    for a third of a second (``bench/tui.py``). Niced, they still get every idle cycle.
    """
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or not allowed: as is
        base = os.getpriority(os.PRIO_PROCESS, os.getpid())  # the main thread's
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, base + niceness))


def keep_gc_off_the_loop() -> None:
    """Move every object alive now out of the cyclic garbage collector's reach (``gc.freeze``).

    A full collection walks every tracked object while it holds the GIL, and in the TUI's
    process that is Textual's whole DOM plus the walk's facts: on the walk's thread it stalled
    the event loop 280-760 ms at 128 hosts (``bench/tui.py``). Called when the app is ready,
    when a walk starts and after each step, so collections only walk what is new since; plain
    reference counting still frees everything (only garbage in reference cycles among frozen
    objects waits). ``release_gc`` hands a walk's objects back when the walk is left.
    """
    gc.freeze()


def release_gc() -> None:
    """Give the frozen objects back to the collector (the walk is over: a pause is harmless)."""
    gc.unfreeze()


BATCH_MAX = 256  # probe events gathered before they are sent anyway (one 128-host probe)


class ProbeEventBatcher:
    """The walk's events as messages, its per-host probe events gathered into ``ProbeEvents``.

    Gathered events go out when any other event comes (so every message keeps its order),
    when ``BATCH_MAX`` are waiting, and when ``flush`` is called: the screen calls it on a
    short timer (a slow last host must not hold back the others' progress) and before it
    posts its own messages from the walk thread."""

    def __init__(self, post: Callable[[Message], Any]) -> None:
        self._post = post
        self._lock = threading.Lock()
        self._pending: list[ev.ProbeStarted | ev.ProbeFinished] = []

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.ProbeStarted | ev.ProbeFinished):
            with self._lock:
                self._pending.append(event)
                if len(self._pending) >= BATCH_MAX:
                    self._flush()
            return
        self.send(msg.relay(event))

    def send(self, message: Message) -> None:
        """Post *message* after the probe events gathered before it."""
        with self._lock:
            self._flush()
            self._post(message)

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            batch, self._pending = tuple(self._pending), []
            self._post(msg.ProbeEvents(batch))


class WalkDriver:
    """Owns the Walk and its provider; every method but ``cancel`` runs on the walk thread."""

    def __init__(self, runbook: Runbook, hosts: Sequence[str], provider: Any,
                 cancel: threading.Event, post: Callable[[Message], Any],
                 confirm: Callable[[Node, tuple[str, ...]], bool],
                 run_action: ActionRunner | None = None,
                 saved_state: Mapping[str, Any] | None = None) -> None:
        """*run_action*: how a confirmed action runs (``walks.action_runner``: the CLI's);
        *saved_state*: a recorded walk to resume (``Walk.to_dict()``)."""
        self.cancel_event = cancel
        self.events = ProbeEventBatcher(post)
        self.provider = CancellableProvider(provider, cancel)
        from assistant.walks import build_walk

        self.walk = build_walk(runbook, hosts, self.provider, listeners=[self._relay],
                               confirm=confirm, run_action=run_action, saved_state=saved_state)

    def _relay(self, event: ev.Event) -> None:
        self.events(event)
        if isinstance(event, ev.StepFinished):
            keep_gc_off_the_loop()

    # --- on the walk thread -------------------------------------------------------------------

    def post(self, message: Message) -> None:
        """Post *message* after the probe events gathered before it (any thread)."""
        self.events.send(message)

    def run(self) -> str:
        """Advance until a question, a conclusion or a cancel; return the status."""
        self.cancel_event.clear()
        try:
            return self.walk.run()
        except StepCancelled:
            self.post(msg.StepCancelled(self.walk.current or ""))
            return "cancelled"

    def answer(self, node: str, choice: str) -> str:
        self.walk.answer(node, choice)
        return self.run()

    def undo(self) -> bool:
        return self.walk.undo()

    def snapshot(self) -> dict[str, Any]:
        return self.walk.to_dict()

    # --- from any thread ----------------------------------------------------------------------

    def cancel(self) -> None:
        self.cancel_event.set()
