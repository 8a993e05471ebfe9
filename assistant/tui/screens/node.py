"""The node view: one host's past incidents and findings, from ``history.history(host=...)``.

Opened by ``NodeChosen`` (Enter on a finding in History, or ``n`` there). The read runs in a
thread worker and comes back as ``NodeLoaded``; Enter on an incident opens it in History.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from .. import hooks
from .. import messages as msg
from ..context import DiagContext
from ..safe_text import host_line, join
from .history import severity, when


class NodeScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    def __init__(self, ctx: DiagContext, host: str) -> None:
        super().__init__()
        self.ctx = ctx
        self.host = host

    def compose(self) -> ComposeResult:
        yield Static(join([Text("Node ", style="bold"), host_line(self.host, "bold")]),
                     id="node-title")
        yield Static(Text("loading…", style="dim"), id="node-profile")
        yield Static(Text("Incidents", style="bold"), classes="node-heading")
        yield DataTable(id="node-incidents", cursor_type="row")
        yield Static(Text("Findings on this host", style="bold"), classes="node-heading")
        yield DataTable(id="node-findings", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#node-incidents", DataTable).add_columns(
            "opened", "runbook", "find", "conclusion / title")
        self.query_one("#node-findings", DataTable).add_columns(
            "when", "sev", "code", "message")
        self.query_one("#node-incidents", DataTable).focus()
        self._load(self.host)

    @work(thread=True, exclusive=True, group="node", exit_on_error=False)
    def _load(self, host: str) -> None:
        try:
            data = hooks.node_history(host, include_simulated=self.ctx.simulated)
        except Exception as exc:
            self.post_message(msg.NodeLoaded(host, {}, str(exc)))
            return
        self.post_message(msg.NodeLoaded(host, data))

    def on_node_loaded(self, message: msg.NodeLoaded) -> None:
        profile = self.query_one("#node-profile", Static)
        if message.error:
            profile.update(host_line(message.error, "red"))
            return
        p = message.data.get("host") or {}
        place = " ".join(f"{k} {p[k]}" for k in ("rack", "leaf", "rail") if p.get(k))
        profile.update(host_line(
            f"{p.get('sessions', 0)} sessions, {p.get('incidents', 0)} incidents"
            f"{', last seen ' + when(p.get('last_seen')) if p.get('last_seen') else ''}"
            f"{'  ' + place if place else ''}", "dim"))
        incidents = self.query_one("#node-incidents", DataTable)
        incidents.clear()
        for row in message.data.get("incidents", []):
            incidents.add_row(when(row.get("opened")),
                              host_line(",".join(row.get("runbooks") or ())),
                              str(row.get("findings") or 0),
                              host_line(row.get("conclusion") or row.get("title") or ""),
                              key=str(row["id"]))
        findings = self.query_one("#node-findings", DataTable)
        findings.clear()
        for row in message.data.get("rows", []):
            findings.add_row(when(row.get("ts")), severity(row.get("severity")),
                             host_line(row.get("code")), host_line(row.get("message") or ""))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.data_table.id == "node-incidents" and event.row_key.value:
            self.post_message(msg.IncidentChosen(event.row_key.value))

    def action_back(self) -> None:
        self.app.pop_screen()
