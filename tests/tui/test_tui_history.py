"""The history screen and the node view over a store holding two recorded walks."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from assistant.cli import main
from assistant.tui import messages as m
from assistant.tui.screens.history import HistoryScreen
from assistant.tui.screens.incident import IncidentScreen
from assistant.tui.screens.node import NodeScreen
from tests.tui.tui_support import Messages, make_app, wait_for


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hang walk over demo (gpu001-016) and a crash walk over crash-xid48-dbe (gpu001-008),
    recorded once per module with the CLI; each test gets its own copy."""
    path = tmp_path_factory.mktemp("history") / "diag.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DIAG_DB", str(path))
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["run", "hang", "--scenario", "demo", "--auto"]) in (0, 1)
            assert main(["run", "crash", "--scenario", "crash-xid48-dbe", "--auto"]) in (0, 1)
    return path


@pytest.fixture
def two_walks(recorded: Path) -> None:
    shutil.copy(recorded, os.environ["DIAG_DB"])


def rows(table: object) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)]  # type: ignore[attr-defined]
            for i in range(table.row_count)]  # type: ignore[attr-defined]


async def test_history_filters_and_node_view(two_walks: None) -> None:
    app = make_app("demo")
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await pilot.press("h")  # the symptom box has focus: h is typed, not a binding
        assert not isinstance(app.screen, HistoryScreen)
        app.action_open("history")
        await wait_for(pilot, lambda: seen.of(m.HistoryLoaded), what="history")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        table = screen.query_one("#history-table")
        await wait_for(pilot, lambda: table.row_count == 2, what="two incidents")
        assert [r[1] for r in rows(table)] == ["crash", "hang"]  # newest first

        # Only the demo walk covered gpu012.
        screen.query_one("#filter-host").focus()
        await pilot.press(*"gpu012", "enter")
        await wait_for(pilot, lambda: table.row_count == 1, what="filtered by host")
        assert rows(table)[0][1] == "hang"

        # Enter on the incident: its findings, then the node view of a finding's host.
        await pilot.press("enter")
        detail = screen.query_one("#history-detail")
        await wait_for(pilot, lambda: seen.of(m.IncidentDetailLoaded), what="incident detail")
        assert seen.of(m.IncidentDetailLoaded)[-1].detail["sessions"][0]["runbook"] == "hang"
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, NodeScreen), what="node view")
        await wait_for(pilot, lambda: seen.of(m.NodeLoaded), what="node data")
        node = app.screen
        host = node.host  # type: ignore[attr-defined]
        assert host == (rows(detail)[0][1] if detail.has_focus else "gpu012")
        incidents = node.query_one("#node-incidents")
        assert incidents.row_count >= 1
        assert all(r[1] in ("hang", "crash") for r in rows(incidents))
        data = seen.of(m.NodeLoaded)[-1].data
        assert {f["code"] for f in data["rows"]} == {
            r[2] for r in rows(node.query_one("#node-findings"))}

        # A runbook filter that matches nothing: an empty table, no error.
        await pilot.press("escape")
        screen.query_one("#filter-host").value = ""
        screen.query_one("#filter-runbook").focus()
        await pilot.press(*"crash", "enter")
        await wait_for(pilot, lambda: table.row_count == 1 and rows(table)[0][1] == "crash",
                       what="filtered by runbook")


async def test_incident_on_home_opens_its_walks(two_walks: None) -> None:
    from assistant.tui import hooks

    # the recorded walks replay scenarios: simulated, listed when asked for
    app = make_app("demo", incidents=lambda: hooks.recent_incidents(include_simulated=True))
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one("#recent-list").option_count == 2,
                       what="recent incidents")
        newest = app.screen.query_one("#recent-list").get_option_at_index(0).id
        app.screen.query_one("#recent-list").focus()
        await pilot.press("enter")
        # The incident opens on its own screen: each walk's path and conclusion (issue 16.3).
        await wait_for(pilot, lambda: seen.of(m.IncidentWalksLoaded), what="incident walks")
        assert isinstance(app.screen, IncidentScreen)
        assert seen.of(m.IncidentWalksLoaded)[-1].incident_id == newest


FIXED = {
    "incidents": [
        {"id": "inc-0042", "opened": datetime(2026, 5, 28, 3, 12), "runbooks": ["hang"],
         "critical": 2, "findings": 5, "conclusion": "hang/ib-link-fault", "title": "hang"},
        {"id": "inc-0041", "opened": datetime(2026, 5, 27, 14, 40),
         "runbooks": ["low-bandwidth"], "critical": 0, "findings": 3, "conclusion": None,
         "title": "low busbw after the driver upgrade [bold]x[/]"},
    ],
    "counts": {"incidents": 2, "findings": 8},
}
DETAIL = {
    "sessions": [{"runbook": "hang", "conclusion": "ib-link-fault", "status": "concluded",
                  "hosts_n": 16, "operator": "oncall"}],
    "findings": [
        {"severity": "critical", "host": "gpu013", "code": "ib-link-flapping",
         "message": "mlx5_2 link_downed +3 during the sample"},
        {"severity": "warning", "host": "gpu013", "code": "ib-symbol-errors",
         "message": "symbol errors rising on mlx5_2"},
    ],
}


def test_history_snapshot(snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """History at 80x24 with an incident open (store answers fixed: times do not move)."""
    from assistant.tui import hooks

    monkeypatch.setattr(hooks, "history_rows", lambda **_: FIXED)
    monkeypatch.setattr(hooks, "incident_detail", lambda _: DETAIL)

    async def show(pilot: Any) -> None:
        pilot.app.push_screen(HistoryScreen(pilot.app.ctx, incident="inc-0042"))
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, HistoryScreen) and
                       any(t.row_count == 2 for t in pilot.app.screen.query("#history-detail")))
        await pilot.pause()

    assert snap_compare(make_app("demo"), terminal_size=(80, 24), run_before=show)
