"""SVG snapshots at 80x24: home (dark and light), a walk waiting mid-way with its probes done,
the confirmation modal, the findings table and the conclusion.

Everything that moves is frozen: the app is "still" (no cursor blink, no animation), the
session id is fixed, replay has no delay, and toasts are cleared before the shot. Update with
``pytest tests/tui --snapshot-update`` after looking at the new SVGs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from assistant.tui import messages as m
from assistant.tui.hooks import IncidentSummary
from assistant.tui.screens.confirm import ConfirmationModal
from assistant.tui.widgets.runbook_tree import RunbookTree
from tests.tui.tui_support import make_app, wait_for
from tests.tui.tui_support import write_scenario as scenario

SIZE = (80, 24)
INCIDENTS = [
    IncidentSummary("inc-0042", "hang on job 81723: gpu013 IB link flapping",
                    "2024-06-01 03:12", "closed", "IB link down or flapping", ("hang",), 16, 2, 5),
    IncidentSummary("inc-0041", "low busbw after the driver upgrade", "2024-05-30 14:40",
                    "open", "", ("low-bandwidth",), 32, 0, 3),
]


async def home_ranked(pilot: Pilot[Any]) -> None:
    screen = pilot.app.screen
    symptom = screen.query_one("#symptom").value
    await wait_for(pilot, lambda: screen.query_one("#results").results and
                   screen.query_one("#results").symptom == symptom, what="ranking")
    await wait_for(pilot, lambda: screen.query_one("#recent-list").option_count == 2)
    await pilot.pause()


async def walked(pilot: Pilot[Any], runbook: str, *wanted: str, answer: str = "",
                 focus: str = "") -> None:
    """Open *runbook*, say *answer* to its confirmation if any, wait for a status (and for
    the focus to land on *focus*: a focused list is drawn differently)."""
    app = pilot.app
    app.post_message(m.RunbookChosen(runbook))
    await wait_for(pilot, lambda: getattr(app.screen, "status", None) in wanted or
                   isinstance(app.screen, ConfirmationModal), what="the walk")
    if answer:
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        await pilot.press(answer)
    await wait_for(pilot, lambda: getattr(app.screen, "status", None) in wanted and
                   not app.screen.busy, what=f"status {wanted}")
    if focus:
        await wait_for(pilot, lambda: app.focused is app.screen.query_one(focus),
                       what=f"focus on {focus}")
    await settle(pilot)


async def settle(pilot: Pilot[Any]) -> None:
    pilot.app.clear_notifications()
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


@pytest.fixture()
def healthy(tmp_path: Path) -> Path:
    return scenario(tmp_path / "healthy", hosts="gpu[001-016]")


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light"])
def test_home(snap_compare: Any, theme: str) -> None:
    app = make_app("demo", demo=True, theme=theme, incidents=lambda: INCIDENTS)
    assert snap_compare(app, terminal_size=SIZE, run_before=home_ranked)


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light"])
def test_walk_waiting_on_a_question(snap_compare: Any, healthy: Path, theme: str) -> None:
    app = make_app(healthy, theme=theme)

    async def run_before(pilot: Pilot[Any]) -> None:
        await walked(pilot, "hang", "waiting", focus="#choices")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_confirmation_modal(snap_compare: Any) -> None:
    app = make_app("demo")

    async def run_before(pilot: Pilot[Any]) -> None:
        pilot.app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmationModal))
        await wait_for(pilot, lambda: pilot.app.focused is not None)
        # the walk's tree beneath the modal moves its cursor to the current step after a
        # refresh: under load the snapshot came first (the row above it highlighted)
        tree = pilot.app.screen_stack[-2].query_one(RunbookTree)
        await wait_for(pilot, lambda: tree.current_item is not None
                       and tree.cursor_node is tree.current_item)
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_findings(snap_compare: Any) -> None:
    app = make_app("demo")

    async def run_before(pilot: Pilot[Any]) -> None:
        await walked(pilot, "hang", "concluded", answer="y", focus="#kb-links")
        await pilot.press("f")
        await wait_for(pilot, lambda: pilot.app.focused is pilot.app.screen.query_one(
            "#findings-table"))
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_conclusion(snap_compare: Any) -> None:
    app = make_app("demo")

    async def run_before(pilot: Pilot[Any]) -> None:
        await walked(pilot, "hang", "concluded", answer="n", focus="#kb-links")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_acceptance_matrix(snap_compare: Any) -> None:
    """L1 judged on four repaired nodes, the walk waiting before L2: gpu003's dcgm-diag FAIL."""
    app = make_app(Path(__file__).parents[2] / "fixtures/scenarios/acceptance-dcgm-fail-one-node")

    async def run_before(pilot: Pilot[Any]) -> None:
        await walked(pilot, "acceptance", "waiting")
        await pilot.press("2")  # skip L0
        await wait_for(pilot, lambda: pilot.app.screen.current == "want-l1"
                       and pilot.app.screen.status == "waiting" and not pilot.app.screen.busy)
        await pilot.press("1")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmationModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "current", "") == "want-l2"
                       and pilot.app.screen.status == "waiting" and not pilot.app.screen.busy)
        await pilot.press("a")
        await wait_for(pilot, lambda: pilot.app.focused is pilot.app.screen.query_one(
            "#matrix-table"))
        await pilot.press("down", "down")  # gpu003: its first failure under the table
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
