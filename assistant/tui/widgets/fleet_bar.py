"""What walks will run against: scenario, inventory or hosts, folded — or why there is none.

An operator must never wonder whether they are about to probe production or a simulation."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..context import DiagContext
from ..look import folded
from ..safe_text import host_line


def fleet_text(ctx: DiagContext) -> Text:
    target = ctx.target
    if target is None:
        out = Text("no hosts: ", style="bold red")
        out.append_text(host_line(ctx.target_error))
        out.append("  (runbooks and the KB still work)", style="dim")
        return out
    out = Text.assemble(("fleet ", "dim"))
    out.append_text(folded(target.hosts, "bold"))
    out.append("  ")
    out.append_text(host_line(ctx.describe(), "dim"))
    if ctx.demo and ctx.scenario is not None:
        out.append("\ndemo ", style="bold magenta")
        out.append_text(host_line(ctx.scenario.title))
        out.append(" — the symptom below is what the user reported", style="dim")
    return out


class FleetBar(Static):
    def __init__(self, ctx: DiagContext, **kwargs: object) -> None:
        super().__init__(fleet_text(ctx), **kwargs)  # type: ignore[arg-type]
