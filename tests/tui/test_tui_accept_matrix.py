"""The walk screen's acceptance matrix, live: over the replay of four repaired nodes (gpu003
fails dcgmi at L1), the matrix shows L1 alone while the walk waits before L2, then L2 too; the
failing cell is gpu003's dcgm-diag and every other cell passes; the model is the report's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from assistant.runbook import acceptreport
from assistant.tui import messages as m
from assistant.tui.screens.confirm import ConfirmationModal
from assistant.tui.screens.walk import WalkScreen
from assistant.tui.widgets.accept_matrix import AcceptMatrix
from tests.tui.tui_support import ANSI, MARKUP, SHOWN_ANSI, Messages, make_app, status, wait_for

pytestmark = pytest.mark.tui

SCENARIO = Path(__file__).parents[2] / "fixtures/scenarios/acceptance-dcgm-fail-one-node"
HOSTS = ["gpu001", "gpu002", "gpu003", "gpu004"]
L1 = ["dcgm-diag", "gpu-burn", "nvbandwidth"]


def shown(screen: WalkScreen) -> dict[str, dict[str, str]]:
    """What the matrix's table shows: host -> column -> cell text."""
    table: DataTable[Any] = screen.query_one("#matrix-table", DataTable)
    columns = [str(c.value) for c in table.columns]
    return {str(row.value): dict(zip(columns, (c.plain for c in table.get_row(row)),
                                     strict=True))
            for row in table.rows}


async def confirm_level(pilot: Any) -> None:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmationModal),
                   what="the level's confirmation")
    await pilot.press("y")


async def test_the_matrix_fills_in_level_by_level_with_the_failing_cell() -> None:
    app = make_app(SCENARIO)
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        app.post_message(m.RunbookChosen("acceptance"))
        await status(pilot, "waiting")  # want-l0
        screen = app.screen
        assert isinstance(screen, WalkScreen)
        assert not screen.check_action("tab", ("matrix",))  # no figures yet: no matrix tab
        await pilot.press("2")  # skip L0
        await status(pilot, "waiting")  # want-l1
        await pilot.press("1")
        await confirm_level(pilot)
        await status(pilot, "waiting")  # want-l2: L1 is in, L2 not yet
        middle = shown(screen)
        assert list(middle) == HOSTS
        assert list(middle["gpu001"]) == ["node", *L1]
        assert middle["gpu003"]["dcgm-diag"].startswith("FAIL")
        assert {middle[h][t].split()[0] for h in HOSTS for t in L1
                if (h, t) != ("gpu003", "dcgm-diag")} == {"pass"}
        matrix = screen.query_one(AcceptMatrix)
        assert "first failure L1 dcgm-diag GPU 0 GPU Memory Fail" in matrix.detail("gpu003",
                                                                                  "node")
        assert matrix.detail("gpu001", "node") == "gpu001: 3 test(s) in, none failed"
        assert screen.check_action("tab", ("matrix",))
        await pilot.press("a")
        await wait_for(pilot, lambda: app.focused is screen.query_one("#matrix-table"))

        await pilot.press("w", "1")  # L2 on the nodes still in the walk
        await confirm_level(pilot)
        await status(pilot, "waiting")  # want-l3
        after = shown(screen)
        l2 = [t for t in after["gpu001"] if t not in ("node", *L1)]
        assert l2 and all(after["gpu001"][t].startswith("pass") for t in l2)
        assert after["gpu003"]["dcgm-diag"] == middle["gpu003"]["dcgm-diag"]
        # one cell per FiguresReady's test; the model is the report's, figure for figure
        ready = seen.of(m.FiguresReady)
        assert {(r.event.host, r.event.probe) for r in ready} >= {(h, "dcgm-diag")
                                                                   for h in HOSTS}
        live = matrix.document()
        report = acceptreport.from_walk(screen.driver.walk)
        assert live["tests"] == report["tests"]
        assert [h["cells"] for h in live["hosts"]] == [h["cells"] for h in report["hosts"]]
        # a resumed walk starts from its recorded steps' figures: the same matrix
        resumed = AcceptMatrix(HOSTS)
        resumed.add_steps(screen.driver.snapshot()["steps"])
        assert resumed.document() == live


class One(App[None]):
    def compose(self) -> ComposeResult:
        yield AcceptMatrix([MARKUP], id="matrix")


async def test_host_and_test_names_stay_text() -> None:
    app = One()
    async with app.run_test(size=(80, 24)) as pilot:
        matrix = app.query_one(AcceptMatrix)
        matrix.add(MARKUP, [{"test": ANSI, "level": 1, "metric": "m", "value": 1, "unit": ANSI,
                             "verdict": "fail"}])
        matrix.flush()
        await pilot.pause()
        table: DataTable[Any] = app.query_one(DataTable)
        assert table.get_row(MARKUP)[0].plain == MARKUP
        assert table.get_row(MARKUP)[1].plain == f"FAIL 1 {SHOWN_ANSI}"
        assert SHOWN_ANSI in [c.label.plain for c in table.columns.values()][1]
