"""Text from hosts is shown as text: markup stays literal, terminal escapes are made visible.

Checked at three levels: the helper itself, a findings table fed a hostile finding, and a full
walk over a scenario whose host prints markup and ANSI escapes (the raw-output view, the live
probe progress, and the evidence pane)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from assistant.locations import fixtures_dir
from assistant.tui import messages as m
from assistant.tui.safe_text import host_line, host_text, visible
from assistant.tui.screens.raw_output import RawOutputScreen
from assistant.tui.widgets.findings_view import FindingsView
from probes.model import Finding
from tests.tui.tui_support import (
    ANSI,
    MARKUP,
    SHOWN_ANSI,
    Messages,
    make_app,
    screen_text,
    status,
    wait_for,
)
from tests.tui.tui_support import write_scenario as scenario

EVIL = f"{MARKUP} {ANSI}"


@pytest.mark.parametrize(("raw", "shown"), [
    (MARKUP, MARKUP),  # markup is not special to the helper: Text never parses it
    (ANSI, SHOWN_ANSI),  # ESC becomes a visible picture, the rest of the sequence stays
    ("a\x00b\x07c", "a␀b␇c"),  # other C0 controls: control pictures
    ("del\x7f", "del␡"),  # DEL
    ("c1\x9bx", "c1\\x9bx"),  # a C1 CSI is as dangerous as ESC [
    ("rtl\u202eevil", "rtl\\u202eevil"),  # a bidi override would reorder what is read
    ("tab\there", "tab\there"),  # tabs are layout, kept
    ("two\nlines", "two\nlines"),  # newlines kept in multi-line text...
    ("训练卡住", "训练卡住"),  # ...and so is ordinary non-ASCII text
])
def test_visible(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_one_line_text_shows_newlines_and_is_never_markup() -> None:
    text = host_line(f"a\n{MARKUP}")
    assert text.plain == f"a␤{MARKUP}" and not text.spans
    assert host_text(EVIL).plain == f"{MARKUP} {SHOWN_ANSI}"


class FindingsApp(App[None]):
    def compose(self) -> ComposeResult:
        yield FindingsView(id="findings")


async def test_findings_table_and_evidence_show_hostile_text_literally() -> None:
    app = FindingsApp()
    async with app.run_test(size=(100, 24)) as pilot:
        view = app.query_one(FindingsView)
        view.add(Finding("xid", "critical", ("gpu007",), f"gpu007 says {EVIL}", "gpu",
                         {"dmesg": [f"NVRM: Xid 79 {EVIL}"]}))
        await wait_for(pilot, lambda: view.shown)  # rows are added in bursts
        await pilot.pause()
        shown = screen_text(app)
        assert f"gpu007 says {MARKUP} {SHOWN_ANSI}" in shown  # the table row and the pane
        assert f"- NVRM: Xid 79 {MARKUP} {SHOWN_ANSI}" in shown  # the evidence
        assert "\x1b" not in app.export_screenshot()


async def test_probe_output_and_reasons_from_hosts_render_literally(tmp_path: Path) -> None:
    baseline = (fixtures_dir() / "scenarios" / "_baseline" / "versions.txt").read_text()
    evil_versions = baseline.replace("5.15.0-105-generic", f"5.15.0-{MARKUP}{ANSI}", 1)
    app = make_app(scenario(tmp_path / "evil", outputs={"versions": {"gpu002": evil_versions}}))
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await status(pilot, "waiting")
        # The unparseable host is named with its reason in the live progress...
        progress = app.screen.step_panel.progress.render().plain
        assert "parse-error" in progress and "gpu002 (1)" in progress and MARKUP in progress
        # ...its finding's evidence shows the reason as text...
        await pilot.press("f")
        await wait_for(pilot, lambda: seen.of(m.FindingSelected))
        assert seen.of(m.FindingSelected)[-1].finding.code == "probe-parse-error"
        await wait_for(pilot, lambda: f"5.15.0-{MARKUP}" in screen_text(app),
                       what="the finding's evidence on screen")
        # ...and what the host printed is shown verbatim, escapes made visible.
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, RawOutputScreen))
        await pilot.pause()
        shown = screen_text(app)
        assert f"5.15.0-{MARKUP}{SHOWN_ANSI}" in shown
        whole = str(app.screen.query_one("#raw-text").render())
        assert "gpu002 (1)" in whole and "gpu[001,003-004] (3)" in whole  # folded like clush
        assert "\x1b" not in app.export_screenshot()


async def test_failure_reasons_from_the_transport_render_literally(tmp_path: Path) -> None:
    app = make_app(scenario(tmp_path / "down", states={
        "gpu003": {"state": "unreachable", "reason": EVIL}}))
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmationModal")
        await pilot.press("escape")
        await status(pilot, "concluded")
        progress = app.screen.step_panel.progress.render()
        assert f"unreachable  gpu003 (1)  {MARKUP} {SHOWN_ANSI}" in progress.plain
        await pilot.press("f")
        # the selected finding's evidence renders after the tab switch (a loaded machine
        # takes more than one pause); on a loaded machine a step's deadline may add a
        # not-measured note first, so the unreachable host's finding is looked for in the list
        wanted = f"gpu003: unreachable: {MARKUP} {SHOWN_ANSI}"
        for _ in range(5):
            try:
                await wait_for(pilot, lambda: wanted in screen_text(app), timeout=5.0)
                break
            except AssertionError:
                await pilot.press("down")
        await wait_for(pilot, lambda: wanted in screen_text(app),
                       what="the unreachable host's reason, as text")
