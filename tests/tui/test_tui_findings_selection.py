"""A burst of new findings does not move the operator's cursor off the finding being read."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Static

from assistant.tui.widgets.findings_view import FindingsView
from probes.model import Finding


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
