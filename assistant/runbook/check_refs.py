"""Validation layers 3 and 4: what a runbook names exists, and its conditions make sense.

References: the start node, every goto, probe, parameter, KB article and finding code; an
active step confirmed as a whole; ``$HOST`` written where it is substituted safely.
Conditions: one operator each with only its companions, codes and facts the catalog knows,
answers that are a question's choices, a fallback branch last.
"""

from __future__ import annotations

from typing import Any

from assistant.yamlfile import did_you_mean
from probes.catalog import Catalog

from .hostsubst import placeholders
from .issue import Report
from .model import CONFIRMED_ACTIVE

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


def check_references(data: dict[str, Any], report: Report, catalog: Catalog,
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
        if node_id == "sweep":
            report.add("reference", (*base, "__key__"),
                       "'sweep' is the evidence sweep every walk starts with: pick another id")
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
                if probe == "sweep":
                    report.add("reference", (*base, "probes", i),
                               "the sweep runs at the start of every walk; a step cannot run "
                               "it (name its components: gpu, network, ...)")
                elif probe not in catalog.probes:
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


def _check_command(report: Report, path: tuple[Any, ...], command: str) -> None:
    """``$HOST`` inside quotes is a template whose meaning the substitution has to guess at
    (and the pattern that turned a host name into code before it quoted by context)."""
    for place in placeholders(command):
        if place.quote:
            report.add("reference", path,
                       f"$HOST inside {place.quote}...{place.quote} quotes: write it bare "
                       "(NodeName=$HOST); diag puts each host's name there shell-quoted")
            return


def _check_active(report: Report, catalog: Catalog, base: tuple[Any, ...],
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


def _check_code(report: Report, catalog: Catalog, path: tuple[Any, ...], code: str) -> None:
    if not catalog.match_codes(code):
        report.add("reference", path,
                   f"unknown finding code '{code}'{did_you_mean(code, catalog.codes)}")


def check_conditions(data: dict[str, Any], report: Report, catalog: Catalog) -> None:
    nodes: dict[str, dict[str, Any]] = data["nodes"]
    for i, guard in enumerate(data.get("guards", [])):
        _check_condition(guard["when"], ("guards", i, "when"), report, catalog, nodes)
    for node_id, node in nodes.items():
        if node["kind"] == "question":
            for i, choice in enumerate(node["choices"]):
                if "when" in choice:
                    _check_condition(choice["when"], ("nodes", node_id, "choices", i, "when"),
                                     report, catalog, nodes)
            continue
        if node["kind"] == "conclusion":
            if "requires" in node:
                _check_condition(node["requires"], ("nodes", node_id, "requires"), report,
                                 catalog, nodes)
            continue
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


def _check_condition(cond: dict[str, Any], path: tuple[Any, ...], report: Report,
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


def _check_fact(cond: dict[str, Any], path: tuple[Any, ...], report: Report,
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
