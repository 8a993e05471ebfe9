"""Where a secret rule needs to be tried: the literals every match of its pattern starts with,
and, for a pattern that scans the rest of a line, which later starts are no use.

Python's ``re`` searches by trying the pattern at each position of the text; for a pattern that
does not start with a plain literal that is most of its cost (gitleaks' generic rule took 20 ms
on 350 kB of quiet output). When every match of a rule starts with one of a few literals
(``(?i)(?:access|auth|...|token)...``, ``\\b(?:AKIA|ASIA)...``, ``--?(?:password|pass)``), the
redactor knows from its keyword scan where those literals are and tries the pattern only
there, which gives the same matches as ``finditer``.

A pattern such as ``\\bcurl\\b[^\\n]*?\\s-u(...)`` (a command, then a flag anywhere later on
its line) costs the rest of the line at each start, so a line of 40,000 ``curl`` words cost
minutes (RE2 pays nothing for that). But an attempt that got through ``\\bcurl\\b`` and failed
has tried every later place on the line the flag could be: a later ``curl`` on the same line
cannot match either. :func:`line_prefix` gives the part before such a wildcard, so the rule
can tell such an attempt from one that failed at once.
"""

from __future__ import annotations

import re
from typing import Any

try:  # the parser and compiler behind re.compile
    from re import _compiler as _sre_compile  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # Python 3.10
    import sre_compile as _sre_compile
    import sre_parse as _sre_parse

# Starts of a sequence: (literal text, whether the whole sequence so far was that literal).
_Starts = set[tuple[str, bool]]
_MAX = 64  # more forks than this: the literals are too many to be worth it
_ZERO_WIDTH = ("AT", "ASSERT", "ASSERT_NOT")


def leads(pattern: str, flags: int = 0) -> frozenset[str]:
    """Lower-cased strings one of which every match of *pattern* starts with (at least two
    characters each), or an empty set when there are none worth using."""
    try:
        starts = _sequence(list(_sre_parse.parse(pattern, flags)))
    except Exception:  # a pattern the parser's internals do not expect: no leads
        return frozenset()
    found = {text.lower() for text, _ in starts}
    if not found or min(map(len, found)) < 2:
        return frozenset()
    # A literal that another one starts is implied by it: the shorter one is enough.
    return frozenset(text for text in found
                     if not any(text != other and text.startswith(other) for other in found))


def _sequence(items: list[Any]) -> _Starts:
    starts: _Starts = {("", True)}
    for item in items:
        open_ = {text for text, whole in starts if whole}
        if not open_:
            break
        these = _item(item)
        longer = {(text, False) for text, whole in starts if not whole}
        longer |= {(head + text, whole) for head in open_ for text, whole in these}
        if len(longer) > _MAX:  # too many forks: stop at what is known so far
            return {(text, False) for text, _ in starts}
        starts = longer
    return starts


def _item(item: tuple[Any, Any]) -> _Starts:
    op, arg = item
    name = str(op)
    if name == "LITERAL":
        return {(chr(arg), True)}
    if name in _ZERO_WIDTH:
        return {("", True)}
    if name == "IN" and len(arg) <= 8 and all(str(o) == "LITERAL" for o, _ in arg):
        return {(chr(a), True) for _, a in arg}
    if name == "BRANCH":
        return {start for branch in arg[1] for start in _sequence(list(branch))}
    if name == "SUBPATTERN":
        return _sequence(list(arg[-1]))
    if name in ("MAX_REPEAT", "MIN_REPEAT"):
        low, high, inner = arg
        once = _sequence(list(inner))
        if low == 0:  # may be skipped
            return {("", True)} | ({*once} if high == 1 else {(t, False) for t, _ in once})
        return once if low == high == 1 else {(t, False) for t, _ in once}
    return {("", False)}




def line_prefix(pattern: str, flags: int = 0) -> re.Pattern[str] | None:
    """The part of *pattern* before a wildcard that reaches every later position of its line
    (``.*``, ``[^\\n]*?``, or a group each of whose branches starts with one), compiled; None
    when there is none, or when what follows it could depend on where the match started (a
    back-reference to a group)."""
    try:
        parsed = _sre_parse.parse(pattern, flags)
        if _has(list(parsed), ("GROUPREF", "GROUPREF_EXISTS")):
            return None
        items = list(parsed)
        if len(items) >= 1 and str(items[0][0]) == "SUBPATTERN" and not items[0][1][1] \
                and not items[0][1][2]:
            items = list(items[0][1][3]) + items[1:]  # a leading group: look inside it
        for at, item in enumerate(items):
            if _wildcard(item):
                if not at:
                    return None
                compiled: re.Pattern[str] = _sre_compile.compile(
                    _sre_parse.SubPattern(parsed.state, items[:at]), flags)
                return compiled
    except Exception:  # an internal of re that is not as expected: no shortcut
        return None
    return None


def _has(items: list[Any], names: tuple[str, ...]) -> bool:
    for op, arg in items:
        if str(op) in names:
            return True
        if str(op) == "SUBPATTERN" and _has(list(arg[3]), names):
            return True
        if str(op) == "BRANCH" and any(_has(list(b), names) for b in arg[1]):
            return True
        if str(op) in ("MAX_REPEAT", "MIN_REPEAT", "ASSERT", "ASSERT_NOT") \
                and _has(list(arg[-1]), names):
            return True
    return False


def _wildcard(item: tuple[Any, Any]) -> bool:
    """An unbounded repeat of 'anything but a newline', or a choice each branch of which
    starts with one."""
    op, arg = item
    name = str(op)
    if name in ("MAX_REPEAT", "MIN_REPEAT"):
        low, high, inner = arg
        inner = list(inner)
        if low != 0 or high != _sre_parse.MAXREPEAT or len(inner) != 1:
            return False
        kind, value = inner[0]
        return (str(kind) == "ANY" or (str(kind) == "NOT_LITERAL" and value == 10)
                or (str(kind) == "IN" and [str(o) for o, _ in value] == ["NEGATE", "LITERAL"]
                    and value[1][1] == 10))
    if name == "BRANCH":
        return all(branch and _wildcard(next(iter(branch))) for branch in arg[1])
    if name == "SUBPATTERN" and not arg[1] and not arg[2]:
        inner = list(arg[3])
        return bool(inner) and _wildcard(inner[0])
    return False
