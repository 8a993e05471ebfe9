"""The monitoring step in the TUI's walks, over the session's real Prometheus: the walk's
findings list holds the metric signatures that fired on its hosts, the evidence pane draws the
accused host's signal over the window, and the server's trouble is a notification (one line),
never text printed over the screen."""

from __future__ import annotations

from typing import Any

import pytest

from assistant.monitoring.config import PromConfig
from assistant.monitoring.step import MonitoringPlan, MonitoringStep
from assistant.tui import messages as m
from assistant.tui.app import DiagApp
from assistant.tui.context import DiagContext, FleetOptions
from assistant.tui.widgets.findings_view import FindingsView
from tests.monitoring import history, promserver
from tests.tui.tui_support import Messages, wait_for

pytestmark = pytest.mark.tui

XID_HOST = history.PLANTED["metric-xid-new"]


def app_over(step: MonitoringStep) -> DiagApp:
    # Names no resolver answers: the hosts cannot be reached over SSH (through the TUI's
    # probe worker process), so what the walk knows of them is the window's
    options = FleetOptions(hosts=f"{XID_HOST},{history.CALM}", connect_timeout=1, timeout=2,
                           deadline=10, monitoring=MonitoringPlan(step, lambda line: None))
    return DiagApp(DiagContext(options, session_id=lambda: "tui-window", record=False),
                   still=True)


async def test_a_tui_walk_reads_the_window_and_draws_the_signal(prom_config: Any) -> None:
    app = app_over(MonitoringStep(prom_config, start=history.T0 + 300, end=history.END))
    seen = Messages()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        app.post_message(m.RunbookChosen("hang", "training hangs"))

        def raised() -> set[str]:
            return {f.event.finding.code for f in seen.of(m.FindingRaised)}

        await wait_for(pilot, lambda: "metric-xid-new" in raised(), what="the XID signature")
        view = app.screen.query_one(FindingsView)
        await wait_for(pilot, lambda: any(f.code == "metric-xid-new" for f in view.shown),
                       what="the finding in the list")
        xid = next(f for f in view.shown if f.code == "metric-xid-new")
        assert xid.hosts == (XID_HOST,) and xid.probe == "monitoring"
        view.table.focus()

        def selected() -> str:
            # findings still streaming in (the ranks probe's) reorder the list: select the
            # XID's row again until its evidence is the one shown
            row = next(i for i, f in enumerate(view.shown) if f.code == "metric-xid-new")
            view.table.move_cursor(row=row)
            return str(view.query_one("#evidence").render())

        await wait_for(pilot, lambda: "over the window from" in selected(),
                       what="the XID's evidence")
        evidence = selected()
        drawn = next(line for line in evidence.splitlines() if XID_HOST in line
                     and any(block in line for block in "▁▂▃▄▅▆▇█"))
        assert "▁" in drawn and "█" in drawn, drawn  # quiet, then the XID
    assert not [n for n in app._notifications if n.title == "monitoring"]


async def test_a_server_that_cannot_be_reached_is_one_notification() -> None:
    closed = PromConfig(url=f"http://127.0.0.1:{promserver.free_port()}", timeout=2)
    app = app_over(MonitoringStep(closed))
    seen = Messages()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        app.post_message(m.RunbookChosen("hang", "training hangs"))
        await wait_for(pilot, lambda: any(n.title == "monitoring" for n in app._notifications),
                       what="the monitoring notification")
        (note,) = [n for n in app._notifications if n.title == "monitoring"]
        assert "cannot be reached" in note.message and "goes on" in note.message
        await wait_for(pilot, lambda: seen.of(m.StepFinished), what="the sweep's end")
