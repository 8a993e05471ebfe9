"""Secrets never reach the store: token-like values are replaced before anything is written.

Probe output is mostly counters and versions, but a node's output can carry what a job put in
its environment or its logs: an ``HF_TOKEN=...`` echoed by a launcher, a bearer token in a
``curl -v`` line, a private key cat'ed into a log. The store keeps history for a year and is
exported and pooled with other people's, so redaction happens on the way in, not on display.

What is a secret is data: ``secret_rules.yaml`` holds gitleaks' maintained rule set (converted
by ``gitleaks.py``) and diag's own rules, each with its source (``secret_rules.py`` applies
them). Only the secret is replaced, by ``[REDACTED]``: the name in front of it and the rest of
the line are kept, so a reader still sees *that* a token was there. On top of the rules, a
value under a key-ish name (``NAME=value``, ``"name": "value"``, ``--name value``) is hidden
whatever its shape: redaction errs on the side of hiding (``max_tokens=4096`` loses its
number, which costs nothing for a diagnosis; a leaked key costs a rotation).

Redaction runs on every byte a fleet sends back, so it must be cheap (``bench/redact.py``): a
rule runs only when the text holds one of its keywords (all of them found in one pass), the
key-ish names are looked for only around their literals, and a raw output is bounded *before*
it is redacted (:func:`bound_redacted`), so no work is spent on bytes that are not kept.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .secret_rules import MARK, named_rule, rule_set

__all__ = ["MARK", "bound_redacted", "bound_text", "redact_data", "redact_text"]

# A name is a run of [\w.-]; what may follow it: a closing quote, a separator, a value.
_NAME = re.compile(r"[\w.-]+")
_AFTER = re.compile(r"""(["']?)(\s*[=:]\s*|[ \t]+)("[^"\n]*"|'[^'\n]*'|[^\s,;&"'}\]]+)""")


def _redact_named(text: str) -> str:
    """NAME=value, NAME: value, "name": "value", --name value, where NAME is key-ish.

    Done as a scan, not one regular expression: a pattern like ``[\\w.-]*token[\\w.-]*=``
    backtracks quadratically on long runs of word characters (200 kB of output took
    minutes); here each name is looked at once and its value matched at a fixed position.
    """
    keyish = _keyish()[0]
    out: list[str] = []
    done = 0  # text[:done] is already in out
    for name in _candidate_names(text):
        if name.start() < done or not keyish.search(name.group()):
            continue
        after = _AFTER.match(text, name.end())
        if after is None:
            continue
        sep, value = after.group(2), after.group(3)
        if text.startswith(MARK, after.start(3)) or value in ('""', "''") \
                or text.startswith(" " + MARK, after.end(3)):  # done, or "Bearer [REDACTED]"
            continue
        # "--token abc" is a secret only when the value looks like one; "token expired" is
        # prose. A whitespace-separated value counts when long and token-shaped.
        if not sep.strip() and (len(value) < 16
                                or not re.fullmatch(r"[A-Za-z0-9+/=_.~-]+", value)):
            continue
        vquote = value[0] if value[:1] in "\"'" else ""
        out.append(text[done:after.start(3)])
        out.append(f"{vquote}{MARK}{vquote}")
        done = after.end(3)
    out.append(text[done:])
    return "".join(out)


def _candidate_names(text: str) -> list[re.Match[str]]:
    """The names (runs of ``[\\w.-]``) that may be key-ish: those around a literal every
    key-ish name contains. Looking at every name of a 64 kB output was most of redaction's
    cost; literals are found at C speed, and a name is then judged exactly as before."""
    literals = _keyish()[1]
    if not text.isascii():  # case folding could move positions
        return list(_NAME.finditer(text))
    folded = text.lower()
    hits = sorted({at for literal in literals for at in _find_all(folded, literal)})
    starts: set[int] = set()
    previous, previous_start = -1, 0
    for at in hits:
        # Walk back to the name's start, but never past the previous hit: a name there has
        # the same start (a run of 40,000 'token's is one name, found in linear time).
        start = at
        while start > previous + 1 and _NAME_CHAR.match(text, start - 1):
            start -= 1
        if start == previous + 1 and previous >= 0 and _NAME_CHAR.match(text, previous):
            start = previous_start
        starts.add(start)
        previous, previous_start = at, start
    names = (_NAME.match(text, start) for start in sorted(starts))
    return [name for name in names if name is not None]


def _find_all(haystack: str, needle: str) -> list[int]:
    found, at = [], haystack.find(needle)
    while at != -1:
        found.append(at)
        at = haystack.find(needle, at + 1)
    return found


def redact_text(text: str) -> str:
    """*text* with every secret the rules know, and every value under a key-ish name,
    replaced by ``[REDACTED]``."""
    if not text:
        return text
    rules = rule_set()
    # Keywords are looked for in lower case (casefold beyond ASCII: a Kelvin sign still
    # finds the 'k' the key-ish names' re.IGNORECASE matches).
    present = rules.present(text.lower() if text.isascii() else text.casefold())
    text = rules.hide(text, present)
    if _keyish()[1].isdisjoint(present):
        return text
    return _redact_named(text)


@lru_cache(maxsize=4096)
def _short(text: str) -> str:
    """Short strings (fact values, messages) repeat across hosts: redacted once each."""
    return redact_text(text)


_NAME_CHAR = re.compile(r"[\w.-]")


@lru_cache(maxsize=1)
def _keyish() -> tuple[re.Pattern[str], frozenset[str]]:
    return named_rule()


@lru_cache(maxsize=4096)
def _keyish_name(key: str) -> bool:
    """Is *key* a name whose value is hidden whole? Fact and field names repeat for every
    host of a step: each is looked at once."""
    return _keyish()[0].search(key) is not None


def redact_data(value: Any) -> Any:
    """A JSON-able structure with secrets hidden: values under key-ish names, and token-like
    text anywhere in strings. Structure, keys and non-string values are kept.

    Numbers, booleans and None are taken as they are without a call each: a 64-host step's
    facts hold hundreds of thousands of them (NVLink counters), and the call per value was
    most of recording them."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(item, str):
                out[key] = MARK if item and isinstance(key, str) and _keyish_name(key) else \
                    _redact_str(item)
            elif isinstance(item, _CONTAINERS):
                out[key] = redact_data(item)
            else:
                out[key] = item
        return out
    if isinstance(value, _CONTAINERS):
        return [redact_data(v) if isinstance(v, _CONTAINERS) else
                _redact_str(v) if isinstance(v, str) else v for v in value]
    if isinstance(value, str):
        return _redact_str(value)
    return value


_CONTAINERS = (dict, list, tuple)


def _redact_str(text: str) -> str:
    return _short(text) if len(text) <= 256 else redact_text(text)


RAW_LIMIT = 16 * 1024  # characters kept of one host's output for one probe
# How far back from a cut to look for a line end (or a space): a secret is cut whole or kept
# whole, never half kept where its name or its BEGIN line went with the other half.
_CUT_SLACK = 4096


def bound_text(text: str, limit: int = RAW_LIMIT) -> str:
    """At most about *limit* characters: the head and the tail, which is where tools print
    their header and their verdict, with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    head, tail = _cuts(text, limit)
    return f"{text[:head]}\n[... {tail - head} characters cut by diag ...]\n{text[tail:]}"


def bound_redacted(text: str, limit: int = RAW_LIMIT) -> str:
    """``redact_text(bound_text(text))``'s purpose at the cost of the kept bytes only: the head
    and the tail are cut at line ends (else at a space), then each is redacted on its own."""
    if len(text) <= limit:
        return redact_text(text)
    head, tail = _cuts(text, limit)
    return (f"{redact_text(text[:head])}\n[... {tail - head} characters cut by diag ...]\n"
            f"{redact_text(text[tail:])}")


def _cuts(text: str, limit: int) -> tuple[int, int]:
    """Where the kept head ends and the kept tail starts."""
    half = limit // 2
    head, tail = half, len(text) - half
    for sep in ("\n", " "):
        at = text.rfind(sep, max(0, half - _CUT_SLACK), half)
        if at > 0:
            head = at + 1
            break
    for sep in ("\n", " "):
        at = text.find(sep, tail, min(len(text), tail + _CUT_SLACK))
        if at != -1:
            tail = at + 1
            break
    return head, max(head, tail)
