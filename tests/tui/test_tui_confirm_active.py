"""The TUI's confirmation for a step that loads the nodes names the tests and the hosts (a
probe step has no command: the action modal alone would show an empty one)."""

from __future__ import annotations

import pytest

from assistant.runbook.library import get_runbook
from assistant.tui.screens.confirm import action_confirmation

pytestmark = pytest.mark.tui


def test_an_active_step_is_confirmed_with_its_tests_and_hosts() -> None:
    node = get_runbook("acceptance").node("l1-gpu")
    modal = action_confirmation(node, ("gpu001", "gpu002"))
    assert modal.title_text == "L1 each GPU: run these tests?"
    assert "dcgm-diag, gpu-burn, nvbandwidth" in modal.body.plain
    assert "gpu001" in modal.body.plain or "gpu[001-002]" in modal.body.plain
    assert [d.plain for d in modal.details] == ["gpu001", "gpu002"]
    assert modal.yes_label == "Yes, run them"


def test_an_action_still_shows_its_command() -> None:
    node = get_runbook("acceptance").node("offer-resume")
    modal = action_confirmation(node, ("gpu001",))
    assert "scontrol update NodeName=gpu001 State=RESUME" in modal.details[0].plain
