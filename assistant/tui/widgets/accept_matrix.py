"""The acceptance matrix, live: node x test, each cell's verdict and value as figures arrive.

Fed one ``FiguresReady`` at a time (a test judged on one host). The model is the acceptance
report's (``assistant.runbook.acceptreport``: tests in level order, a cell's verdict worst
first, the headline figure), so the live view and ``diag accept --report`` say the same.
Adding figures only updates a dict; the table is painted at most ten times a second (as
``ProbeProgress``): a 128-node level answers in a burst. Host names and test names are put
in ``Text`` through ``safe_text``, never parsed as markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from assistant.runbook import acceptreport

from ..safe_text import host_line

PAINT_EVERY_S = 0.1
# Theme-neutral Rich styles: a verdict must read on dark and light alike.
VERDICT_STYLE = {"fail": "bold red", "pass": "green", "not-run": "yellow", "recorded": "dim"}
WAITING = "·"  # a cell whose test has not answered for that node yet


class AcceptMatrix(Vertical):
    """Rows are the walk's hosts, columns the tests seen so far (in level order)."""

    DEFAULT_CSS = """
    AcceptMatrix { height: 1fr; }
    AcceptMatrix > DataTable { height: 1fr; }
    AcceptMatrix > #matrix-detail { height: 2; padding: 0 1; }
    """

    def __init__(self, hosts: Sequence[str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hosts = list(dict.fromkeys(hosts))
        # (host, figure) pairs in arrival order: acceptreport.matrix's input.
        self.rows: list[tuple[str, Mapping[str, Any]]] = []
        self.cells: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
        self.levels: dict[str, int] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._columns: list[str] = []

    def compose(self) -> ComposeResult:
        table: DataTable[Text] = DataTable(id="matrix-table", cursor_type="cell",
                                           zebra_stripes=True)
        yield table
        yield Static(id="matrix-detail")

    def on_mount(self) -> None:
        self._table = self.query_one(DataTable)
        self.set_interval(PAINT_EVERY_S, self.flush)

    # --- the model -----------------------------------------------------------------------------

    def add(self, host: str, figures: Iterable[Mapping[str, Any]]) -> None:
        """One host's figures for one or more tests (a FiguresReady's)."""
        if host not in self.hosts:
            self.hosts.append(host)
        for fig in figures:
            test = str(fig.get("test"))
            self.levels.setdefault(test, int(fig.get("level") or 0))
            self.cells.setdefault(host, {}).setdefault(test, []).append(fig)
            self.rows.append((host, fig))
            self._dirty.add((host, test))

    def add_steps(self, steps: Iterable[Mapping[str, Any]]) -> None:
        """The figures of recorded steps (``Walk.to_dict()["steps"]``): a resumed walk's
        matrix starts where it stopped, as ``acceptreport.from_walk`` reads them."""
        for step in steps:
            for outcome in step.get("outcomes") or []:
                for host, result in (outcome.get("hosts") or {}).items():
                    figures = (result.get("facts") or {}).get("figures")
                    if figures:
                        self.add(host, figures)

    def document(self) -> dict[str, Any]:
        """The matrix as the acceptance report builds it (``acceptreport.matrix``)."""
        return acceptreport.matrix(self.rows, self.hosts)

    def verdict(self, host: str, test: str) -> str:
        """The cell's verdict, or "" while its test has not answered for *host*."""
        figures = self.cells.get(host, {}).get(test)
        return acceptreport.cell_verdict(figures) if figures else ""

    def tests(self) -> list[str]:
        return sorted(self.levels, key=lambda t: (self.levels[t], t))

    # --- painting ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Paint what changed (the timer calls it; so does the screen when the walk idles)."""
        if not self._dirty or not self.is_mounted:
            return
        dirty, self._dirty = self._dirty, set()
        tests = self.tests()
        if tests != self._columns or len(self._table.rows) != len(self.hosts):
            self._rebuild(tests)  # a new test or host: its column or row goes in its place
        else:
            for host, test in dirty:
                self._table.update_cell(host, test, self.cell(host, test))
        table = self._table
        if table.row_count:  # the highlighted cell may be one that just filled in
            key = table.coordinate_to_cell_key(table.cursor_coordinate)
            self._detail(str(key.row_key.value), str(key.column_key.value))

    def _rebuild(self, tests: list[str]) -> None:
        table = self._table
        table.clear(columns=True)
        table.add_column(Text("node"), key="node")
        for test in tests:
            table.add_column(host_line(f"L{self.levels[test]} {test}"), key=test)
        for host in self.hosts:
            table.add_row(host_line(host, "bold"), *(self.cell(host, t) for t in tests),
                          key=host)
        self._columns = tests

    def cell(self, host: str, test: str) -> Text:
        """``FAIL 1``, ``pass 182.4 GB/s``, ``not run``: the verdict and its headline value."""
        figures = self.cells.get(host, {}).get(test)
        if not figures:
            return Text(WAITING, style="dim")
        verdict = acceptreport.cell_verdict(figures)
        shown = acceptreport.headline({"verdict": verdict, "figures": figures})
        value = acceptreport.value_text(shown)
        text = Text(acceptreport.mark(verdict), style=VERDICT_STYLE.get(verdict, ""))
        if value:
            text.append(" ")
            text.append(host_line(value))
        return text

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        event.stop()
        self._detail(str(event.cell_key.row_key.value), str(event.cell_key.column_key.value))

    def _detail(self, host: str, test: str) -> None:
        """Below the table, the highlighted cell in words (metric, value, threshold, source);
        on the node column, the node's first failure so far."""
        self.query_one("#matrix-detail", Static).update(host_line(self.detail(host, test)))

    def detail(self, host: str, test: str) -> str:
        cells = self.cells.get(host, {})
        if test == "node":
            failed = [f for t in self.tests() for f in cells.get(t, [])
                      if f.get("verdict") == "fail"]
            if failed:
                return f"{host}: first failure {acceptreport.describe(failed[0])}"
            return f"{host}: {len(cells)} test(s) in, none failed"
        figures = cells.get(test)
        if not figures:
            return f"{host}: {test} has not answered yet"
        verdict = acceptreport.cell_verdict(figures)
        shown = acceptreport.headline({"verdict": verdict, "figures": figures})
        return f"{host}: {acceptreport.describe(shown)}"
