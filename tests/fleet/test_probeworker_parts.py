"""The probe worker's reply travels in parts (assistant.probeworker.serve.send_parts).

The caller unpickles each message holding its GIL: one message with the evidence sweep's
whole reply over 1,000 hosts froze the TUI's screen for 2.3 s (bench/tuimem.py). The reply
now comes as many messages of single pickled items, put back together by ``Reply``; these
tests hold that nothing is lost, reordered or merged on the way, and that no message grows
past its bound.
"""

from __future__ import annotations

import importlib
import pickle
from typing import Any

import pytest

from assistant.probeworker import Reply
from probes.model import Finding, HostResult, ProbeOutcome

# the module (the package's name ``serve`` is its main function)
worker_side = importlib.import_module("assistant.probeworker.serve")


class Pipe:
    """What the worker's sender would write to the pipe, pickled as the pipe pickles it."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []

    def send(self, message: tuple[Any, ...]) -> None:
        self.messages.append(pickle.dumps(message))


def outcome(probe: str, hosts: int) -> ProbeOutcome:
    results = {f"node{i:04d}": HostResult(f"node{i:04d}", "ok", facts={
        "links": [{"gpu": g, "replay": i * g, "name": f"GPU{g}"} for g in range(8)]})
        for i in range(hosts)}
    findings = [Finding("nvlink-replay", "warning", (f"node{i:04d}",), f"replays on {i}")
                for i in range(0, hosts, 7)]
    return ProbeOutcome(probe, results, findings)


def test_a_reply_sent_in_parts_comes_back_whole_and_in_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_side, "PART_BYTES", 4096)
    sent = [outcome("nvlink", 300), outcome("gpu", 5), ProbeOutcome("host", {}, [])]
    raw = {("nvlink", f"node{i:04d}"): bytes([i % 256]) * 500 for i in range(300)}
    prepared = {("nvlink", f"node{i:04d}"): {"facts": "{}", "n": i} for i in range(300)}
    pipe = Pipe()
    worker_side.send_parts(pipe, sent, raw, prepared)  # type: ignore[arg-type]

    reply = Reply()
    for message in pipe.messages:
        reply.add(pickle.loads(message))
    assert [o.probe for o in reply.outcomes] == ["nvlink", "gpu", "host"]
    for got, want in zip(reply.outcomes, sent, strict=True):
        assert list(got.hosts) == list(want.hosts)  # the hosts' order is the fan-out's
        assert got.hosts == want.hosts and got.findings == want.findings
    assert list(reply.raw.items()) == list(raw.items())
    assert list(reply.prepared.items()) == list(prepared.items())

    # many messages, none much over the bound (one item may be larger on its own)
    largest = max(len(pickle.dumps(r)) for r in sent[0].hosts.values())
    assert len(pipe.messages) > 30
    assert max(len(m) for m in pipe.messages) < 4096 + largest + 512


def test_an_item_larger_than_a_part_travels_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_side, "PART_BYTES", 1024)
    big = {"x": "y" * 10_000}
    parts = list(worker_side._parts([("a", 1), ("b", big), ("c", 3)]))
    assert [[pickle.loads(b)[0] for b in part] for part in parts] == [["a"], ["b"], ["c"]]
