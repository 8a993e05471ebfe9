"""Runbook validation in layers: YAML, schema, references, conditions, graph.

Each layer reports every problem it finds with file, line, column and node id, so an author
fixes a file in one pass. A later layer runs only when the earlier ones leave it something
sound to look at (there is no point checking the graph of a node list that failed the schema).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from assistant import yamlfile
from probes.catalog import Catalog, load_catalog

from . import check_graph, check_refs, check_schema
from .check_schema import SCHEMA_FILE, _fast_schema_check, runbook_schema
from .issue import Issue, Report
from .model import Runbook, build_runbook

# Re-exported: callers and tests name them from here.
__all__ = ["SCHEMA_FILE", "Issue", "Report", "_fast_schema_check", "runbook_schema",
           "validate_text"]


def validate_text(text: str, file: str, catalog: Catalog | None = None,
                  kb_ids: Iterable[str] | None = None, *, named_by_file: bool = True,
                  ) -> tuple[Runbook | None, list[Issue]]:
    """Validate one runbook's text; return the model (if it is sound) and every issue found.
    *named_by_file*: the runbook is found by its file name (a runbooks directory on the search
    path), so its id must equal it; a file given by path (``diag run ./my.yaml``) may carry
    any id — a copy of ``hang.yaml`` saved as ``my.yaml`` runs as it is."""
    with yamlfile.paused_gc():  # see paused_gc: every layer builds large trees that survive
        return _validate_text(text, file, catalog, kb_ids, named_by_file)


def _validate_text(text: str, file: str, catalog: Catalog | None,
                   kb_ids: Iterable[str] | None,
                   named_by_file: bool) -> tuple[Runbook | None, list[Issue]]:
    catalog = catalog or load_catalog()
    if kb_ids is None:
        from assistant.kb import kb_ids as shipped_kb_ids

        kb_ids = shipped_kb_ids()
    kb_ids = set(kb_ids)
    try:
        located = yamlfile.load(text)
    except yamlfile.YamlError as exc:
        return None, [Issue(file, exc.mark.line, exc.mark.column, "yaml", None, exc.message)]
    report = Report(file, located)
    data = located.data
    if located.empty:
        message = (f"{yamlfile.empty_message(text)}: a runbook is a YAML mapping with id, "
                   "title, start and nodes")
        return None, [Issue(file, 1, 1, "yaml", None, message)]
    if not isinstance(data, dict):
        report.add("schema", (), "a runbook is a YAML mapping with id, title, start and nodes")
        return None, report.issues

    check_schema.check(data, report)
    if report.issues:
        return None, sorted(report.issues)

    check_refs.check_references(data, report, catalog, kb_ids,
                                Path(file).stem if named_by_file else None)
    check_refs.check_conditions(data, report, catalog)
    lines = {nid: located.mark(("nodes", nid, "__key__")).line for nid in data["nodes"]}
    runbook = build_runbook(data, Path(file), lines)
    check_graph.check(runbook, report)
    if report.issues:
        return None, sorted(report.issues)
    return with_builtin_nodes(runbook), []


def with_builtin_nodes(runbook: Runbook) -> Runbook:
    """The runbook with the conclusion every walk may end at whatever its steps found: a
    standing catalogued fault (runbook.standing). A runbook may define its own of that id."""
    from dataclasses import replace

    from .standing import CATALOGUED, catalogued_node

    if CATALOGUED in runbook.nodes:
        return runbook
    return replace(runbook, nodes={**runbook.nodes, CATALOGUED: catalogued_node()})
