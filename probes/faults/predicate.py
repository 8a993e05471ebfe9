"""The fault catalogue's facts predicates: structured data in, matches out, never ``eval``.

A predicate reads one host's facts of one probe (and, for ``drift``, what most hosts of the walk
report). ``items: LIST`` evaluates it per entry of a list fact (GPUs, links, ports, mounts), so
a finding can say *which* GPU or port. A fact nobody measured (absent or null) satisfies no
comparison: not measured is neither healthy nor faulty.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge,
}
OPS = (*_COMPARE, "in", "not_in", "contains", "matches", "exists", "missing")
_NUMERIC = ("lt", "le", "gt", "ge")
_VALUELESS = ("exists", "missing")
_COMBINERS = ("all", "any", "not")
# A drift needs this many hosts reporting the fact before a majority means anything.
DRIFT_MIN_HOSTS = 3
_MISSING = object()


@dataclass
class Env:
    """What a predicate may read besides the host's facts."""

    thresholds: Mapping[str, Any] = field(default_factory=dict)
    # drift key -> the fleet's value; (drift key, among key) -> {group value: its hosts' value}
    majority: Mapping[Any, Any] = field(default_factory=dict)


def lookup(facts: Mapping[str, Any] | None, key: str) -> Any:
    """A dotted key inside *facts*, or _MISSING (absent or null)."""
    return _get(facts, _parts(key))


@cache
def _parts(key: str) -> tuple[str, ...]:
    return tuple(key.split("."))


def _get(value: Any, parts: tuple[str, ...]) -> Any:
    for part in parts:
        # a dict first: facts are dicts, and the ABC check costs more than the lookup
        if type(value) is not dict and not isinstance(value, Mapping):
            return _MISSING
        value = value.get(part, _MISSING)
        if value is _MISSING:
            return _MISSING
    return _MISSING if value is None else value


def matching(when: Mapping[str, Any], facts: Mapping[str, Any], env: Env
             ) -> list[Mapping[str, Any]] | None:
    """The entries (with ``items``) or ``[{}]`` (without) for which *when* holds on this host's
    *facts*; None when it does not hold."""
    items, holds = _compiled(when)
    if items is not None:
        entries = _get(facts, items)
        if not isinstance(entries, list):
            return None
        hits = [e for e in entries if isinstance(e, Mapping) and holds(e, facts, env)]
        return hits or None
    return [{}] if holds(None, facts, env) else None


# A condition as a function of (item, facts, env): a catalogue's predicates are judged on every
# host of every step (281 signatures x hosts), and walking their dicts each time was a fifth of
# a 64-host walk's CPU. Compiled once per predicate object (kept here with it, so an id is
# never reused for another).
_Holds = Callable[[Any, Mapping[str, Any], Env], bool]
_COMPILED: dict[int, tuple[Mapping[str, Any], tuple[str, ...] | None, _Holds]] = {}


def _compiled(when: Mapping[str, Any]) -> tuple[tuple[str, ...] | None, _Holds]:
    known = _COMPILED.get(id(when))
    if known is None or known[0] is not when:
        if "items" in when:
            cond = {k: v for k, v in when.items() if k != "items"}
            known = (when, _parts(str(when["items"])), _compile(cond))
        else:
            known = (when, None, _compile(when))
        _COMPILED[id(when)] = known
    return known[1], known[2]


def _compile(cond: Mapping[str, Any]) -> _Holds:
    if "all" in cond:
        subs = tuple(_compile(c) for c in cond["all"])
        return lambda item, facts, env: all(s(item, facts, env) for s in subs)
    if "any" in cond:
        subs = tuple(_compile(c) for c in cond["any"])
        return lambda item, facts, env: any(s(item, facts, env) for s in subs)
    if "not" in cond:
        sub = _compile(cond["not"])
        return lambda item, facts, env: not sub(item, facts, env)
    if "common" in cond:  # this host's value is the fleet's: what (nearly) every host does
        return _common(str(cond["common"]))
    if "drift" in cond:
        return _drift(str(cond["drift"]), None if "among" not in cond else str(cond["among"]))
    return _comparison(cond)


def _common(key: str) -> _Holds:
    parts = _parts(key)

    def holds(item: Any, facts: Mapping[str, Any], env: Env) -> bool:
        if key not in env.majority:
            return False
        value = _get(facts, parts)
        return value is not _MISSING and _frozen(value) == env.majority[key]
    return holds


def _drift(key: str, among: str | None) -> _Holds:
    parts = _parts(key)
    among_parts = None if among is None else _parts(among)

    def holds(item: Any, facts: Mapping[str, Any], env: Env) -> bool:
        if among_parts is not None:  # the norm of the hosts sharing this host's `among`
            group = _get(facts, among_parts)
            norms = env.majority.get((key, among)) or {}
            if group is _MISSING or _frozen(group) not in norms:
                return False
            norm = norms[_frozen(group)]
        elif key in env.majority:
            norm = env.majority[key]
        else:
            return False
        value = _get(facts, parts)
        return value is not _MISSING and _frozen(value) != norm
    return holds


def _reader(key: str) -> Callable[[Any, Mapping[str, Any]], Any]:
    """An item's key first, then the host's."""
    parts = _parts(key)

    def read(item: Any, facts: Mapping[str, Any]) -> Any:
        if item is not None:
            value = _get(item, parts)
            if value is not _MISSING:
                return value
        return _get(facts, parts)
    return read


def _comparison(cond: Mapping[str, Any]) -> _Holds:
    read = _reader(str(cond["key"]))
    op = cond["op"]
    if op == "missing":
        return lambda item, facts, env: read(item, facts) is _MISSING
    if op == "exists":
        return lambda item, facts, env: read(item, facts) is not _MISSING
    if "threshold" in cond:
        name = str(cond["threshold"])

        def expected(item: Any, facts: Mapping[str, Any], env: Env) -> Any:
            return env.thresholds.get(name, _MISSING)
    elif "value_of" in cond:
        other = _reader(str(cond["value_of"]))

        def expected(item: Any, facts: Mapping[str, Any], env: Env) -> Any:
            return other(item, facts)
    else:
        value = cond.get("value")

        def expected(item: Any, facts: Mapping[str, Any], env: Env) -> Any:
            return value

    def holds(item: Any, facts: Mapping[str, Any], env: Env) -> bool:
        actual = read(item, facts)
        if actual is _MISSING:
            return False
        want = expected(item, facts, env)
        return want is not _MISSING and compare(actual, op, want)
    return holds


def compare(actual: Any, op: str, expected: Any) -> bool:
    if op in ("in", "not_in"):
        try:
            return (actual in expected) == (op == "in")
        except TypeError:
            return False
    if op == "contains":
        try:
            return expected in actual
        except TypeError:
            return False
    if op == "matches":
        return isinstance(actual, str) and bool(_regex(str(expected)).search(actual))
    if op in _NUMERIC and (_not_number(actual) or _not_number(expected)):
        return False
    try:
        return bool(_COMPARE[op](actual, expected))
    except TypeError:
        return False


def _not_number(value: Any) -> bool:
    return isinstance(value, bool) or not isinstance(value, int | float)


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _frozen(value: Any) -> Any:
    """A value usable as a dict key (lists of PFC priorities, maps)."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value


def keys_read(when: Mapping[str, Any]) -> list[str]:
    """Every fact key a predicate reads (``key``, ``value_of`` and a drift's ``among``), in
    order, once each."""
    keys: list[str] = []
    for name in ("key", "value_of", "among", "common"):
        if isinstance(when.get(name), str):
            keys.append(when[name])
    for name in ("all", "any"):
        for sub in when.get(name) or ():
            if isinstance(sub, Mapping):
                keys += keys_read(sub)
    if isinstance(when.get("not"), Mapping):
        keys += keys_read(when["not"])
    return list(dict.fromkeys(keys))


def drift_keys(when: Mapping[str, Any]) -> list[str]:
    """Every key a predicate compares with the fleet's majority."""
    return [key for key, _ in drift_specs(when)]


def drift_specs(when: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """Every (key, among) a predicate compares with a majority: the whole fleet's (among
    None) or that of the hosts sharing the host's value of *among* (a GPU model)."""
    specs: list[tuple[str, str | None]] = []
    if "drift" in when:
        among = when.get("among")
        specs.append((str(when["drift"]), None if among is None else str(among)))
    if "common" in when:
        specs.append((str(when["common"]), None))
    for name in ("all", "any"):
        for sub in when.get(name) or ():
            if isinstance(sub, Mapping):
                specs += drift_specs(sub)
    if isinstance(when.get("not"), Mapping):
        specs += drift_specs(when["not"])
    return specs


def fleet_majority(key: str, facts_by_host: Mapping[str, Mapping[str, Any]]) -> Any:
    """The value more than half the reporting hosts share (at least DRIFT_MIN_HOSTS of them
    reporting), or _MISSING: without a clear majority there is no norm to drift from."""
    values = [_frozen(v) for f in facts_by_host.values()
              if (v := lookup(f, key)) is not _MISSING]
    if len(values) < DRIFT_MIN_HOSTS:
        return _MISSING
    value, count = Counter(values).most_common(1)[0]
    return value if count * 2 > len(values) else _MISSING


def majorities(when: Mapping[str, Any], facts_by_host: Mapping[str, Mapping[str, Any]]
               ) -> dict[Any, Any]:
    found: dict[Any, Any] = {}
    for key, among in drift_specs(when):
        if among is None:
            value = fleet_majority(key, facts_by_host)
            if value is not _MISSING:
                found[key] = value
            continue
        groups: dict[Any, dict[str, Mapping[str, Any]]] = {}
        for host, facts in facts_by_host.items():
            if (group := lookup(facts, among)) is not _MISSING:
                groups.setdefault(_frozen(group), {})[host] = facts
        norms = {group: value for group, hosts in groups.items()
                 if (value := fleet_majority(key, hosts)) is not _MISSING}
        found[(key, among)] = norms
    return found


# --- validation ------------------------------------------------------------------------------

def check_predicate(when: Any, thresholds: Mapping[str, Any] | None = None) -> list[str]:
    """Problems with a ``when`` (empty when it is well formed); *thresholds*, when given, are
    the names a ``threshold:`` may use."""
    if not isinstance(when, Mapping):
        return ["a predicate is a mapping"]
    if "items" in when:
        if not isinstance(when["items"], str):
            return ["items names a list fact (a string)"]
        rest = {k: v for k, v in when.items() if k != "items"}
        if _drifts(rest):
            return ["drift compares a host-level fact with the fleet; it cannot be used "
                    "per item"]
        return _check(rest, thresholds)
    return _check(when, thresholds)


def _drifts(cond: Any) -> bool:
    """Whether *cond* holds a ``drift`` (``common`` reads a host-level fact too, but says of
    the host only that the fleet shares its value, which an entry's rule may ask)."""
    if not isinstance(cond, Mapping):
        return False
    if "drift" in cond:
        return True
    subs = [*(cond.get("all") or ()), *(cond.get("any") or ()), cond.get("not")]
    return any(_drifts(sub) for sub in subs if sub is not None)


def _check(cond: Any, thresholds: Mapping[str, Any] | None) -> list[str]:
    if not isinstance(cond, Mapping):
        return ["a condition is a mapping"]
    forms = [k for k in ("key", "drift", "common", *_COMBINERS) if k in cond]
    if len(forms) != 1:
        return [f"a condition needs exactly one of key, drift, common, all, any, not (found: "
                f"{', '.join(forms) or 'none'})"]
    form = forms[0]
    if form == "common":
        if not isinstance(cond["common"], str):
            return ["common names a host fact (a string)"]
        extra = set(cond) - {"common"}
        return [f"'{sorted(extra)[0]}' does not go with common"] if extra else []
    if form in ("all", "any"):
        subs = cond[form]
        if not isinstance(subs, Sequence) or isinstance(subs, str) or not subs:
            return [f"'{form}' takes a non-empty list of conditions"]
        return [p for sub in subs for p in _check(sub, thresholds)]
    if form == "not":
        return _check(cond["not"], thresholds)
    if form == "drift":
        extra = set(cond) - {"drift", "among"}
        if "among" in cond and not isinstance(cond["among"], str):
            return ["among names a host fact (a string)"]
        return [f"'{sorted(extra)[0]}' does not go with drift"] if extra else []
    extra = set(cond) - {"key", "op", "value", "threshold", "value_of"}
    if extra:
        return [f"'{sorted(extra)[0]}' does not go with key (allowed: op, value, threshold, "
                "value_of)"]
    op = cond.get("op")
    if op not in OPS:
        return [f"op '{op}' is not one of {', '.join(OPS)}"]
    given = [k for k in ("value", "threshold", "value_of") if k in cond]
    if op in _VALUELESS:
        return [f"'{op}' takes no value"] if given else []
    if len(given) != 1:
        return [f"'{op}' needs exactly one of value, threshold, value_of"]
    if "threshold" in cond and thresholds is not None and cond["threshold"] not in thresholds:
        return [f"unknown threshold '{cond['threshold']}' (probes/thresholds.yaml)"]
    if op in _NUMERIC and "value" in cond and _not_number(cond["value"]):
        return [f"'{op}' compares numbers, got {cond['value']!r}"]
    if op in ("in", "not_in") and "value" in cond and not isinstance(cond["value"], list):
        return [f"'{op}' needs a list, got {cond['value']!r}"]
    if op == "matches":
        try:
            re.compile(str(cond.get("value")))
        except re.error as exc:
            return [f"'matches' needs a regular expression: {exc}"]
    return []
