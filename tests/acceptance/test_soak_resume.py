"""An acceptance walk interrupted during its L4 soak and resumed with ``--resume`` (the
``walks.load_saved`` seam the CLI and the TUI share) goes on where it stopped: the rounds
recorded before count, the resumed soak takes only the time left of the original duration,
and the soak's summary covers every round. Through this machine's own commands (``--transport
local``) and a real DuckDB store, at a 0.5 s interval over a few seconds."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest

from assistant import walks
from assistant.runbook import events as ev
from assistant.runbook.library import get_runbook
from assistant.store import Store

pytestmark = pytest.mark.store

DURATION, INTERVAL = 6.0, 0.5  # the walk's soak: room for rounds after the resume, even on a
# loaded machine (resuming re-reads the store and re-plans the walk before the soak goes on)
WATCH = 1.5  # diag watch's: its rounds count whether or not it resumes before the end
# L4 only: the levels before it load a node, the soak only reads counters
ANSWERS = {"want-l0": "no", "want-l1": "no", "want-l2": "no", "want-l3": "no", "want-l4": "yes"}


def _options() -> walks.FleetOptions:
    return walks.FleetOptions(transport="local", hosts="localhost", params={
        "soak": {"duration_s": DURATION, "interval_s": INTERVAL}})


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
    # as `diag run --resume SESSION` does: no --param given again, the session's own plan
    options = walks.FleetOptions().resumed(saved["target"])
    assert options.params["soak"] == {"duration_s": DURATION, "interval_s": INTERVAL}
    target = options.open()
    provider = options.provider(target)
    watchdog = threading.Timer(DURATION * 4, provider.cancel.set)  # a 4-hour default: stop
    watchdog.start()
    again: list[ev.Event] = []
    walk = walks.new_walk(get_runbook("acceptance"), target, provider, saved_state=state,
                          confirm=lambda node, hosts: node.kind == "probe")
    walks.record(walk, target, options, provider, store=store, session=saved["id"])
    walk.listeners.append(again.append)
    try:
        walk.run()
    finally:
        watchdog.cancel()
        target.close()

    rounds = [e for e in again if isinstance(e, ev.SampleTaken)]
    assert rounds and rounds[0].seq == 2, [e.seq for e in rounds]  # counted, not restarted
    # only the time left: every resumed round falls within the original duration (a restart
    # samples until a whole duration after the resume)
    assert all(first[1].ts < e.ts <= start + DURATION for e in rounds), (start, rounds)
    soak = next(s for s in walk.steps if s.node == "l4-soak")
    facts: dict[str, Any] = soak.outcomes[0].hosts["localhost"].facts
    total = 2 + len(rounds)
    assert facts["samples"] == total  # the summary covers the rounds before the interruption
    assert facts["first_ts"] == pytest.approx(start, abs=1e-3)
    with duckdb.connect(str(store.path), read_only=True) as con:
        seqs = [r[0] for r in con.execute("SELECT seq FROM samples WHERE session_id = ? "
                                          "ORDER BY seq", [saved["id"]]).fetchall()]
    assert seqs == list(range(total))



class _CtrlC:
    """The terminal of a watch whose operator presses Ctrl-C once two rounds are shown (the
    line is printed after the round is recorded)."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        if text.startswith("round 2:"):
            raise KeyboardInterrupt
        return len(text)

    def flush(self) -> None:
        pass


def test_diag_watch_resume_counts_the_rounds_taken_and_ends_at_the_original_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import sys

    from assistant.cli import main

    db = str(tmp_path / "diag.duckdb")
    terminal = _CtrlC()
    with monkeypatch.context() as patched:
        patched.setattr(sys, "stderr", terminal)
        code = main(["watch", "--transport", "local", "--duration", f"{WATCH}s",
                     "--interval", f"{INTERVAL}s", "--param", "soak.rdma=false", "--db", db])
    assert code == 130, terminal.text
    assert "diag watch --resume" in terminal.text
    session = terminal.text.split("diag watch --resume ")[1].split()[0]
    with duckdb.connect(db, read_only=True) as con:
        start = con.execute("SELECT epoch(min(ts)) FROM samples").fetchone()[0]
    code = main(["watch", "--resume", session, "--db", db, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code in (0, 1), doc  # this machine's counters: no GPU here, nothing must rise
    with duckdb.connect(db, read_only=True) as con:
        rows = con.execute("SELECT seq, epoch(ts) FROM samples ORDER BY seq").fetchall()
    assert doc["session"] == session
    # the rounds taken before count (a resume after the original end takes none: on a loaded
    # machine the second start may come that late)
    assert [r[0] for r in rows] == list(range(len(rows))) and len(rows) >= 2
    assert all(ts <= start + WATCH + 1e-3 for _, ts in rows)  # none after the original end
    assert doc["hosts"]["localhost"]["samples"] == len(rows)  # the summary covers every round
    assert main(["watch", "--resume", session, "--db", db]) == 2  # it has ended now
    assert "already ended" in capsys.readouterr().err
