"""The walk screen shows the incident the walk is recorded in (and why it joined it), and
``x`` closes that incident with the walk's conclusion as its root cause."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import duckdb
import pytest

from assistant.cli import main
from assistant.tui import messages as m
from assistant.tui.screens.confirm import ConfirmationModal
from assistant.tui.widgets.incident_bar import IncidentBar
from tests.tui.tui_support import make_app, screen_text, status, wait_for

SCENARIO = "hang-xid79-fallen-off-bus"


async def test_the_walk_joins_the_open_incident_and_closes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "diag.duckdb"
    monkeypatch.setenv("DIAG_DB", str(db))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["run", "hang", "--scenario", SCENARIO, "--auto"]) == 1
    con = duckdb.connect(str(db), read_only=True)
    (incident,), = con.execute("SELECT id FROM incidents").fetchall()
    con.close()

    app = make_app(SCENARIO, record=True)
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(m.RunbookChosen("hang"))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmationModal))
        await pilot.press("n")
        await status(pilot, "concluded")
        bar = app.screen.query_one(IncidentBar)
        await wait_for(pilot, lambda: bar.can_close, what="the offer to close")
        shown = screen_text(app)
        assert f"Incident {incident}  joined: same runbook hang on 16 of the same host(s)" \
            in shown
        assert "x closes it with this conclusion as its root cause" in shown
        await pilot.press("x")
        await wait_for(pilot, lambda: bar.closed, what="the incident closed")
        assert f"Incident {incident}  closed" in screen_text(app)
        assert not bar.can_close

    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT status, root_cause, closed_by IS NOT NULL FROM incidents").fetchall()
    sessions = con.execute("SELECT count(*) FROM sessions").fetchone()
    con.close()
    assert sessions == (2,)  # the TUI walk joined the CLI's incident
    [(state, cause, who)] = rows
    assert state == "closed" and who
    assert cause.startswith("GPU hardware fault: A GPU on the named host")
