"""Evaluating branch conditions: structured data in, a boolean out, never ``eval``.

A condition reads the walk's evidence so far — findings from every probe step, per-host facts,
the operator's answers. "No data" never satisfies a condition: a fact nobody measured is
neither above nor below a threshold.
"""

from __future__ import annotations

import fnmatch
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from probes.model import Finding

_COMPARE = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


@dataclass
class Evidence:
    """Everything a condition may look at."""

    findings: list[Finding] = field(default_factory=list)
    facts: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # probe->host->facts
    answers: dict[str, str] = field(default_factory=dict)
    host_count: int = 0

    def codes_present(self, pattern: str) -> bool:
        return any(code_matches(f.code, pattern) for f in self.findings)

    def hosts_with(self, pattern: str) -> set[str]:
        return {host for f in self.findings if code_matches(f.code, pattern)
                for host in f.hosts}


# Where a runbook names a finding code it may write "@standing": every standing fault of the
# fault catalogue (a catalogued fault of a GPU, link or host, severity error or worse), so an
# acceptance walk never offers back a node with one, whatever family it is of.
STANDING = "@standing"


def code_matches(code: str, pattern: str) -> bool:
    """*code* is *pattern* (a code, a glob such as ``xid-*``, or ``@standing``)."""
    if pattern == STANDING:
        from probes.faults import load_faults

        return code in load_faults().standing_codes()
    return fnmatch.fnmatchcase(code, pattern)


def holds(cond: Mapping[str, Any], evidence: Evidence) -> bool:
    """Whether *cond* holds; conditions are validated, so unknown shapes are programming errors."""
    if "any" in cond:
        return any(evidence.codes_present(code) for code in cond["any"])
    if "all" in cond:
        return all(evidence.codes_present(code) for code in cond["all"])
    if "none" in cond:
        return not any(evidence.codes_present(code) for code in cond["none"])
    if "count" in cond:
        return _within(len(evidence.hosts_with(cond["count"])), cond)
    if "fraction" in cond:
        if evidence.host_count == 0:
            return False
        return _within(len(evidence.hosts_with(cond["fraction"])) / evidence.host_count, cond)
    if "fact" in cond:
        return _fact_holds(cond, evidence)
    if "answer" in cond:
        return bool(evidence.answers.get(cond["answer"]) == cond["is"])
    if "and" in cond:
        return all(holds(sub, evidence) for sub in cond["and"])
    if "or" in cond:
        return any(holds(sub, evidence) for sub in cond["or"])
    if "not" in cond:
        return not holds(cond["not"], evidence)
    raise ValueError(f"not a condition: {dict(cond)!r}")


def _within(value: float, cond: Mapping[str, Any]) -> bool:
    return bool(cond.get("min", float("-inf")) <= value <= cond.get("max", float("inf")))


_MISSING = object()


def lookup(facts: Mapping[str, Any], key: str) -> Any:
    """A dotted key inside one host's facts (``env.NCCL_SOCKET_IFNAME``), or _MISSING."""
    value: Any = facts
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return _MISSING if value is None else value


def _fact_holds(cond: Mapping[str, Any], evidence: Evidence) -> bool:
    probe, _, key = cond["fact"].partition(".")
    per_host = evidence.facts.get(probe, {})
    values = [lookup(facts, key) for facts in per_host.values()]
    op = cond["op"]
    every_host = cond.get("hosts", "any") == "all"
    if op == "missing":
        if not values:
            return True  # nobody reported the fact at all
        missing = [v is _MISSING for v in values]
        return all(missing) if every_host else any(missing)
    present = [v for v in values if v is not _MISSING]
    if not present:
        return False  # no data is never a pass
    if every_host and len(present) < len(values):
        return False
    results = [_compare(v, op, cond.get("value")) for v in present]
    return all(results) if every_host else any(results)


def _compare(actual: Any, op: str, expected: Any) -> bool:
    if op == "exists":
        return True
    if op in ("in", "not_in"):
        return (actual in expected) == (op == "in")
    if op == "contains":
        try:
            return expected in actual
        except TypeError:
            return False
    if op in ("lt", "le", "gt", "ge") and (
        isinstance(actual, bool) or not isinstance(actual, int | float)
    ):
        return False
    try:
        return bool(_COMPARE[op](actual, expected))
    except TypeError:
        return False


def describe(cond: Mapping[str, Any] | None) -> str:
    """A short human reading of a condition, for the walk view and the recorded step."""
    if cond is None:
        return "otherwise"
    if "any" in cond:
        return "any of " + ", ".join(cond["any"])
    if "all" in cond:
        return "all of " + ", ".join(cond["all"])
    if "none" in cond:
        return "none of " + ", ".join(cond["none"])
    if "count" in cond or "fraction" in cond:
        key = "count" if "count" in cond else "fraction"
        bounds = []
        if "min" in cond:
            bounds.append(f">= {cond['min']}")
        if "max" in cond:
            bounds.append(f"<= {cond['max']}")
        what = "hosts with" if key == "count" else "share of hosts with"
        return f"{what} {cond[key]} {' and '.join(bounds)}"
    if "fact" in cond:
        quant = "all hosts: " if cond.get("hosts") == "all" else ""
        value = f" {cond['value']!r}" if "value" in cond else ""
        return f"{quant}{cond['fact']} {cond['op']}{value}"
    if "answer" in cond:
        return f"answer to {cond['answer']} is {cond['is']}"
    if "and" in cond:
        return " and ".join(f"({describe(c)})" for c in cond["and"])
    if "or" in cond:
        return " or ".join(f"({describe(c)})" for c in cond["or"])
    if "not" in cond:
        return f"not ({describe(cond['not'])})"
    return repr(dict(cond))
