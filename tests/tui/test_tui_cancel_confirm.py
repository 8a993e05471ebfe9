"""Cancelling a slow probe step, and the confirmation modal's "no" (Escape, n, the button)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from assistant.tui import messages as m
from assistant.tui.screens.confirm import ConfirmationModal
from assistant.tui.screens.walk import WalkScreen
from tests.tui.tui_support import Messages, make_app, status, wait_for
from tests.tui.tui_support import write_scenario as scenario


@pytest.mark.parametrize("key", ["escape", "ctrl+c"])
async def test_cancel_during_a_slow_step_leaves_the_walk_usable(tmp_path: Path,
                                                                key: str) -> None:
    # 16 hosts that take 30 s each to answer: the cancel must not wait for them.
    app = make_app(scenario(tmp_path / "slow", hosts="gpu[001-016]"), delay_s=30.0)
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: len(seen.of(m.ProbeStarted)) == 16, what="fan-out")
        screen = app.screen
        assert isinstance(screen, WalkScreen) and screen.busy
        await pilot.press("f", "w")  # the UI answers keys while the probes run
        assert screen.busy
        await pilot.press(key)
        await status(pilot, "cancelled", timeout=15)  # well before the 30 s the hosts need
        # the first step is the evidence sweep: the one cancelled
        assert [c.node for c in seen.of(m.StepCancelled)] == ["sweep"]
        finished = seen.of(m.ProbeFinished)
        assert len(finished) == 16 and {f.event.state for f in finished} == {"cancelled"}
        walk = screen.driver.walk
        assert walk.steps == [] and walk.current == "sweep" and walk.status == "ready"
        assert screen.step_panel.progress.counts("sweep") == (0, 0, 0, 16)
        # Run it again, this time with hosts that answer at once: the walk goes on.
        app.ctx.target.transport.delay_s = 0  # type: ignore[union-attr]
        await pilot.press("r")
        await status(pilot, "waiting")
        assert seen.nodes(m.QuestionAsked) == ["ask-phase"]
        assert [b.operation for b in seen.of(m.WalkBusy)] == ["run", "retry"]


async def test_ctrl_c_when_idle_does_not_cancel_anything(tmp_path: Path) -> None:
    app = make_app(scenario(tmp_path / "fast"))
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await status(pilot, "waiting")
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert seen.of(m.StepCancelled) == [] and app.screen.status == "waiting"


@pytest.mark.parametrize("key", ["escape", "n", "no-button"])
async def test_confirmation_no_is_not_confirmed(key: str) -> None:
    app = make_app("demo")
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        await wait_for(pilot, lambda: app.focused is not None)
        assert app.focused.id == "no"  # a tired Enter says no
        if key == "no-button":
            await pilot.pause()
            await pilot.click("#no")
        else:
            await pilot.press(key)
        await status(pilot, "concluded")
        assert [a.confirmed for a in seen.of(m.ConfirmationAnswered)] == [False]
        decided = seen.of(m.ActionDecided)[0].event
        assert (decided.node, decided.confirmed, decided.result) == (
            "drain-ib-node", False, "not confirmed; not run")
        walk = app.screen.driver.walk
        assert next(s.action for s in walk.steps if s.node == "drain-ib-node")["confirmed"] is False
        assert walk.conclusion().id == "ib-link-fault"  # the walk goes on to its conclusion


async def test_confirmation_shows_the_exact_command_per_host(tmp_path: Path) -> None:
    # Three hosts unreachable: the drain action names each with $HOST replaced.
    down = {"state": "unreachable", "reason": "connection refused"}
    app = make_app(scenario(tmp_path / "down", hosts="gpu[001-008]",
                            states={"gpu[002,005-006]": down}))
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        modal = app.screen
        shown = "\n".join(d.plain for d in modal.details)
        for host in ("gpu002", "gpu005", "gpu006"):
            assert (f'{host}  scontrol update NodeName={host} State=DRAIN Reason="diag: '
                    'unreachable during job hang"') in shown
        assert "gpu001" not in shown
        assert "gpu[002,005-006] (3)" in modal.body.plain
        await pilot.press("escape")
        await status(pilot, "concluded")
        assert app.screen.driver.walk.conclusion().id == "host-dead"


async def test_leaving_an_unfinished_walk_asks_first(tmp_path: Path) -> None:
    app = make_app(scenario(tmp_path / "fast"))
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await status(pilot, "waiting")
        walk_screen = app.screen
        await pilot.press("escape")
        assert isinstance(app.screen, ConfirmationModal)
        await pilot.press("escape")  # no: stay
        assert app.screen is walk_screen
        await pilot.press("escape", "y")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HomeScreen")



async def test_quitting_during_a_fan_out_does_not_wait_for_the_hosts(tmp_path: Path) -> None:
    app = make_app(scenario(tmp_path / "slow", hosts="gpu[001-016]"), delay_s=30.0)
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: len(seen.of(m.ProbeStarted)) == 16, what="fan-out")
        assert any(t.name.startswith("fanout-") for t in threading.enumerate())
        started = time.monotonic()
        await pilot.press("ctrl+q")
    # The app is gone, and so is the fan-out: its threads were told to stop, not waited on
    # for the 30 s the hosts would have taken.
    while any(t.name.startswith("fanout-") and t.is_alive() for t in threading.enumerate()):
        assert time.monotonic() - started < 10, "the fan-out outlived the app"
        await asyncio.sleep(0.05)
