"""An acceptance walk interrupted during its L4 soak and resumed with ``--resume`` (the
``walks.load_saved`` seam the CLI and the TUI share) goes on where it stopped: the rounds
recorded before count, the resumed soak takes only the time left of the original duration,
and the soak's summary covers every round. Through this machine's own commands (``--transport
local``) and a real DuckDB store, at a 0.5 s interval over 1.5 s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from assistant import walks
from assistant.runbook import events as ev
from assistant.runbook.library import get_runbook
from assistant.store import Store

pytestmark = pytest.mark.store

DURATION, INTERVAL = 1.5, 0.5
# L4 only: the levels before it load a node, the soak only reads counters
ANSWERS = {"want-l0": "no", "want-l1": "no", "want-l2": "no", "want-l3": "no", "want-l4": "yes"}


def _options() -> walks.FleetOptions:
    return walks.FleetOptions(transport="local", hosts="localhost", params={
        "soak": {"duration_s": DURATION, "interval_s": INTERVAL, "rdma": False}})


def test_a_soak_interrupted_after_two_rounds_resumes_where_it_stopped(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    options = _options()
    target = options.open()
    provider = options.provider(target)
    walk = walks.new_walk(get_runbook("acceptance"), target, provider, answers=ANSWERS,
                          confirm=lambda node, hosts: node.kind == "probe")
    recording = walks.record(walk, target, options, provider, store=store, symptom="soak")
    first: list[ev.SampleTaken] = []

    def stop_after_two(event: ev.Event) -> None:  # after the recorder has taken the round
        if isinstance(event, ev.SampleTaken):
            first.append(event)
            if len(first) == 2:
                raise KeyboardInterrupt  # Ctrl-C during the soak

    walk.listeners.append(stop_after_two)
    with pytest.raises(KeyboardInterrupt):
        walk.run()
    recording.interrupted()
    target.close()
    assert [e.seq for e in first] == [0, 1]
    start = first[0].ts

    saved, state = walks.load_saved(store, recording.session)
    kept = state["prior_samples"]["soak"]["localhost"]  # read back from the samples table
    assert [(s["seq"], s["state"]) for s in kept] == [(0, "ok"), (1, "ok")]
    assert kept[0]["ts"] == pytest.approx(start, abs=1e-3)
    assert kept[1]["counters"] == first[1].samples["localhost"]["counters"]
    options = options.resumed(saved["target"])
    target = options.open()
    provider = options.provider(target)
    again: list[ev.Event] = []
    walk = walks.new_walk(get_runbook("acceptance"), target, provider, saved_state=state,
                          confirm=lambda node, hosts: node.kind == "probe")
    walks.record(walk, target, options, provider, store=store, session=saved["id"])
    walk.listeners.append(again.append)
    walk.run()
    target.close()

    rounds = [e for e in again if isinstance(e, ev.SampleTaken)]
    assert rounds and rounds[0].seq == 2, [e.seq for e in rounds]  # counted, not restarted
    # only the time left: every resumed round falls within the original duration (a restart
    # would sample until a whole duration after the resume), and the step ends with the last
    # one's collection (a generous bound for a loaded machine)
    assert all(first[1].ts < e.ts <= start + DURATION for e in rounds), (start, rounds)
    soak = next(s for s in walk.steps if s.node == "l4-soak")
    assert soak.ended - rounds[-1].ts < 2.0
    facts: dict[str, Any] = soak.outcomes[0].hosts["localhost"].facts
    total = 2 + len(rounds)
    assert facts["samples"] == total  # the summary covers the rounds before the interruption
    assert facts["first_ts"] == pytest.approx(start, abs=1e-3)
    with duckdb.connect(str(store.path), read_only=True) as con:
        seqs = [r[0] for r in con.execute("SELECT seq FROM samples WHERE session_id = ? "
                                          "ORDER BY seq", [saved["id"]]).fetchall()]
    assert seqs == list(range(total))

