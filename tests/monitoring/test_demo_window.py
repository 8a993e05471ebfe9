"""The demo's recorded incident window: what a real Prometheus gave the monitoring step over
the demo's story (tests/monitoring/demo_window.py), replayed in every walk of the demo with no
server; a recorded window that cannot be read is one line, and the walk goes on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from assistant.cli import main
from tests import yamlc
from tests.monitoring import demo_window, promserver


def test_the_recorded_file_is_what_a_real_prometheus_gives_today() -> None:
    reason = promserver.unavailable_reason()
    if reason:
        promserver.skip_or_fail(reason)
    assert yamlc.load(demo_window.record()) == yamlc.load(demo_window.FILE.read_text())


def test_the_demo_walk_shows_the_window_with_no_server(
        capsys: pytest.CaptureFixture[str]) -> None:
    main(["run", "hang", "--scenario", "demo", "--auto", "--json"])
    doc = json.loads(capsys.readouterr().out)
    window = {f["code"]: f for f in doc["findings"] if f["probe"] == "monitoring"}
    assert set(window) == {"metric-ib-link-downed", "metric-ib-symbol-errors",
                           "metric-ib-rcv-errors", "monitoring-first-change"}
    downed = window["metric-ib-link-downed"]
    assert downed["hosts"] == [demo_window.FLAP_HOST]
    assert downed["evidence"]["first_abnormal"] == {demo_window.FLAP_HOST: "2026-06-01T09:25:00Z"}
    assert len(downed["evidence"]["series"][demo_window.FLAP_HOST]) >= 50
    # the window agrees with what the probes read: the same host's link
    assert doc["conclusion"]["id"] == "ib-link-fault"
    assert doc["conclusion"]["hosts"] == [demo_window.FLAP_HOST]


def test_a_recorded_window_that_cannot_be_read_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo = tmp_path / "demo"
    shutil.copytree(demo_window.FILE.parent, demo)
    (demo / "monitoring.yaml").write_text("findings:\n  - {code: x, severity: loud, message: m}\n")
    from assistant.tui.context import DiagContext, FleetOptions

    said: list[str] = []
    ctx = DiagContext(FleetOptions(scenario=str(demo)), record=False)
    ctx.notice = said.append
    import threading

    provider = ctx.provider(threading.Event())
    from assistant.monitoring.step import MonitoredProvider

    assert not isinstance(provider, MonitoredProvider)  # no window: the walk as it would be
    assert len(said) == 1 and "recorded window is not used" in said[0]
    assert "findings[0]: severity 'loud'" in said[0]
    ctx.close()
