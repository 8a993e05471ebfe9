"""What the hosts actually printed for a probe, folded like ``clush -b``: hosts with identical
output share one block headed ``gpu[001-031] (31)``, the odd ones out stand apart.

This is host output verbatim — the one place it is shown whole — so it goes through
``host_text``: markup stays text and terminal escapes are shown as ``␛[31m``, never obeyed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from assistant.runbook.outputs import Outputs

from ..look import folded
from ..safe_text import host_text

MAX_CHARS = 16 * 1024  # per block: enough to read, bounded for a 3 a.m. terminal


def output_text(probe: str, hosts: Sequence[str], raw: Mapping[tuple[str, str], str],
                others: Sequence[str] = ()) -> Text:
    """The finding's hosts first, then the rest of the fleet for comparison."""
    out = _groups(probe, hosts, raw)
    rest = [h for h in others if h not in set(hosts)]
    if rest:
        out.append("\nthe other hosts, for comparison\n", style="bold underline")
        out.append_text(_groups(probe, rest, raw))
    return out


def _groups(probe: str, hosts: Sequence[str], raw: Mapping[tuple[str, str], str]) -> Text:
    groups: dict[str, list[str]] = {}
    missing = []
    for host in hosts:
        if (probe, host) in raw:
            groups.setdefault(raw[(probe, host)], []).append(host)
        else:
            missing.append(host)
    out = Text()
    for output, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        out.append("─" * 15 + "\n", style="dim")
        out.append_text(folded(names, "bold"))
        out.append("\n" + "─" * 15 + "\n", style="dim")
        shown = output[:MAX_CHARS]
        out.append_text(host_text(shown.rstrip("\n") or "(no output)"))
        if len(output) > MAX_CHARS:
            out.append(f"\n… {len(output) - MAX_CHARS} more characters", style="dim")
        out.append("\n")
    if missing:
        out.append_text(folded(missing, "bold"))
        out.append(": no output kept (not reached, or nothing to run)\n", style="dim")
    return out


class RawOutputScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "app.pop_screen", "Back")]

    def __init__(self, probe: str, hosts: Sequence[str], raw: Mapping[tuple[str, str], str],
                 others: Sequence[str] = ()) -> None:
        super().__init__()
        self.probe = probe
        self.hosts = list(hosts)
        self.others = list(others)
        # a copy: the walk thread may add to it meanwhile (a walk's outputs are copied
        # packed, not unpacked whole on the UI's thread)
        self.raw = raw.snapshot() if isinstance(raw, Outputs) else dict(raw)

    def compose(self) -> ComposeResult:
        title = Text.assemble(("output of ", "dim"), (self.probe, "bold"), (" on ", "dim"))
        title.append_text(folded(self.hosts))
        yield Static(title, id="raw-header")
        with VerticalScroll(id="raw-body"):
            yield Static(output_text(self.probe, self.hosts, self.raw, self.others), id="raw-text")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#raw-body").focus()
