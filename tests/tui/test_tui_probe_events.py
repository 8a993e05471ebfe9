"""Per-host probe events reach the walk screen gathered (walk_driver.ProbeEventBatcher).

One message per host and probe cost the walk's thread a post and the event loop a dispatch
each (``bench/tui.py``); gathered, they must still arrive complete, in order, before any later
message, and without waiting for a slow last host.
"""

from __future__ import annotations

from textual.message import Message

from assistant.runbook import events as ev
from assistant.tui import messages as m
from assistant.tui.walk_driver import BATCH_MAX, ProbeEventBatcher


def _flat(posted: list[Message]) -> list[object]:
    out: list[object] = []
    for message in posted:
        if isinstance(message, m.ProbeEvents):
            out.extend(message.events)
        else:
            out.append(message.event if isinstance(message, m.EngineEvent) else message)
    return out


def test_probe_events_are_gathered_and_keep_their_place() -> None:
    posted: list[Message] = []
    batcher = ProbeEventBatcher(posted.append)
    events: list[ev.Event] = [ev.StepEntered("check-gpu", "probe", "GPUs")]
    events += [ev.ProbeStarted("gpu", f"h{i}") for i in range(3)]
    events += [ev.ProbeFinished("gpu", f"h{i}", "ok") for i in range(3)]
    events += [ev.BranchTaken("check-gpu", "done", "nothing found")]
    for event in events:
        batcher(event)
    assert _flat(posted) == events  # all of them, in order
    assert [type(p) for p in posted] == [m.StepEntered, m.ProbeEvents, m.BranchTaken]


def test_gathered_events_go_out_on_flush_and_when_many() -> None:
    posted: list[Message] = []
    batcher = ProbeEventBatcher(posted.append)
    batcher(ev.ProbeStarted("gpu", "slow-host"))
    batcher(ev.ProbeFinished("gpu", "h1", "ok"))
    assert posted == []
    batcher.flush()  # the screen's timer: a slow last host holds back nobody's progress
    assert len(posted) == 1 and len(posted[0].events) == 2  # type: ignore[attr-defined]
    batcher.flush()
    assert len(posted) == 1  # nothing new: nothing sent
    for i in range(BATCH_MAX):
        batcher(ev.ProbeFinished("gpu", f"h{i}", "ok"))
    assert len(posted) == 2
    batcher.send(m.WalkBusy("run"))  # the screen's own messages wait for nothing either
    assert isinstance(posted[-1], m.WalkBusy)
