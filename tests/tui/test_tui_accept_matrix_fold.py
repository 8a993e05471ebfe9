"""The acceptance matrix over a new cluster's thousands of nodes (issue 28 item 4): the nodes
that failed or could not run a test keep their own rows, the others are one folded row that
counts their verdicts, and a node that fails later leaves the fold."""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from assistant.tui.widgets import accept_matrix
from assistant.tui.widgets.accept_matrix import FOLD_KEY, MORE_KEY, AcceptMatrix

pytestmark = pytest.mark.tui

HOSTS = [f"node{i:04d}" for i in range(1, 301)]


def figure(test: str, verdict: str, value: float = 180.0) -> dict[str, Any]:
    return {"test": test, "level": 1, "metric": "busbw", "value": value, "unit": "GB/s",
            "verdict": verdict}


class Fleet(App[None]):
    def compose(self) -> ComposeResult:
        yield AcceptMatrix(HOSTS, id="matrix")


def rows(app: App[None]) -> dict[str, list[str]]:
    table: DataTable[Any] = app.query_one(DataTable)
    return {str(key.value): [cell.plain for cell in table.get_row(key)] for key in table.rows}


async def test_only_nodes_to_look_at_have_rows_and_the_rest_are_counted() -> None:
    app = Fleet()
    async with app.run_test(size=(100, 30)) as pilot:
        matrix = app.query_one(AcceptMatrix)
        for host in HOSTS[:290]:
            matrix.add(host, [figure("nccl-allreduce",
                                     "fail" if host == "node0007" else "pass")])
        matrix.add("node0100", [figure("gpu-burn", "not-run")])
        matrix.flush()
        await pilot.pause()
        shown = rows(app)
        assert list(shown) == ["node0007", "node0100", FOLD_KEY]
        columns = [str(c.value) for c in app.query_one(DataTable).columns]
        assert columns == ["node", "gpu-burn", "nccl-allreduce"]
        assert shown["node0007"][2].startswith("FAIL")
        assert shown["node0100"][1].startswith("not run")
        assert shown[FOLD_KEY][0] == "node[0001-0006,0008-0099,0101-0300] (298)"
        # the fold's 298 nodes: 288 passed nccl-allreduce, 10 have not answered it yet
        fold = dict(zip(columns, shown[FOLD_KEY], strict=True))
        assert fold["nccl-allreduce"] == "pass 288 · 10"
        assert fold["gpu-burn"] == "· 298"

        # a node that fails later leaves the fold; the fold's counts follow
        matrix.add("node0200", [figure("nccl-allreduce", "fail", 3.0)])
        matrix.add("node0300", [figure("nccl-allreduce", "pass")])
        matrix.flush()
        await pilot.pause()
        shown = rows(app)
        assert list(shown) == ["node0007", "node0100", "node0200", FOLD_KEY]
        fold = dict(zip(columns, shown[FOLD_KEY], strict=True))
        assert fold["nccl-allreduce"] == "pass 288 · 9"
        assert shown[FOLD_KEY][0].endswith("(297)")
        assert "no failure so far" in matrix.detail(FOLD_KEY, "nccl-allreduce")
        # the report still has every node
        assert len(matrix.document()["hosts"]) == len(HOSTS)


async def test_past_the_row_limit_the_rest_of_the_failures_are_counted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accept_matrix, "MAX_NODE_ROWS", 5)
    app = Fleet()
    async with app.run_test(size=(100, 30)) as pilot:
        matrix = app.query_one(AcceptMatrix)
        for host in HOSTS:
            matrix.add(host, [figure("nvbandwidth", "fail" if host < "node0013" else "pass")])
        matrix.flush()
        await pilot.pause()
        shown = rows(app)
        assert list(shown) == [*HOSTS[:5], MORE_KEY, FOLD_KEY]
        assert shown[MORE_KEY][0] == "… 7 more"
        assert shown[FOLD_KEY][0] == "node[0013-0300] (288)"


class Small(App[None]):
    def compose(self) -> ComposeResult:
        yield AcceptMatrix(HOSTS[:accept_matrix.FOLD_ABOVE], id="matrix")


async def test_a_fleet_up_to_the_fold_keeps_a_row_per_node() -> None:
    app = Small()
    async with app.run_test(size=(100, 30)) as pilot:
        matrix = app.query_one(AcceptMatrix)
        for host in HOSTS[:accept_matrix.FOLD_ABOVE]:
            matrix.add(host, [figure("nccl-allreduce", "pass")])
        matrix.flush()
        await pilot.pause()
        assert list(rows(app)) == HOSTS[:accept_matrix.FOLD_ABOVE]
