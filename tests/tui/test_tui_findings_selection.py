"""A burst of new findings does not move the operator's cursor off the finding being read."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Input, Static

from assistant.tui.widgets.findings_view import FindingsView
from probes.model import Finding
from tests.tui.tui_support import wait_for


def make(code: str, severity: str, host: str) -> Finding:
    return Finding(code=code, severity=severity, hosts=(host,), message=f"{code} on {host}",
                   probe="gpu", evidence={})


class OneView(App[None]):
    def compose(self) -> ComposeResult:
        yield FindingsView()


async def test_a_more_severe_finding_arriving_keeps_the_selection() -> None:
    app = OneView()
    async with app.run_test(size=(100, 30)) as pilot:
        view = app.query_one(FindingsView)
        view.replace([make("gpu-throttled", "warning", "gpu001"),
                      make("gpu-running-hot", "info", "gpu002")])
        await pilot.pause()
        view.table.focus()
        await pilot.press("down")  # the operator reads gpu002's finding
        await pilot.pause()
        assert view.selected is not None and view.selected.hosts == ("gpu002",)
        view.add(make("xid-drain", "critical", "gpu003"))  # sorts first: rows shift down
        await pilot.pause(0.4)  # past the burst's rebuild
        assert view.shown[0].code == "xid-drain"
        assert view.shown[view.table.cursor_row].hosts == ("gpu002",)
        evidence = str(view.query_one("#evidence", Static).render())
        assert "gpu-running-hot on gpu002" in evidence


def on_host(code: str, host: str, figure: int) -> Finding:
    """A per-host check's finding: the message names its host, the evidence is the host's."""
    return Finding(code=code, severity="error", hosts=(host,),
                   message=f"{host}: port 1 symbol errors rising", probe="network",
                   evidence={"symbol_error": figure})


async def test_one_fault_on_many_hosts_is_one_row_that_keeps_the_selection() -> None:
    app = OneView()
    async with app.run_test(size=(100, 30)) as pilot:
        view = app.query_one(FindingsView)
        view.replace([*(on_host("ib-symbol-errors", f"gpu{i:03d}", i) for i in range(1, 201)),
                      make("gpu-throttled", "warning", "gpu007")])
        await pilot.pause()
        assert [(f.code, len(f.hosts)) for f in view.shown] == [("ib-symbol-errors", 200),
                                                                 ("gpu-throttled", 1)]
        assert view.shown[0].message == "gpu[001-200]: port 1 symbol errors rising"
        assert view.rows == 2  # what the walk's tab counts, not the 201 findings
        view.table.focus()
        await pilot.pause()
        assert view.selected is not None and view.selected.code == "ib-symbol-errors"
        evidence = str(view.query_one("#evidence", Static).render())
        assert "gpu137" in evidence and "symbol_error: 137" in evidence  # each host's own
        # more hosts join the row, and a more severe finding sorts above it: the operator
        # stays on the row being read, which now names 201 hosts
        view.add(on_host("ib-symbol-errors", "gpu201", 201))
        view.add(make("xid-drain", "critical", "gpu300"))
        # past the burst's rebuild (a loaded machine draws it later than a fixed pause)
        await wait_for(pilot, lambda: view.selected is not None
                       and len(view.selected.hosts) == 201, what="the rebuilt row")
        assert [f.code for f in view.shown] == ["xid-drain", "ib-symbol-errors",
                                                "gpu-throttled"]
        assert view.table.cursor_row == 1 and len(view.selected.hosts) == 201
        assert view.rows == 3
        # the filter still finds a host inside a folded row
        view.query_one("#findings-filter", Input).value = "gpu150"
        await pilot.pause(0.1)
        assert [f.code for f in view.shown] == ["ib-symbol-errors"]


async def test_before_the_operator_reads_one_the_most_severe_finding_is_shown() -> None:
    # A sweep's note can come before the host's fault it explains (on a loaded machine it
    # did): the pane shows the fault at the top, not the note that happened to arrive first.
    app = OneView()
    async with app.run_test(size=(100, 30)) as pilot:
        view = app.query_one(FindingsView)
        view.add(make("not-measured", "warning", "gpu003"))
        await pilot.pause(0.4)  # past the burst's rebuild: the note alone, selected
        assert view.selected is not None and view.selected.code == "not-measured"
        view.add(make("host-unreachable", "error", "gpu003"))
        await pilot.pause(0.4)
        assert [f.code for f in view.shown] == ["host-unreachable", "not-measured"]
        assert view.table.cursor_row == 0
        evidence = str(view.query_one("#evidence", Static).render())
        assert "host-unreachable on gpu003" in evidence
