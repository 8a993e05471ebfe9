"""Rows prepared where the probe ran (assistant.store.prepared) are the rows the store keeps.

The TUI's probe worker prepares each run's rows (redacted, bounded, hashed, compressed) and the
UI process only inserts them; every other walk prepares them inside ``record_step``. Both must
write the same rows, with no secret in any of them, and a prepared row must never be used for
a result it was not prepared from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from assistant.runbook import events as ev
from assistant.store import Store
from assistant.store import prepared as prep
from probes.model import ProbeOutcome
from tests.store.storehelpers import HOSTS, RawProvider, dump_all, record_walk, rows

TOKEN = "hf_" + "Zq9" * 12
PASSWORD = "hunter2-not-a-real-one"
# check-gpu (xid-drain) -> drain -> hardware, with secrets in facts, figures and raw output
GPU = {"gpu": {
    "findings": [{"code": "xid-drain", "hosts": ["gpu002"], "evidence": {"xids": [79]}}],
    "facts": {h: {"temperature_max_c": 60, "env": {"HF_TOKEN": TOKEN},
                  "figures": [{"level": 1, "test": "diag", "metric": "result", "value": "Fail",
                               "verdict": "fail", "detail": {"log": f"password={PASSWORD}"}},
                              {"level": 2, "test": "pcie", "metric": "bw", "value": 24.5,
                               "unit": "GB/s", "op": ">=", "threshold": 20, "verdict": "pass"}]}
              for h in HOSTS}}}
OUTPUT = "GPU 0: ok\n" * 200 + f"export HF_TOKEN={TOKEN}\n"  # compressed (over 1 KiB)
RAW = {("gpu", h): OUTPUT for h in HOSTS} | {("gpu", "gpu003"): f"curl -u me:{PASSWORD} x\n"}


class PreparingProvider(RawProvider):
    """Prepares each outcome's rows as the probe worker does, beside ``raw``."""

    def __init__(self) -> None:
        super().__init__(GPU, raw=RAW)
        self.prepared: dict[prep.Key, prep.PreparedRun] = {}
        self.preparing = False

    def run_probes(self, probes: Sequence[str], hosts: Sequence[str],
                   params: Mapping[str, Mapping[str, Any]],
                   emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]:
        outcomes = super().run_probes(probes, hosts, params, emit)
        self.preparing = True
        for outcome in outcomes:
            self.prepared.update(prep.prepare_outcome(outcome, self.raw))
        self.preparing = False
        return outcomes


def _kept(store: Store, session: str) -> list[Any]:
    """What a session's steps leave in the store, without ids and timestamps."""
    where = [session]
    return [rows(store, "SELECT host, probe, state, reason, raw_hash, raw_bytes, facts "
                        "FROM probe_runs WHERE session_id = ? ORDER BY step_seq, probe, host",
                 where),
            rows(store, "SELECT hash, bytes, text, zlib FROM raw_blobs WHERE hash IN "
                        "(SELECT raw_hash FROM probe_runs WHERE session_id = ?) ORDER BY hash",
                 where),
            rows(store, "SELECT host, level, test, metric, value, verdict, detail "
                        "FROM acceptance WHERE session_id = ? ORDER BY host, level", where),
            rows(store, "SELECT code, host, evidence FROM findings WHERE session_id = ? "
                        "ORDER BY code, host", where),
            [json.loads(r[0]) | {"started": 0, "ended": 0} for r in rows(
                store, "SELECT record FROM steps WHERE session_id = ? ORDER BY seq", where)]]


@pytest.mark.store
def test_rows_prepared_by_the_worker_are_those_prepared_in_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "diag.duckdb")
    in_process, _ = record_walk(store, GPU, {}, provider=RawProvider(GPU, raw=RAW))
    provider = PreparingProvider()
    session = store.open_session("mini", HOSTS, {}, symptom="the job hangs")
    from assistant.runbook.engine import Walk
    from assistant.store import Recorder
    from tests.store.storehelpers import mini_runbook

    recorder = Recorder(store, session, raw=provider.raw, prepared=provider.prepared)
    walk = Walk(mini_runbook(), HOSTS, sweep=False, provider=provider, listeners=[recorder])
    recorder.follow(walk)
    prepared_here: list[Any] = []
    plain = prep.prepare_run

    def counted(*args: Any) -> prep.PreparedRun:
        if not provider.preparing:
            prepared_here.append(args)
        return plain(*args)

    monkeypatch.setattr(prep, "prepare_run", counted)
    walk.run()
    assert walk.path()[:2] == ["check-gpu", "drain"]
    assert not prepared_here, "the recorder redid the worker's work"
    assert not provider.prepared, "taken with its step"
    kept = _kept(store, session)
    assert kept == _kept(store, in_process)
    assert len(kept[0]) == 3 and len(kept[1]) == 2 and len(kept[2]) == 6  # one blob per content
    dump = dump_all(store.path)
    assert "[REDACTED]" in dump and "GPU 0: ok" in dump
    for secret in (TOKEN, PASSWORD):
        assert secret not in dump


def test_a_prepared_row_is_used_only_for_the_result_it_came_from() -> None:
    """A later run of the probe (another state or duration) is prepared afresh, and a probe
    run twice in one step gets its facts from its own result."""
    result = {"host": "gpu001", "state": "ok", "facts": {"n": 1}, "reason": "",
              "duration_s": 1.5}
    stale = prep.prepare_run({**result, "facts": {"n": 0}, "duration_s": 0.7}, "old output")
    step = {"node": "check", "kind": "probe", "outcomes": [
        {"probe": "gpu", "hosts": {"gpu001": result}, "findings": []},
        {"probe": "gpu", "hosts": {"gpu001": {**result, "facts": {"n": 2}}}, "findings": []}]}
    light, runs = prep.split_step(step, {("gpu", "gpu001"): "new output"},
                                  {("gpu", "gpu001"): stale})
    assert [r[0].facts for r in runs] == ['{"n":1}', '{"n":2}']
    assert runs[0][0].raw_hash == runs[1][0].raw_hash != stale.raw_hash
    # facts are kept once: in the first run's row, and in the record for the repeat only
    assert "facts" not in light["outcomes"][0]["hosts"]["gpu001"]
    assert light["outcomes"][1]["hosts"]["gpu001"]["facts"] == {"n": 2}
    fresh = prep.prepare_run(result, "new output")
    assert prep.split_step(step, None, {("gpu", "gpu001"): fresh})[1][0][0] is fresh
