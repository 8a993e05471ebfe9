"""``diag watch`` ended early and watched long (issue 27 item 7): Ctrl-C or a SIGTERM (a closed
terminal, a job's time limit, ``kill``) leaves the session "interrupted" — resumable, and not
"running" for ever — and a round costs the store what changed, not every counter again (a node
with 8 HCAs reads ~70 counters: ~3 KB of JSON a host, ~25 KB a round for 8 hosts, each round
the same numbers).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from assistant.cli import main
from assistant.runbook import events as ev
from assistant.store import Recorder, Store
from assistant.store.writes import session_samples


class _Terminal:
    """The watch's stderr: at the line of round *at*, *then* happens (the round is recorded
    before its line is printed)."""

    def __init__(self, at: int, then: Callable[[], None]) -> None:
        self.text, self.at, self.then = "", at, then

    def write(self, text: str) -> int:
        self.text += text
        if text.startswith(f"round {self.at}:"):
            self.then()
        return len(text)

    def flush(self) -> None:
        pass


def _watch(db: Path, terminal: _Terminal, monkeypatch: pytest.MonkeyPatch) -> int:
    with monkeypatch.context() as patched:
        patched.setattr(sys, "stderr", terminal)
        return main(["watch", "--transport", "local", "--duration", "3s", "--interval", "0.3s",
                     "--param", "soak.rdma=false", "--db", str(db)])


def _status(db: Path) -> list[tuple[str, str]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT runbook, status FROM sessions").fetchall()


def test_ctrl_c_ends_the_session_as_interrupted(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def ctrl_c() -> None:
        raise KeyboardInterrupt

    db = tmp_path / "diag.duckdb"
    terminal = _Terminal(2, ctrl_c)
    assert _watch(db, terminal, monkeypatch) == 130, terminal.text
    assert "diag watch --resume" in terminal.text
    assert _status(db) == [("watch", "interrupted")]


def test_sigterm_ends_the_session_as_interrupted(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    unheard: list[int] = []  # a SIGTERM diag did not take (it would have ended the test run)

    def fallback(signum: int, frame: Any) -> None:
        unheard.append(signum)

    before = signal.signal(signal.SIGTERM, fallback)
    try:
        db = tmp_path / "diag.duckdb"
        terminal = _Terminal(2, lambda: os.kill(os.getpid(), signal.SIGTERM))
        code = _watch(db, terminal, monkeypatch)
    finally:
        after = signal.signal(signal.SIGTERM, before)
    assert not unheard, "diag watch did not handle SIGTERM"
    assert after is fallback  # diag put back the handler it found
    assert code == 143, terminal.text
    assert "terminated" in terminal.text and "diag watch --resume" in terminal.text
    assert _status(db) == [("watch", "interrupted")]


def _counters(seq: int) -> dict[str, Any]:
    """A node with 8 HCAs: the soak's 8 IB error counters on each port, its GPU counters and
    TCP retransmits (which rise on a healthy host); a symbol error at round 3 on one port, and
    that port's counters gone at round 4 (a port unplugged)."""
    names = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
             "local_link_integrity_errors", "out_of_sequence", "packet_seq_err",
             "local_ack_timeout_err")
    counters: dict[str, Any] = {f"mlx5_{h}/1 {n}": 0 for h in range(8) for n in names
                                if not (seq >= 4 and h == 7)}
    counters.update(xid_events=0, ecc_uncorrected=0, remapped_rows_pending=0,
                    ecc_corrected_volatile=4, tcp_retrans=123_456 + 7 * seq)
    if seq >= 3:
        counters["mlx5_0/1 symbol_error"] = 1
    return counters


def test_a_round_stores_what_changed_and_reads_back_whole(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    hosts = [f"gpu{i:03d}" for i in range(1, 9)]
    session = store.open_session("watch", hosts, {}, symptom="watch 1h every 1m")
    recorder = Recorder(store, session)
    taken: dict[str, list[dict[str, Any]]] = {h: [] for h in hosts}
    for seq in range(6):
        samples = {h: {"seq": seq, "ts": 1_700_000_000.0 + 60 * seq, "state": "ok",
                       "reason": "", "counters": _counters(seq), "missing": [],
                       "xid_lines": []} for h in hosts}
        if seq == 2:  # one host missed a round
            samples["gpu008"] = {**samples["gpu008"], "state": "timeout",
                                 "reason": "command did not finish in 60s", "counters": None}
        for host, sample in samples.items():
            taken[host].append(sample)
        recorder(ev.SampleTaken("soak", seq, 1_700_000_000.0 + 60 * seq, samples))
    with duckdb.connect(str(store.path), read_only=True) as con:
        per_round = dict(con.execute(
            "SELECT seq, sum(strlen(counters::VARCHAR)) FROM samples GROUP BY seq"
        ).fetchall())
    assert per_round[0] > 8 * 2000  # the first round: every counter of every host
    # then what changed: TCP retransmits (and at round 3 a symbol error; at round 4 the 8
    # counters of the port that went away, each marked gone)
    assert all(per_round[seq] < 8 * (400 if seq == 4 else 100) for seq in range(1, 6)), per_round
    read = store.read(lambda con: session_samples(con, session))["soak"]
    for host in hosts:
        assert [(s["seq"], s["state"], s["counters"]) for s in read[host]] == [
            (s["seq"], s["state"], s["counters"]) for s in taken[host]], host
