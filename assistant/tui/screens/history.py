"""History: the store's incidents, newest first, filtered by host, runbook, finding code and
time window; Enter on an incident shows its sessions and findings, Enter on a finding opens the
node view of its host.

Every store read runs in a thread worker (a busy store file waits up to its busy timeout, and
that wait must not freeze the screen); answers come back as ``HistoryLoaded`` and
``IncidentDetailLoaded``. A stale answer (the filters changed since) is dropped.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Static

from .. import hooks
from .. import messages as msg
from ..context import DiagContext
from ..safe_text import host_line

DEBOUNCE_S = 0.25
FILTERS = ("host", "runbook", "code", "since")
DEFAULT_SINCE = "90d"
SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "dim"}


def when(value: object) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if hasattr(value, "strftime") else str(value or "")


def severity(value: object) -> Text:
    return Text(str(value or ""), style=SEVERITY_STYLE.get(str(value), ""))


class HistoryScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("n", "node", "Node view"),
        Binding("f", "filters", "Filters", show=False),
    ]

    def __init__(self, ctx: DiagContext, *, incident: str = "", host: str = "") -> None:
        super().__init__()
        self.ctx = ctx
        self.open_incident = incident  # shown once the list arrives (from the home screen)
        self.initial_host = host
        self.incident_id = ""
        self.loaded: dict[str, str] | None = None  # the filters of the rows on screen
        self.requested: dict[str, str] | None = None  # the filters of the last load asked
        self._debounce: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("History", "bold"), ("  incidents, newest first; "
                                                          "Enter: its findings", "dim")),
                     id="history-title")
        with Horizontal(id="history-filters"):
            yield Input(value=self.initial_host, placeholder="host", id="filter-host")
            yield Input(placeholder="runbook", id="filter-runbook")
            yield Input(placeholder="code", id="filter-code")
            yield Input(value=DEFAULT_SINCE, placeholder="7d/30d/all", id="filter-since")
        yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="history-summary")
        yield DataTable(id="history-detail", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#history-table", DataTable)
        table.add_columns("opened", "runbook", "crit", "find", "conclusion / title")
        detail = self.query_one("#history-detail", DataTable)
        detail.add_columns("sev", "host", "code", "message")
        detail.display = False
        table.focus()
        self.reload()

    # --- filters -------------------------------------------------------------------------------

    def filters(self) -> dict[str, str]:
        return {name: self.query_one(f"#filter-{name}", Input).value.strip() for name in FILTERS}

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if self.filters() == self.requested:
            return  # nothing new (the inputs' first values, or typed and typed back)
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(DEBOUNCE_S, self.reload)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._debounce is not None:
            self._debounce.stop()
        self.reload()
        self.query_one("#history-table", DataTable).focus()

    def reload(self) -> None:
        self.requested = self.filters()
        self._load(self.requested)

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def _load(self, filters: dict[str, str]) -> None:
        try:
            # over a replayed scenario its (simulated) walks are listed with the rest
            result = hooks.history_rows(host=filters["host"], runbook=filters["runbook"],
                                        code=filters["code"], since=filters["since"],
                                        include_simulated=self.ctx.simulated)
        except Exception as exc:  # a bad window ("7x") or a busy store: say it, keep the screen
            self.post_message(msg.HistoryLoaded(filters, {}, str(exc)))
            return
        self.post_message(msg.HistoryLoaded(filters, result))

    def on_history_loaded(self, message: msg.HistoryLoaded) -> None:
        if message.filters != self.filters():
            return  # the operator typed on: another load is coming
        summary = self.query_one("#history-summary", Static)
        table = self.query_one("#history-table", DataTable)
        if message.error:
            summary.update(host_line(message.error, "red"))
            return
        self.loaded = message.filters
        table.clear()
        incidents = message.result.get("incidents", [])
        for row in incidents:
            text = row.get("conclusion") or row.get("title") or row["id"]
            table.add_row(when(row.get("opened")), host_line(",".join(row.get("runbooks") or ())),
                          str(row.get("critical") or 0), str(row.get("findings") or 0),
                          host_line(text), key=str(row["id"]))
        counts = message.result.get("counts", {})
        summary.update(Text(f"{counts.get('incidents', len(incidents))} incidents, "
                            f"{counts.get('findings', 0)} findings", style="dim"))
        if self.open_incident:
            wanted, self.open_incident = self.open_incident, ""
            if wanted in table.rows:
                table.move_cursor(row=table.get_row_index(wanted))
            self.show_incident(wanted)

    # --- one incident --------------------------------------------------------------------------

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = event.row_key.value
        if event.data_table.id == "history-table" and key:
            self.show_incident(key)
        elif event.data_table.id == "history-detail":
            host = event.data_table.get_row(event.row_key)[1]
            if str(host):
                self.post_message(msg.NodeChosen(str(host)))

    def show_incident(self, incident_id: str) -> None:
        self.incident_id = incident_id
        self._detail(incident_id)

    @work(thread=True, exclusive=True, group="incident", exit_on_error=False)
    def _detail(self, incident_id: str) -> None:
        try:
            detail = hooks.incident_detail(incident_id)
        except Exception as exc:
            self.post_message(msg.IncidentDetailLoaded(incident_id, {}, str(exc)))
            return
        self.post_message(msg.IncidentDetailLoaded(incident_id, detail))

    def on_incident_detail_loaded(self, message: msg.IncidentDetailLoaded) -> None:
        if message.incident_id != self.incident_id:
            return
        summary = self.query_one("#history-summary", Static)
        if message.error:
            summary.update(host_line(message.error, "red"))
            return
        sessions = message.detail.get("sessions", [])
        parts = [f"{s['runbook']}→{s.get('conclusion') or s.get('status')} "
                 f"({s.get('hosts_n') or 0} hosts, {s.get('operator') or '?'})"
                 for s in sessions]
        summary.update(host_line(f"{message.incident_id}: {len(sessions)} session(s): "
                                 + "; ".join(parts)))
        detail = self.query_one("#history-detail", DataTable)
        detail.clear()
        for i, row in enumerate(message.detail.get("findings", [])):
            detail.add_row(severity(row.get("severity")), host_line(row.get("host") or ""),
                           host_line(row.get("code")), host_line(row.get("message") or ""),
                           key=str(i))
        detail.display = True
        if detail.row_count:
            detail.focus()

    # --- keys ----------------------------------------------------------------------------------

    def action_node(self) -> None:
        """The node view of the highlighted finding's host, else of the host filter."""
        detail = self.query_one("#history-detail", DataTable)
        host = ""
        if detail.display and detail.row_count and detail.has_focus:
            host = str(detail.get_row_at(detail.cursor_row)[1])
        host = host or self.filters()["host"]
        if host:
            self.post_message(msg.NodeChosen(host))
        else:
            self.notify("type a host in the host filter, or highlight a finding", markup=False)

    def action_filters(self) -> None:
        self.query_one("#filter-host", Input).focus()

    def action_back(self) -> None:
        detail = self.query_one("#history-detail", DataTable)
        if detail.has_focus or isinstance(self.focused, Input):
            self.query_one("#history-table", DataTable).focus()
        else:
            self.app.pop_screen()


