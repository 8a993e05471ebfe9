"""Shared by the TUI tests: scenarios written on the fly, an app over them, waiting helpers.

Scenarios are plain directories (``fixtures/scenarios`` format) so a test can say exactly what
the fleet prints: a healthy fleet reaches the hang runbook's questions, which no shipped
scenario does. Apps are built "still" (no cursor blink, no animation) with a fixed session id,
so snapshots are byte-stable.
"""

from __future__ import annotations

import html
import re
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from textual.message import Message
from textual.pilot import Pilot

from assistant.target import open_target
from assistant.tui import messages as m
from assistant.tui.app import DiagApp
from assistant.tui.context import DiagContext, FleetOptions
from assistant.tui.hooks import IncidentSummary
from tests import yamlc

M = TypeVar("M", bound=Message)
MARKUP = "[bold]x[/]"
ANSI = "\x1b[31mred\x1b[0m"
SHOWN_ANSI = "␛[31mred␛[0m"


def write_scenario(directory: Path, *, runbook: str = "hang", hosts: str = "gpu[001-004]",
                   outputs: dict[str, dict[str, str]] | None = None,
                   states: dict[str, Any] | None = None, delay_s: float = 0.0,
                   title: str = "test fleet", symptom: str = "training hangs") -> Path:
    """A scenario directory; *outputs* maps probe -> host -> output text (written to files)."""
    directory.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"title": title, "symptom": symptom, "runbook": runbook,
                            "hosts": hosts, "delay_s": delay_s}
    if outputs:
        data["outputs"] = {}
        for probe, per_host in outputs.items():
            data["outputs"][probe] = {}
            for host, text in per_host.items():
                name = f"{probe}-{host}.txt"
                (directory / name).write_text(text, encoding="utf-8")
                data["outputs"][probe][host] = name
    if states:
        data["states"] = states
    (directory / "scenario.yaml").write_text(yamlc.dump(data, allow_unicode=True),
                                             encoding="utf-8")
    return directory


def make_app(scenario: str | Path = "demo", *, delay_s: float = 0.0, demo: bool = False,
             export_dir: Path | None = None,
             incidents: Callable[[], list[IncidentSummary]] | None = None,
             theme: str | None = None, session: str = "test-session",
             record: bool = False) -> DiagApp:
    """An app over a replay scenario (no per-command delay unless asked).

    Walks are recorded in the test's own store (DIAG_DB, see tests/conftest.py) only when
    *record* is set; otherwise the session id is the fixed *session*.
    """
    target = open_target(scenario=str(scenario))
    target.transport.delay_s = delay_s  # type: ignore[attr-defined]
    # Exports go to a temporary directory unless a test names one: never into the cwd.
    export_dir = export_dir or Path(tempfile.mkdtemp(prefix="diag-tui-test-"))
    ctx = DiagContext(FleetOptions(scenario=str(scenario)), demo=demo, target=target,
                      session_id=lambda: session, export_dir=export_dir,
                      incidents=incidents or (lambda: []),
                      record=record)
    return DiagApp(ctx, still=True, theme=theme)


class Messages:
    """The message hook: every TUI message (``assistant.tui.messages``) the app handled."""

    def __init__(self) -> None:
        self.seen: list[Message] = []
        self.batches: list[m.ProbeEvents] = []

    def __call__(self, message: Message) -> None:
        # A bubbling message is handled by each pump on its way up: keep it once.
        if isinstance(message, m.ProbeEvents):  # each host's event, as its own message
            if all(message is not b for b in self.batches):
                self.batches.append(message)
                self.seen.extend(message.messages())
        elif type(message).__module__ == m.__name__ and all(message is not s for s in self.seen):
            self.seen.append(message)

    def of(self, kind: type[M]) -> list[M]:
        return [s for s in self.seen if isinstance(s, kind)]

    def nodes(self, kind: type[m.EngineEvent]) -> list[str]:
        return [s.event.node for s in self.of(kind)]  # type: ignore[attr-defined]


# Generous: the walk thread shares two cores with whatever else the machine runs; a healthy
# run takes well under a second per walk, the timeout only bounds a broken one.
TIMEOUT_S = 120.0


async def wait_for(pilot: Pilot[Any], condition: Callable[[], object], timeout: float = TIMEOUT_S,
                   what: str = "") -> None:
    """Let the app run until *condition* holds (walk threads and workers need real time)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.02)


async def ranked(pilot: Pilot[Any], messages: Messages, query: str) -> m.MatchesUpdated:
    await wait_for(pilot, lambda: any(u.query == query for u in messages.of(m.MatchesUpdated)),
                   what=f"ranking of {query!r}")
    return [u for u in messages.of(m.MatchesUpdated) if u.query == query][-1]


async def open_runbook(pilot: Pilot[Any], runbook: str) -> None:
    """Move the results' highlight to *runbook* with the arrow keys and press Enter."""
    results = pilot.app.screen.query_one("#results")
    results.focus()
    await pilot.pause()
    ids = [r.id for r in results.results]  # type: ignore[attr-defined]
    for _ in range(ids.index(runbook) - (results.highlighted or 0)):  # type: ignore[attr-defined]
        await pilot.press("down")
    await pilot.press("enter")


async def status(pilot: Pilot[Any], *wanted: str, timeout: float = TIMEOUT_S) -> None:
    """Wait until the walk screen is idle in one of *wanted* statuses."""
    await wait_for(pilot, lambda: getattr(pilot.app.screen, "status", None) in wanted and
                   not pilot.app.screen.busy, timeout, f"walk status {wanted}")  # type: ignore


def screen_text(app: DiagApp) -> str:
    """What the terminal shows, as plain text (the SVG screenshot without its markup)."""
    svg = app.export_screenshot()
    texts = re.findall(r"<text[^>]*>(.*?)</text>", svg, flags=re.S)
    return html.unescape("".join(texts)).replace("\xa0", " ")


CELL_X = 12.2  # Textual's SVG export: one terminal cell's width, and the left margin


def screen_lines(app: DiagApp) -> list[str]:
    """What the terminal shows, line by line (the SVG screenshot's text grouped by row)."""
    svg = app.export_screenshot()
    rows: dict[str, list[tuple[float, str]]] = {}
    for attrs, text in re.findall(r"<text([^>]*)>(.*?)</text>", svg, flags=re.S):
        line = re.search(r'clip-path="url\(#[\w-]*-line-(\d+)\)"', attrs)
        x = re.search(r'\bx="([\d.]+)"', attrs)
        if line and x:
            rows.setdefault(line.group(1), []).append((float(x.group(1)), text))
    out = []
    for key in sorted(rows, key=int):
        line = ""
        for x, text in sorted(rows[key]):
            column = round((x - CELL_X) / CELL_X)  # cells are 12.2 units wide, from 12.2
            line = line.ljust(column) + html.unescape(text).replace("\xa0", " ")
        out.append(line.rstrip())
    return out


def paste(app: DiagApp, text: str) -> None:
    """Paste *text* into the focused widget, as a terminal's bracketed paste does."""
    from textual import events

    assert app.focused is not None
    app.focused.post_message(events.Paste(text))


def all_of(items: Iterable[object]) -> list[str]:
    return [type(i).__name__ for i in items]
