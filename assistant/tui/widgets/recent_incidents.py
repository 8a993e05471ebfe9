"""Recent incidents from the store, via ``hooks.recent_incidents`` (called in a worker: a
busy or slow store file never delays the home screen). No incidents: just the title."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from .. import messages as msg
from ..hooks import IncidentSummary
from ..safe_text import host_line


def incident_prompt(incident: IncidentSummary) -> Text:
    out = Text.assemble((f"{incident.opened:<16} ", "dim"))
    if incident.simulated:
        out.append("sim ", style="italic magenta")
    if incident.critical:
        out.append(f"{incident.critical} crit ", style="bold red")
    out.append_text(host_line(incident.title or incident.id))
    if incident.conclusion:
        out.append_text(host_line(f"  → {incident.conclusion}", "dim"))
    out.no_wrap = True
    out.overflow = "ellipsis"
    return out


class RecentIncidents(Vertical):
    def compose(self) -> ComposeResult:
        yield Static(Text("Recent incidents", style="bold"), id="recent-title")
        yield OptionList(id="recent-list")

    def on_mount(self) -> None:
        self.query_one("#recent-list").display = False

    def show(self, incidents: Sequence[IncidentSummary]) -> None:
        listing = self.query_one("#recent-list", OptionList)
        listing.clear_options()
        listing.add_options(Option(incident_prompt(i), id=i.id) for i in incidents)
        listing.display = bool(incidents)
        if incidents:
            listing.highlighted = 0

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(msg.IncidentChosen(event.option.id))
