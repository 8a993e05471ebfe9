"""The bundle carries each output once (issue 29 item 6): an output two walks printed the
same is one raw file naming both; an output behind nothing but "not measured" is left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.store import Store
from assistant.store.bundle import build
from tests.store.storehelpers import XID, one, record_walk

pytestmark = pytest.mark.store

BLIND = {"gpu": {**XID["gpu"], "findings": [
    *XID["gpu"]["findings"],
    {"code": "not-measured", "hosts": ["gpu001"],
     "evidence": {"what": "log", "why": "no log param"}},
]}}


def test_each_output_once_and_no_blind_files(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    first, _ = record_walk(store, BLIND, {})
    incident = one(store, "SELECT incident_id FROM sessions WHERE id = ?", [first])
    second, _ = record_walk(store, BLIND, {}, incident=incident)
    _, manifest = store.read(lambda con: build(con, incident))
    raw = [f for f in manifest["files"] if f["path"].startswith("raw/")]
    assert [f["path"].split("/")[1] for f in raw] == ["gpu002"]  # not gpu001's "not measured"
    kept = first if first in raw[0]["path"] else second
    other = second if kept == first else first
    assert len(raw) == 1 and f"the same output in session {other}" in raw[0]["what"]
