"""The TUI and ``diag run`` record a walk through one seam (``assistant.walks``): the same walk
leaves the same rows — target, job, hosts, steps, probe runs, findings, actions — whichever
front end ran it."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from assistant.cli import main
from assistant.tui import messages as m
from assistant.tui.screens.confirm import ConfirmationModal
from tests.tui.tui_support import make_app, status, wait_for

SCENARIO = "hang-xid79-fallen-off-bus"


def recorded(db: Path) -> dict[str, Any]:
    """What a store holds of its one session, without ids and times."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        (target, runbook, status_, conclusion, hosts_n), = con.execute(
            "SELECT target, runbook, status, conclusion, hosts_n FROM sessions").fetchall()
        job, = con.execute("SELECT job_id FROM incidents").fetchone()
        hosts = con.execute("SELECT host, rack, leaf, rail, attrs FROM hosts "
                            "ORDER BY host").fetchall()
        steps = con.execute("SELECT seq, node, kind, answer, goto, because FROM steps "
                            "ORDER BY seq").fetchall()
        runs = con.execute("SELECT step_seq, host, probe, state FROM probe_runs "
                           "ORDER BY step_seq, probe, host").fetchall()
        findings = con.execute("SELECT step_seq, code, severity, host, message FROM findings "
                               "ORDER BY step_seq, finding_no, host").fetchall()
        actions = con.execute("SELECT step_seq, node, command, hosts, confirmed, result "
                              "FROM actions ORDER BY step_seq").fetchall()
    finally:
        con.close()
    return {"session": (runbook, status_, conclusion, hosts_n), "target": json.loads(target),
            "job": job, "hosts": hosts, "steps": steps, "runs": runs, "findings": findings,
            "actions": actions}


async def test_tui_and_cli_record_the_same_walk(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cli_db, tui_db = tmp_path / "cli.duckdb", tmp_path / "tui.duckdb"
    monkeypatch.setenv("DIAG_DB", str(cli_db))
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", "hang", "--scenario", SCENARIO, "--auto"]) == 1

    monkeypatch.setenv("DIAG_DB", str(tui_db))
    app = make_app(SCENARIO, record=True)
    async with app.run_test(size=(100, 30)) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        # The walk proposes a drain: declined, as `--auto` (which asks no one) declines it.
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        await pilot.press("n")
        await status(pilot, "concluded")
        assert app.screen.recorded  # type: ignore[attr-defined]

    by_cli, by_tui = recorded(cli_db), recorded(tui_db)
    assert by_cli["target"]["scenario"] == SCENARIO  # the target is recorded, not empty
    assert by_cli["findings"], "the scenario plants an XID: a walk without findings proves nothing"
    assert by_tui == by_cli


async def test_a_walk_closed_mid_step_is_interrupted_through_its_recording(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app closed while a step runs: the session is marked interrupted through the walk's
    own recording (its store; its journal when that refuses), not left 'running'."""
    import time

    from tests.tui.tui_support import Messages
    from tests.tui.tui_support import write_scenario as scenario

    db = tmp_path / "tui.duckdb"
    monkeypatch.setenv("DIAG_DB", str(db))
    app = make_app(scenario(tmp_path / "slow", hosts="gpu[001-004]"), delay_s=30.0,
                   record=True)
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: len(seen.of(m.ProbeStarted)) == 4, what="fan-out")
        await wait_for(pilot, lambda: db.exists(), what="the session recorded")
    deadline = time.monotonic() + 20
    state = None
    while time.monotonic() < deadline:
        with contextlib.suppress(duckdb.Error):
            con = duckdb.connect(str(db), read_only=True)
            try:
                state = con.execute("SELECT status FROM sessions").fetchall()
            finally:
                con.close()
            if state == [("interrupted",)]:
                break
        time.sleep(0.2)
    assert state == [("interrupted",)]
