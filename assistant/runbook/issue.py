"""One problem in a runbook file, and the collector that positions problems for an editor.

Shared by every validation layer (``validate`` and the ``check_*`` modules), so that each
layer reports with file, line, column and node id the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from assistant import yamlfile


@dataclass(frozen=True, order=True)
class Issue:
    """One problem in a runbook file, positioned for an editor (file:line:col)."""

    file: str
    line: int
    column: int
    layer: str
    node: str | None
    message: str

    def __str__(self) -> str:
        where = f"node '{self.node}': " if self.node else ""
        return f"{self.file}:{self.line}:{self.column}: {self.layer}: {where}{self.message}"


class Report:
    """Collects issues for one file, turning data paths into positions."""

    def __init__(self, file: str, located: yamlfile.Located) -> None:
        self.file = file
        self.located = located
        self.issues: list[Issue] = []

    def add(self, layer: str, path: tuple[str | int, ...], message: str) -> None:
        mark = self.located.mark(path)
        node = str(path[1]) if len(path) > 1 and path[0] == "nodes" else None
        self.issues.append(Issue(self.file, mark.line, mark.column, layer, node, message))
