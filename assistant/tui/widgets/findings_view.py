"""Findings as a table: sortable (severity, code, host), filterable, evidence on selection.

Findings that say the same thing about different hosts are one row, as in the CLI's report
(``probes.hostfold``): a fault on 512 hosts is one row naming ``gpu[001-512]``, its evidence
per host, not 512 rows to scroll — which the table also rebuilt whole on each burst, ~0.3 s of
the event loop for 2,000 rows.

Everything in a finding but its severity and code comes from hosts — message, host names,
evidence — so every cell and the evidence pane are built with ``safe_text``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static

from probes.hostfold import FoldKey, fold_groups, fold_key
from probes.model import Finding

from .. import messages as msg
from ..look import folded, severity_rank, severity_text
from ..safe_text import host_line, host_text

SORTS = ("severity", "code", "host")
COLUMNS = (("severity", "sev"), ("code", "code"), ("host", "hosts"), ("message", "message"))


def matches(finding: Finding, needle: str) -> bool:
    """Filter: every word must appear in the severity, code, probe, hosts or message."""
    hay = " ".join([finding.severity, finding.code, finding.probe, *finding.hosts,
                    finding.message]).lower()
    return all(word in hay for word in needle.lower().split())


def sort_key(finding: Finding, by: str) -> tuple[Any, ...]:
    first_host = min(finding.hosts) if finding.hosts else ""
    if by == "code":
        return (finding.code, -severity_rank(finding.severity), first_host)
    if by == "host":
        return (first_host, -severity_rank(finding.severity), finding.code)
    return (-severity_rank(finding.severity), finding.code, first_host)


def evidence_text(finding: Finding) -> Text:
    """The detail pane: what, where, and the evidence as indented key: value lines."""
    out = Text.assemble(severity_text(finding.severity), " ", (finding.code, "bold"))
    if finding.probe:
        out.append(f"  probe {finding.probe}", style="dim")
    out.append("\nhosts ")
    out.append(folded(finding.hosts, "bold"))
    if 1 < len(finding.hosts) <= 8:
        out.append("  ")
        out.append(host_line(", ".join(finding.hosts), "dim"))
    out.append("\n")
    out.append(host_text(finding.message))
    series = finding.evidence.get("series")
    if isinstance(series, dict) and series:  # a monitoring finding: its signal over the window
        from assistant.monitoring.spark import sparkline

        out.append(f"\nover the window from {finding.evidence.get('series_from', '?')}, "
                   f"{finding.evidence.get('series_step_s', '?')} s a point:", style="dim")
        for host, values in series.items():
            drawn = sparkline([v if isinstance(v, int | float) else None for v in values])
            out.append("\n  ")
            out.append(host_line(host, "bold"))
            out.append(f" {drawn}", style="cyan")
    shown = {k: v for k, v in finding.evidence.items() if k != "series"}
    for line in _lines(shown, 0):
        out.append("\n")
        out.append(line)
    return out


def _lines(value: Any, depth: int) -> Iterable[Text]:
    pad = "  " * depth
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                yield Text.assemble(pad, host_line(key, "bold"), ":")
                yield from _lines(item, depth + 1)
            else:
                yield Text.assemble(pad, host_line(key, "bold"), ": ", host_line(item))
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list) and item:
                yield Text(f"{pad}-")
                yield from _lines(item, depth + 1)
            else:
                yield Text.assemble(pad, "- ", host_line(item))
    else:
        yield Text.assemble(pad, host_line(value))


class FindingsView(Vertical):
    """``add(finding)`` as they are raised; ``replace(findings)`` after an undo."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "cycle_sort", "Sort"),
        Binding("v", "view_output", "Host output"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.findings: list[Finding] = []
        self._keys: list[FoldKey] = []  # each finding's fold key, computed once as it arrives
        self._groups: set[FoldKey] = set()  # the rows the table has, filter aside
        self.shown: list[Finding] = []
        self._shown_keys: list[FoldKey] = []
        self.sort_by = "severity"
        self.selected: Finding | None = None
        self._selected_key: FoldKey | None = None  # a folded row keeps it as hosts join
        # whether the operator has picked a row (moved the cursor in the table): until then the
        # pane shows the most severe finding, however the findings happened to arrive
        self._chosen = False
        self._pending: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter findings (code, host, words)…  / to focus",
                    id="findings-filter", compact=True)
        with Vertical(id="findings-body"):
            yield DataTable(id="findings-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="findings-detail"):
                yield Static(Text("no finding selected", style="dim"), id="evidence")

    def on_mount(self) -> None:
        self.rebuild()

    def on_resize(self) -> None:
        self.rebuild()

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one(DataTable)

    def add(self, finding: Finding) -> None:
        """Findings arrive in bursts (one per host and code): rebuild once per burst."""
        self.findings.append(finding)
        self._keys.append(key := fold_key(finding))
        self._groups.add(key)
        if self._pending is None:
            self._pending = self.set_timer(0.2, self.rebuild)

    def replace(self, findings: Iterable[Finding]) -> None:
        self.findings = list(findings)
        self._keys = [fold_key(f) for f in self.findings]
        self._groups = set(self._keys)
        self.rebuild()

    @property
    def rows(self) -> int:
        """How many rows the findings fold into (what the tab counts: a fault on 200 hosts
        is one row, not 200), known as soon as a finding arrives."""
        return len(self._groups)

    def action_cycle_sort(self) -> None:
        self.cycle_sort()

    def action_view_output(self) -> None:
        """What the finding's hosts printed for its probe (the screen shows it folded)."""
        row = self.table.cursor_row
        if 0 <= row < len(self.shown) and self.shown[row].probe:
            finding = self.shown[row]
            self.post_message(msg.RawOutputRequested(finding.probe, finding.hosts))

    def cycle_sort(self) -> None:
        self.sort(SORTS[(SORTS.index(self.sort_by) + 1) % len(SORTS)])

    def sort(self, by: str) -> None:
        self.sort_by = by
        self.rebuild()
        self.app.notify(f"findings sorted by {by}", timeout=2)

    def rebuild(self) -> None:
        if self._pending is not None:
            self._pending.stop()
            self._pending = None
        needle = self.query_one("#findings-filter", Input).value.strip()
        rows = [(key, f) for key, f in fold_groups(zip(self._keys, self.findings, strict=True))
                if not needle or matches(f, needle)]
        rows.sort(key=lambda row: sort_key(row[1], self.sort_by))
        self._shown_keys = [key for key, _ in rows]
        self.shown = shown = [f for _, f in rows]
        table = self.table
        row = table.cursor_row
        table.clear(columns=True)
        cells = [(severity_text(f.severity), Text(f.code), folded(f.hosts), host_line(f.message))
                 for f in shown]
        for (key, label), width in zip(COLUMNS, self._widths(cells), strict=True):
            table.add_column(Text(label + (" ▼" if key == self.sort_by else "")), key=key,
                             width=width)
        for i, row_cells in enumerate(cells):
            table.add_row(*row_cells, key=str(i))
        if shown:
            # Findings arrive in bursts and sort by severity: keep the cursor on the finding the
            # operator is reading, not on its row number, which a new finding may have taken.
            # Before the operator has read any, the top row: a finding that merely came first
            # (a sweep's note before the host's fault) is not what they are reading.
            if not (self._chosen or table.has_focus):
                row = 0
            elif self._selected_key in self._shown_keys:
                row = self._shown_keys.index(self._selected_key)
            row = row if 0 <= row < len(shown) else 0
            table.move_cursor(row=row)
            self.query_one("#evidence", Static).update(evidence_text(shown[row]))
        else:
            self.query_one("#evidence", Static).update(
                Text("no findings" + (" match the filter" if self.findings else " yet"),
                     style="dim"))

    def _widths(self, cells: Sequence[tuple[Text, ...]]) -> list[int]:
        """Columns sized to their content, the message taking what is left of the width: a
        table wider than the terminal would hide the message behind a sideways scroll."""
        widths = [max([len(label) + 2, *(c[i].cell_len for c in cells)])
                  for i, (_, label) in enumerate(COLUMNS[:-1])]
        widths = [min(w, cap) for w, cap in zip(widths, (9, 26, 22), strict=True)]
        room = (self.size.width or 80) - sum(widths) - 2 * len(COLUMNS) - 1
        return [*widths, max(12, room)]

    def _select(self, row: int) -> None:
        if 0 <= row < len(self.shown):
            finding = self.shown[row]
            self.query_one("#evidence", Static).update(evidence_text(finding))
            key = self._shown_keys[row]
            if key != self._selected_key:  # rebuilding the table re-highlights: not news
                self.post_message(msg.FindingSelected(finding))
            self.selected, self._selected_key = finding, key

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.rebuild()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.table.focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._chosen = self._chosen or self.table.has_focus
        self._select(event.cursor_row)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = event.column_key.value or ""
        if key in SORTS:
            self.sort(key)

    def focus_filter(self) -> None:
        self.query_one("#findings-filter", Input).focus()
