"""The acceptance matrix, live: node x test, each cell's verdict and value as figures arrive.

Fed one ``FiguresReady`` at a time (a test judged on one host). The model is the acceptance
report's (``assistant.runbook.acceptreport``: tests in level order, a cell's verdict worst
first, the headline figure), so the live view and ``diag accept --report`` say the same.
Adding figures only updates a dict; the table is painted at most ten times a second (as
``ProbeProgress``): a 128-node level answers in a burst. Host names and test names are put
in ``Text`` through ``safe_text``, never parsed as markup.

Past ``FOLD_ABOVE`` nodes (a new cluster's bring-up: thousands) a row per node is neither
readable nor cheap (2,000 rows took 60-110 ms to rebuild and 130-190 ms to paint, each new
test column): the nodes that failed or could not run a test keep their own rows (worst
first, at most ``MAX_NODE_ROWS``), and every other node is one folded row, ``node[0001-9990]
(9,990)``, whose cells count its verdicts (``pass 9,980 · 10``). A node that fails later
leaves the fold for a row of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from assistant.runbook import acceptreport
from probes.hostfold import fold_counted

from ..look import folded
from ..safe_text import host_line

PAINT_EVERY_S = 0.1
FOLD_ABOVE = 100  # nodes: more, and the nodes with nothing to look at share one row
MAX_NODE_ROWS = 200  # rows of failing nodes shown in a folded matrix; the rest are counted
FOLD_KEY, MORE_KEY = "\x00fold", "\x00more"  # row keys no host name can take
ATTENTION = ("fail", "not-run")  # a node with a cell like this keeps its own row
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
        self._known = set(self.hosts)  # membership without a scan of 10,000 names
        # (host, figure) pairs in arrival order: acceptreport.matrix's input.
        self.rows: list[tuple[str, Mapping[str, Any]]] = []
        self.cells: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
        self.levels: dict[str, int] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._columns: list[str] = []
        # the folded view's model, kept as figures arrive: each cell's verdict, how many
        # cells of each node need a look, and each test's verdicts over all nodes
        self._verdicts: dict[tuple[str, str], str] = {}
        self._attention: dict[str, int] = {}
        self._counts: dict[str, dict[str, int]] = {}
        self._row_keys: list[str] = []
        self._fold_label: tuple[frozenset[str], Text] | None = None

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
        if host not in self._known:
            self.hosts.append(host)
            self._known.add(host)
        for fig in figures:
            test = str(fig.get("test"))
            self.levels.setdefault(test, int(fig.get("level") or 0))
            self.cells.setdefault(host, {}).setdefault(test, []).append(fig)
            self.rows.append((host, fig))
            self._dirty.add((host, test))
            self._count(host, test)

    def _count(self, host: str, test: str) -> None:
        before = self._verdicts.get((host, test))
        now = acceptreport.cell_verdict(self.cells[host][test])
        if before == now:
            return
        self._verdicts[(host, test)] = now
        counts = self._counts.setdefault(test, {})
        if before is not None:
            counts[before] -= 1
            self._attention[host] -= before in ATTENTION
        counts[now] = counts.get(now, 0) + 1
        self._attention[host] = self._attention.get(host, 0) + (now in ATTENTION)

    @property
    def folded(self) -> bool:
        """Whether the nodes with nothing to look at share one row (a fleet past FOLD_ABOVE)."""
        return len(self.hosts) > FOLD_ABOVE

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
        keys = self._keys()
        if tests != self._columns or keys != self._row_keys:
            self._rebuild(tests, keys)  # a new test, host or failing node: rows in place
        else:
            shown = set(keys)
            for host, test in dirty:
                if host in shown:
                    self._table.update_cell(host, test, self.cell(host, test))
            if FOLD_KEY in shown:
                for test in {test for _, test in dirty}:
                    self._table.update_cell(FOLD_KEY, test, self._fold_cell(test))
        table = self._table
        if table.row_count:  # the highlighted cell may be one that just filled in
            key = table.coordinate_to_cell_key(table.cursor_coordinate)
            self._detail(str(key.row_key.value), str(key.column_key.value))

    def _keys(self) -> list[str]:
        """The table's rows: every node, or (folded) the nodes that need a look, then the
        count of those left out, then the fold."""
        if not self.folded:
            return list(self.hosts)
        order = {host: i for i, host in enumerate(self.hosts)}
        looked = sorted((h for h, n in self._attention.items() if n),
                        key=lambda h: (-self._attention[h], order.get(h, 0)))
        keys = looked[:MAX_NODE_ROWS]
        if len(looked) > MAX_NODE_ROWS:
            keys.append(MORE_KEY)
        return [*keys, FOLD_KEY]

    def _rebuild(self, tests: list[str], keys: list[str]) -> None:
        table = self._table
        table.clear(columns=True)
        table.add_column(Text("node"), key="node")
        for test in tests:
            table.add_column(host_line(f"L{self.levels[test]} {test}"), key=test)
        for key in keys:
            if key == FOLD_KEY:
                table.add_row(self._fold_name(), *(self._fold_cell(t) for t in tests), key=key)
            elif key == MORE_KEY:
                more = sum(1 for n in self._attention.values() if n) - MAX_NODE_ROWS
                table.add_row(Text(f"… {more} more", style="bold red"),
                              *(Text("") for _ in tests), key=key)
            else:
                table.add_row(host_line(key, "bold"), *(self.cell(key, t) for t in tests),
                              key=key)
        self._columns, self._row_keys = tests, keys

    def _fold_hosts(self) -> list[str]:
        return [h for h in self.hosts if not self._attention.get(h)]

    def _fold_name(self) -> Text:
        """The fold's hosts, ``node[0001-9990] (9,990)``: folded again only when a node left."""
        rest = self._fold_hosts()
        key = frozenset(rest)
        if self._fold_label is None or self._fold_label[0] != key:
            self._fold_label = (key, folded(rest, "bold"))
        return self._fold_label[1]

    def _fold_cell(self, test: str) -> Text:
        """What the fold's nodes say for *test*: ``pass 9,980 · 10`` (10 not in yet)."""
        counts = dict(self._counts.get(test, {}))
        for host, need in self._attention.items():  # the nodes with rows of their own
            verdict = self._verdicts.get((host, test)) if need else None
            if verdict is not None:
                counts[verdict] -= 1
        waiting = len(self._fold_hosts()) - sum(counts.values())
        text = Text()
        for verdict in ("pass", "recorded"):
            if counts.get(verdict):
                text.append(f"{acceptreport.mark(verdict)} {counts[verdict]:,} ",
                            style=VERDICT_STYLE.get(verdict, ""))
        if waiting > 0:
            text.append(f"{WAITING} {waiting:,}", style="dim")
        return text

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
        if host in (FOLD_KEY, MORE_KEY):
            rest = self._fold_hosts()
            if host == MORE_KEY:
                return (f"{sum(1 for n in self._attention.values() if n)} nodes failed or "
                        f"could not run a test; the first {MAX_NODE_ROWS} have rows here, "
                        "all are in the acceptance report")
            return (f"{fold_counted(rest)}: no failure so far"
                    + ("" if test == "node" else f"; {test}: {self._fold_cell(test).plain}"))
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
