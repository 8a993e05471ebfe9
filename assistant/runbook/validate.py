"""Runbook validation in layers: YAML, schema, references, conditions, graph.

Each layer reports every problem it finds with file, line, column and node id, so an author
fixes a file in one pass. A later layer runs only when the earlier ones leave it something
sound to look at (there is no point checking the graph of a node list that failed the schema).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant import cache as content_cache
from assistant import yamlfile
from assistant.yamlfile import did_you_mean
from probes.catalog import Catalog, load_catalog

from .hostsubst import placeholders
from .model import CONFIRMED_ACTIVE, Runbook, build_runbook

if TYPE_CHECKING:
    import jsonschema

SCHEMA_FILE = Path(__file__).with_name("runbook.schema.json")

OPERATORS = ("any", "all", "none", "fact", "count", "fraction", "answer", "and", "or", "not")
COMPANIONS = {
    "any": set(),
    "all": set(),
    "none": set(),
    "fact": {"op", "value", "hosts"},
    "count": {"min", "max"},
    "fraction": {"min", "max"},
    "answer": {"is"},
    "and": set(),
    "or": set(),
    "not": set(),
}
NUMERIC_OPS = ("lt", "le", "gt", "ge")
LIST_OPS = ("in", "not_in")
VALUELESS_OPS = ("exists", "missing")


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


@cache
def runbook_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


class _Report:
    """Collects issues for one file, turning data paths into positions."""

    def __init__(self, file: str, located: yamlfile.Located) -> None:
        self.file = file
        self.located = located
        self.issues: list[Issue] = []

    def add(self, layer: str, path: tuple[str | int, ...], message: str) -> None:
        mark = self.located.mark(path)
        node = str(path[1]) if len(path) > 1 and path[0] == "nodes" else None
        self.issues.append(Issue(self.file, mark.line, mark.column, layer, node, message))


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
    report = _Report(file, located)
    data = located.data
    if located.empty:
        message = (f"{yamlfile.empty_message(text)}: a runbook is a YAML mapping with id, "
                   "title, start and nodes")
        return None, [Issue(file, 1, 1, "yaml", None, message)]
    if not isinstance(data, dict):
        report.add("schema", (), "a runbook is a YAML mapping with id, title, start and nodes")
        return None, report.issues

    _check_schema(data, report)
    if report.issues:
        return None, sorted(report.issues)

    _check_references(data, report, catalog, kb_ids,
                      Path(file).stem if named_by_file else None)
    _check_conditions(data, report, catalog)
    lines = {nid: located.mark(("nodes", nid, "__key__")).line for nid in data["nodes"]}
    runbook = build_runbook(data, Path(file), lines)
    _check_graph(runbook, report)
    if report.issues:
        return None, sorted(report.issues)
    return runbook, []


# --- layer 2: schema -------------------------------------------------------------------------

@cache
def _fast_schema_check() -> Callable[[Any], bool]:
    """True when *data* is valid by the runbook schema, from the schema compiled to Python
    (fastjsonschema): about ten times faster than jsonschema, which took 3 of every 4 seconds
    of a large runbook's validation. jsonschema stays the reference: it runs when this says
    no, and words the errors. The generated code is cached by the schema's content. (The
    schema is read as draft 7, the newest fastjsonschema knows; it uses nothing that differs
    from 2020-12 but ``$ref`` beside a ``description``, an annotation.)"""
    import fastjsonschema

    schema = {**runbook_schema(), "$schema": "http://json-schema.org/draft-07/schema#"}
    key = content_cache.digest([json.dumps(schema, sort_keys=True), fastjsonschema.VERSION])
    code = content_cache.cached("schema-code", key,
                                lambda: fastjsonschema.compile_to_code(schema))
    namespace: dict[str, Any] = {}
    exec(compile(code, "<runbook schema>", "exec"), namespace)  # code generated from our schema
    # The root schema's function is the first the code defines (each $defs entry gets its own).
    root = re.search(r"^def (\w+)\(", code, re.MULTILINE)
    if root is None:
        raise RuntimeError("fastjsonschema generated no validator")
    validate = namespace[root.group(1)]

    def check(data: Any) -> bool:
        try:
            validate(data)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return check


def _check_schema(data: dict[str, Any], report: _Report) -> None:
    if _fast_schema_check()(data):
        return
    import jsonschema  # the reference validator, for its detailed errors

    validator = jsonschema.Draft202012Validator(runbook_schema())
    seen: set[tuple[tuple[Any, ...], str]] = set()
    described = [item for error in validator.iter_errors(data) for item in _describe(error)]
    for path, message in _one_report_per_misspelling(described):
        if (path, message) in seen:
            continue
        seen.add((path, message))
        report.add("schema", path, message)


_UNKNOWN_KEY = re.compile(r"unknown key '([^']+)' \(allowed: ([^)]*)\)$")
_MISSING_KEY = re.compile(r"missing required key '([^']+)'$")


def _one_report_per_misspelling(
        described: list[tuple[tuple[Any, ...], str]]) -> list[tuple[tuple[Any, ...], str]]:
    """A misspelt key (``explian:``) is one mistake, not two: the schema reports the unknown
    key *and* the required key it was meant to be as missing. Keep one line naming the key,
    the likely intended one and the allowed ones, and drop the "missing" it explains."""
    missing: dict[tuple[Any, ...], set[str]] = {}
    for path, message in described:
        found = _MISSING_KEY.search(message)
        if found:
            missing.setdefault(path, set()).add(found.group(1))
    explained: set[tuple[tuple[Any, ...], str]] = set()
    out = []
    for path, message in described:
        found = _UNKNOWN_KEY.search(message)
        if found:
            name, allowed = found.groups()
            hint = did_you_mean(name, allowed.split(", "))
            intended = [k for k in missing.get(path[:-1], ()) if f"'{k}'" in hint]
            explained.update((path[:-1], k) for k in intended)
            message = f"unknown key '{name}' ({hint.strip(' ()') + ' ' if hint else ''}" \
                      f"allowed: {allowed})"
        out.append((path, message))
    return [(path, message) for path, message in out
            if not ((found := _MISSING_KEY.search(message))
                    and (path, found.group(1)) in explained)]


def _describe(error: jsonschema.ValidationError) -> list[tuple[tuple[Any, ...], str]]:
    """Plain-language messages for the schema errors an author actually makes."""
    path = tuple(error.absolute_path)
    where = _field_name(path)
    kind = error.validator
    if kind == "additionalProperties":
        names = re.findall(r"'([^']+)'", error.message.split("(")[-1])
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        return [((*path, name), f"unknown key '{name}' (allowed: {allowed})") for name in names]
    if kind == "required":
        missing = error.message.split("'")[1]
        message = f"{where}missing required key '{missing}'"
    elif kind == "type":
        message = (f"{where}expected {error.validator_value}, got "
                   f"{type(error.instance).__name__} {error.instance!r}")
    elif kind in ("enum", "const"):
        options = error.validator_value if kind == "enum" else [error.validator_value]
        message = f"{where}{error.instance!r} is not one of {', '.join(map(str, options))}"
    elif kind == "pattern":
        message = (f"{where}{error.instance!r} is not a valid id (lowercase letters, digits "
                   "and dashes)")
    elif kind == "propertyNames":
        return [((*path, error.instance), f"node id {error.instance!r} is not a valid id "
                 "(lowercase letters, digits and dashes)")]
    elif kind in ("minItems", "minProperties", "minLength"):
        message = f"{where}must not be empty"
    elif kind == "oneOf":
        message = f"{where}{error.instance!r} is not valid here"
    else:
        message = f"{where}{error.message}"
    return [(path, message)]


def _field_name(path: tuple[Any, ...]) -> str:
    if not path:
        return ""
    # e.g. nodes/check-xid/branches/0/goto -> "branches[0].goto: "
    tail = list(path[2:]) if len(path) > 1 and path[0] == "nodes" else list(path)
    if not tail:
        return ""
    text = ""
    for part in tail:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return f"{text}: "


# --- layer 3: references ---------------------------------------------------------------------

def _check_references(data: dict[str, Any], report: _Report, catalog: Catalog,
                      kb_ids: set[str], stem: str | None) -> None:
    nodes: dict[str, dict[str, Any]] = data["nodes"]
    if stem is not None and data["id"] != stem:
        report.add("reference", ("id",), f"id '{data['id']}' must match the file name '{stem}'")
    if data["start"] not in nodes:
        report.add("reference", ("start",), f"start node '{data['start']}' does not exist"
                   f"{did_you_mean(data['start'], nodes)}")

    def check_kb(path: tuple[Any, ...], links: list[str]) -> None:
        for i, link in enumerate(links):
            if link not in kb_ids:
                report.add("reference", (*path, i),
                           f"unknown KB article '{link}'{did_you_mean(link, kb_ids)}")

    def check_goto(path: tuple[Any, ...], target: str) -> None:
        if target not in nodes:
            report.add("reference", path,
                       f"goto '{target}': no such node{did_you_mean(target, nodes)}")

    check_kb(("kb",), data.get("kb", []))
    for i, guard in enumerate(data.get("guards", [])):
        check_goto(("guards", i, "goto"), guard["goto"])
    for node_id, node in nodes.items():
        base = ("nodes", node_id)
        check_kb((*base, "kb"), node.get("kb", []))
        hosts = node.get("hosts")
        if isinstance(hosts, dict):
            key = "finding" if "finding" in hosts else "without_finding"
            codes = hosts[key]
            if isinstance(codes, str):
                _check_code(report, catalog, (*base, "hosts", key), codes)
            else:
                for i, code in enumerate(codes):
                    _check_code(report, catalog, (*base, "hosts", key, i), code)
        if node["kind"] == "probe":
            _check_active(report, catalog, base, node)
            for i, probe in enumerate(node["probes"]):
                if probe not in catalog.probes:
                    hint = did_you_mean(probe, catalog.probes) or \
                        f" (known: {', '.join(catalog.probes)})"
                    report.add("reference", (*base, "probes", i),
                               f"unknown probe '{probe}'{hint}")
            for name in node.get("params", {}):
                if name not in node["probes"]:
                    report.add("reference", (*base, "params", name),
                               f"params for '{name}', which this node does not run")
            for i, branch in enumerate(node["branches"]):
                check_goto((*base, "branches", i, "goto"), branch["goto"])
        elif node["kind"] == "question":
            seen: set[str] = set()
            for i, choice in enumerate(node["choices"]):
                if choice["id"] in seen:
                    report.add("reference", (*base, "choices", i, "id"),
                               f"duplicate choice id '{choice['id']}'")
                seen.add(choice["id"])
                check_goto((*base, "choices", i, "goto"), choice["goto"])
        elif node["kind"] == "action":
            check_goto((*base, "next"), node["next"])
            if isinstance(node.get("command"), str):
                _check_command(report, (*base, "command"), node["command"])
        elif node["kind"] == "conclusion":
            for i, code in enumerate(node.get("evidence", [])):
                _check_code(report, catalog, (*base, "evidence", i), code)


def _check_command(report: _Report, path: tuple[Any, ...], command: str) -> None:
    """``$HOST`` inside quotes is a template whose meaning the substitution has to guess at
    (and the pattern that turned a host name into code before it quoted by context)."""
    for place in placeholders(command):
        if place.quote:
            report.add("reference", path,
                       f"$HOST inside {place.quote}...{place.quote} quotes: write it bare "
                       "(NodeName=$HOST); diag puts each host's name there shell-quoted")
            return


def _check_active(report: _Report, catalog: Catalog, base: tuple[Any, ...],
                  node: dict[str, Any]) -> None:
    """A step that loads nodes is confirmed as a whole: it runs active probes only, and no
    runbook may pre-confirm one by setting the engine's confirmation parameter itself."""
    probes = [p for p in node["probes"] if p in catalog.probes]
    active = [p for p in probes if catalog.probes[p].active]
    if active and len(active) != len(probes):
        report.add("reference", (*base, "probes"),
                   f"active probes ({', '.join(active)}) load the nodes and are confirmed as a "
                   f"step: put the read-only ones ({', '.join(sorted(set(probes) - set(active)))})"
                   " in a step of their own")
    for name, values in (node.get("params") or {}).items():
        if isinstance(values, dict) and CONFIRMED_ACTIVE in values:
            report.add("reference", (*base, "params", name, CONFIRMED_ACTIVE),
                       f"'{CONFIRMED_ACTIVE}' is set by the walk when the operator confirms; a "
                       "runbook cannot set it")


def _check_code(report: _Report, catalog: Catalog, path: tuple[Any, ...], code: str) -> None:
    if not catalog.match_codes(code):
        report.add("reference", path,
                   f"unknown finding code '{code}'{did_you_mean(code, catalog.codes)}")


# --- layer 4: conditions ---------------------------------------------------------------------

def _check_conditions(data: dict[str, Any], report: _Report, catalog: Catalog) -> None:
    nodes: dict[str, dict[str, Any]] = data["nodes"]
    for i, guard in enumerate(data.get("guards", [])):
        _check_condition(guard["when"], ("guards", i, "when"), report, catalog, nodes)
    for node_id, node in nodes.items():
        if node["kind"] != "probe":
            continue
        branches = node["branches"]
        fallbacks = [i for i, b in enumerate(branches) if "when" not in b]
        base = ("nodes", node_id, "branches")
        if not fallbacks:
            report.add("condition", base, "no fallback branch (one without 'when'): when no "
                       "condition holds the walk would stop here")
        elif fallbacks[0] != len(branches) - 1:
            report.add("condition", (*base, fallbacks[0] + 1),
                       "branch after the fallback branch can never be taken")
        for i, branch in enumerate(branches):
            if "when" in branch:
                _check_condition(branch["when"], (*base, i, "when"), report, catalog, nodes)


def _check_condition(cond: dict[str, Any], path: tuple[Any, ...], report: _Report,
                     catalog: Catalog, nodes: dict[str, dict[str, Any]]) -> None:
    ops = [key for key in cond if key in OPERATORS]
    if len(ops) != 1:
        found = ", ".join(ops) if ops else "none"
        report.add("condition", path, f"a condition needs exactly one of {', '.join(OPERATORS)} "
                   f"(found: {found})")
        return
    op = ops[0]
    extra = set(cond) - {op} - COMPANIONS[op]
    for key in sorted(extra):
        report.add("condition", (*path, key), f"'{key}' does not go with '{op}'")
    if op in ("any", "all", "none"):
        for i, code in enumerate(cond[op]):
            _check_code(report, catalog, (*path, op, i), code)
    elif op in ("count", "fraction"):
        _check_code(report, catalog, (*path, op), cond[op])
        if "min" not in cond and "max" not in cond:
            report.add("condition", path, f"'{op}' needs 'min' or 'max'")
        if op == "fraction":
            for bound in ("min", "max"):
                if bound in cond and cond[bound] > 1:
                    report.add("condition", (*path, bound),
                               f"a fraction's {bound} is between 0 and 1, got {cond[bound]}")
    elif op == "fact":
        _check_fact(cond, path, report, catalog)
    elif op == "answer":
        target = nodes.get(cond["answer"])
        questions = [n for n, node in nodes.items() if node.get("kind") == "question"]
        if target is None or target.get("kind") != "question":
            report.add("condition", (*path, "answer"),
                       f"'{cond['answer']}' is not a question node"
                       f"{did_you_mean(cond['answer'], questions)}")
        elif "is" not in cond:
            report.add("condition", path, "'answer' needs 'is: CHOICE'")
        elif cond["is"] not in (choices := [str(c["id"]) for c in target["choices"]]):
            report.add("condition", (*path, "is"),
                       f"question '{cond['answer']}' has no choice '{cond['is']}'"
                       f"{did_you_mean(cond['is'], choices)}")
    elif op in ("and", "or"):
        for i, sub in enumerate(cond[op]):
            _check_condition(sub, (*path, op, i), report, catalog, nodes)
    elif op == "not":
        _check_condition(cond["not"], (*path, "not"), report, catalog, nodes)


def _check_fact(cond: dict[str, Any], path: tuple[Any, ...], report: _Report,
                catalog: Catalog) -> None:
    if not catalog.has_fact(cond["fact"]):
        facts = [f"{probe}.{fact}" for probe, info in catalog.probes.items()
                 for fact in info.facts]
        report.add("condition", (*path, "fact"),
                   f"unknown fact '{cond['fact']}'{did_you_mean(cond['fact'], facts)}")
    op = cond.get("op")
    if op is None:
        report.add("condition", path, "'fact' needs 'op'")
        return
    if op in VALUELESS_OPS:
        if "value" in cond:
            report.add("condition", (*path, "value"), f"'{op}' takes no value")
        return
    if "value" not in cond:
        report.add("condition", path, f"'{op}' needs 'value'")
        return
    value = cond["value"]
    if op in NUMERIC_OPS and (isinstance(value, bool) or not isinstance(value, int | float)):
        report.add("condition", (*path, "value"), f"'{op}' compares numbers, got {value!r}")
    if op in LIST_OPS and not isinstance(value, list):
        report.add("condition", (*path, "value"), f"'{op}' needs a list, got {value!r}")


# --- layer 5: graph --------------------------------------------------------------------------

def _check_graph(runbook: Runbook, report: _Report) -> None:
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(runbook.nodes)
    for node in runbook.nodes.values():
        graph.add_edges_from((node.id, target) for target in runbook.successors(node)
                             if target in runbook.nodes)
    if runbook.start not in graph:
        return  # already reported as a reference error
    reachable = nx.descendants(graph, runbook.start) | {runbook.start}
    for node_id in runbook.nodes:
        if node_id not in reachable:
            report.add("graph", ("nodes", node_id),
                       f"unreachable: no path from start '{runbook.start}' leads here")
    conclusions = {n.id for n in runbook.conclusions()}
    if not conclusions:
        report.add("graph", ("nodes",), "the runbook has no conclusion node")
        return
    # Every node with a path to some conclusion, in one backward search from all of them (a
    # search per conclusion made a generated 20,000-node runbook take minutes).
    can_conclude = set(conclusions)
    frontier = list(conclusions)
    while frontier:
        for before in graph.predecessors(frontier.pop()):
            if before not in can_conclude:
                can_conclude.add(before)
                frontier.append(before)
    for node_id in runbook.nodes:
        if node_id not in can_conclude:
            report.add("graph", ("nodes", node_id),
                       "dead end: no path from here reaches a conclusion")
    automated = graph.subgraph(n for n, node in runbook.nodes.items() if node.kind != "question")
    order = {node_id: i for i, node_id in enumerate(runbook.nodes)}
    reported = set()
    for cycle in nx.simple_cycles(automated):
        # Start the loop at its earliest node in the file; the last node's goto closes it.
        first = min(range(len(cycle)), key=lambda i: order[cycle[i]])
        cycle = cycle[first:] + cycle[:first]
        if tuple(cycle) in reported:
            continue
        reported.add(tuple(cycle))
        loop = " -> ".join([*cycle, cycle[0]])
        report.add("graph", ("nodes", cycle[-1]),
                   f"cycle without a question node ({loop}): an automated walk would loop "
                   "forever")
