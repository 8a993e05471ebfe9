"""Reports a post-mortem author can use (issue 29 item 6): one line per distinct finding with
the walks it came from, and involved = accused (a host with only "not measured" is not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.store import Store
from assistant.store.reports import incident_report, report_markdown
from tests.store.storehelpers import XID, one, record_walk

pytestmark = pytest.mark.store

BLIND = {"gpu": {**XID["gpu"], "findings": [
    *XID["gpu"]["findings"],
    {"code": "not-measured", "hosts": ["gpu001"], "evidence": {"what": "dmesg", "why": "EPERM"}},
]}}


def test_one_line_per_finding_and_involved_is_accused(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    first, _ = record_walk(store, BLIND, {})
    incident = one(store, "SELECT incident_id FROM sessions WHERE id = ?", [first])
    second, _ = record_walk(store, BLIND, {}, incident=incident)
    report = store.read(lambda con: incident_report(con, incident))
    xid = [f for f in report["evidence"] if f["code"] == "xid-drain"]
    assert len(xid) == 1 and xid[0]["sessions"] == [first, second]
    assert [h["host"] for h in report["hosts"]["involved"]] == ["gpu002"]
    assert [h["host"] for h in report["hosts"]["noted"]] == ["gpu001"]
    text = report_markdown(report)
    assert f"in 2 walks: {first}, {second}" in text
    assert "1 of 3 host(s) are accused by a finding" in text
    assert "Only notes (not measured, or a probe could not run) on gpu001" in text
