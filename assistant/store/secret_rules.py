"""The secret rules (``secret_rules.yaml``) as the redactor applies them.

Each rule is a pattern, the literals one of which the text must hold for it to run (its
``keywords``: gitleaks' pre-filter; in the match or around it), the capture group that is the
secret, and what lets a match through: an entropy floor (a
value too regular to be random) and allowlists (a variable reference, a placeholder, a stop
word). Most rules come from gitleaks' maintained rule set (``gitleaks.py`` converts it); diag's
own and added ones sit in the same file with their sources.

Speed: the redactor runs on every byte a fleet sends back, and ~250 patterns over each output
would cost seconds. As in gitleaks, a rule runs only when one of its keywords is in the text
(lower-cased). All keywords are found in one pass of one pattern built as a trie of them
(:meth:`RuleSet.present`). A rule whose every match starts with one of a few literals (its
*lead*: ``token``, ``AKIA``, ``-----BEGIN``, read off the pattern by ``leads.py``) is then
tried only where those are (``str.find``), not at every position of the text as ``finditer``
would: Python's backtracking engine pays per position what RE2 does not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from .leads import leads, line_prefix

MARK = "[REDACTED]"
RULES_FILE = Path(__file__).with_name("secret_rules.yaml")
_NAME_CHAR = re.compile(r"[\w.-]", re.ASCII)


@dataclass(frozen=True)
class Allow:
    """A rule's allowlist (gitleaks' semantics): the match is not a secret when the target
    (the secret, the whole match or its line) matches one of *regexes*, or the secret holds one
    of *stopwords*; with *every*, all the kinds given must say so."""

    target: str
    regexes: tuple[re.Pattern[str], ...] = ()
    stopwords: tuple[str, ...] = ()
    every: bool = False

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = match if self.target == "match" else line if self.target == "line" else secret
        checks = []
        if self.regexes:
            checks.append(any(r.search(target) for r in self.regexes))
        if self.stopwords:
            low = secret.lower()
            checks.append(any(word in low for word in self.stopwords))
        return all(checks) if self.every else any(checks)


@dataclass(frozen=True)
class Rule:
    """One secret shape. *group*: the capture group that is the secret (0: the whole match;
    None: the first group that matched, gitleaks' rule when a pattern has several).

    The pattern is compiled, and its lead literals read, the first time a text holds one of
    the rule's keywords: most rules never run in a process, and compiling ~250 patterns
    up front cost every command that records 60 ms."""

    id: str
    regex: str
    keywords: frozenset[str]
    group: int | None
    entropy: float = 0.0
    name_prefix: int = 0  # how far back gitleaks' match started (for allowlists on it)
    allow: tuple[Allow, ...] = ()
    replace: str = MARK

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.regex, re.ASCII)

    @cached_property
    def lead(self) -> frozenset[str]:
        """Lower-cased literals one of which every match starts with (or none)."""
        return leads(self.regex, re.ASCII)

    @cached_property
    def line_prefix(self) -> re.Pattern[str] | None:
        """The part before a wildcard that scans the rest of the line (``leads.py``)."""
        return line_prefix(self.regex, re.ASCII)

    def hide(self, text: str, shared: Sequence[Allow] = (), folded: str | None = None,
             places: dict[str, list[int]] | None = None) -> str:
        """*text* with each secret this rule finds replaced, the rest kept as it was.
        *folded*: ``ascii_lower(text)``; *places* remembers where lead literals were found
        in it (shared by the rules of one text)."""
        out: list[str] = []
        done = previous = 0  # text[:done] is in out; where the previous match ended
        folded = ascii_lower(text) if folded is None else folded
        for m in self._matches(text, folded, {} if places is None else places):
            start, end = self._span(m)
            if start < done or end <= start or text.startswith(MARK, start) \
                    or self._let_through(text, m, start, end, previous, shared):
                previous = m.end()
                continue
            out += [text[done:start], self.replace]
            done, previous = end, m.end()
        if not out:
            return text
        out.append(text[done:])
        return "".join(out)

    def _matches(self, text: str, folded: str,
                 places: dict[str, list[int]]) -> Iterator[re.Match[str]]:
        """What ``finditer`` yields, trying the pattern only where a lead literal starts."""
        if not self.lead:
            yield from self.pattern.finditer(text)
            return
        for word in self.lead - places.keys():
            places[word] = _find_all(folded, word)
        starts = sorted({at for word in self.lead for at in places[word]})
        end = 0  # where the last match ended
        useless = (0, 0)  # later starts on a line an attempt has tried to its end
        for at in starts:
            if at < end or useless[0] <= at < useless[1]:
                continue
            m = self.pattern.match(text, at)
            if m is not None:
                yield m
                end = max(m.end(), at + 1)
            elif self.line_prefix is not None:
                # An attempt that got past the prefix tried every later place on the line:
                # a later start there, after what the prefix took, cannot match either.
                got = self.line_prefix.match(text, at)
                if got is not None:
                    stop = text.find("\n", got.end())
                    useless = (got.end(), len(text) if stop == -1 else stop)

    def _span(self, m: re.Match[str]) -> tuple[int, int]:
        if self.group is not None:
            return m.span(self.group)
        for index in range(1, (m.lastindex or 0) + 1):
            if m.start(index) < m.end(index):
                return m.span(index)
        return m.span()

    def _let_through(self, text: str, m: re.Match[str], start: int, end: int, previous: int,
                     shared: Sequence[Allow]) -> bool:
        """Is this match not a secret: too regular (entropy), or allowed by the rule's
        allowlists or the shared one (which is written for one-line values: a secret spanning
        lines, a key block, is never let through by it)?"""
        secret = text[start:end]
        if self.entropy and entropy(secret) <= self.entropy:
            return True
        allows = [*self.allow, *(shared if "\n" not in secret else ())]
        if not allows:
            return False
        begin = m.start()
        floor = max(previous, begin - self.name_prefix)
        while begin > floor and _NAME_CHAR.match(text, begin - 1):
            begin -= 1
        match = text[begin:m.end()].strip("\n")
        line = text[text.rfind("\n", 0, m.start()) + 1:_line_end(text, m.end())]
        return any(a.allows(secret, match, line) for a in allows)


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end == -1 else end


def entropy(text: str) -> float:
    """Shannon entropy in bits per character, as gitleaks computes it (its ``entropy`` floor:
    a match at or below it is not taken for a secret)."""
    if not text:
        return 0.0
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


class RuleSet:
    """The rules in the order they run, the shared allowlist, and the keyword pre-filter."""

    def __init__(self, rules: Sequence[Rule], shared: Sequence[Allow],
                 extra_keywords: Iterable[str] = ()) -> None:
        self.rules = list(rules)
        self.shared = list(shared)
        words = {k for rule in self.rules for k in rule.keywords} | set(extra_keywords)
        # Keywords with a space in them are looked for as they are; the rest in the text's
        # distinct words (a keyword never spans a space), by one pattern built as a trie.
        self._spaced = frozenset(w for w in words if len(w.split()) != 1 or w != w.strip())
        plain = sorted(words - self._spaced)
        self._trie = re.compile(_trie(plain))
        # The keywords inside a keyword (found with it), and where a keyword may start
        # inside another one and run past its end (the scan does not overlap: it looks there).
        known = set(plain)
        begun = {w[:n] for w in plain for n in range(1, len(w))}  # the words' proper prefixes
        self._inside = {k: frozenset(k[i:j] for i in range(len(k))
                                     for j in range(i + 1, len(k) + 1) if k[i:j] in known)
                        for k in plain}
        self._restart = {k: tuple(p for p in range(1, len(k)) if k[p:] in begun) for k in plain}
        # Which rules each keyword lets run (most texts hold a few keywords of ~250 rules).
        self._runs: dict[str, list[int]] = {}
        for index, rule in enumerate(self.rules):
            for word in rule.keywords:
                self._runs.setdefault(word, []).append(index)
        self._always = [i for i, rule in enumerate(self.rules) if not rule.keywords]

    def present(self, folded: str) -> frozenset[str]:
        """The keywords *folded* (lower-cased text) holds: one pass of the trie over its
        distinct words (fleet output repeats its words: 40% of the text to scan)."""
        words = "\n".join(set(folded.split()))
        found: set[str] = {w for w in self._spaced if w in folded}
        for m in self._trie.finditer(words):
            found |= self._inside[m.group()]
            for offset in self._restart[m.group()]:
                more = self._trie.match(words, m.start() + offset)
                if more is not None:
                    found |= self._inside[more.group()]
        return frozenset(found)

    def hide(self, text: str, present: frozenset[str]) -> str:
        """*text* through every rule one of whose keywords is *present* (or that has none)."""
        folded = ascii_lower(text)  # where rules look for their lead literals
        places: dict[str, list[int]] = {}  # lead literal -> where it is in folded
        chosen = {*self._always, *(i for word in present for i in self._runs.get(word, ()))}
        for index in sorted(chosen):  # in the file's order
            rule = self.rules[index]
            hidden = rule.hide(text, self.shared, folded, places)
            if hidden is not text:  # secrets replaced: the positions moved
                folded, places = ascii_lower(hidden), {}
            text = hidden
        return text


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def ascii_lower(text: str) -> str:
    """*text* with A-Z lowered and every other character (so every position) kept: the
    patterns are compiled with re.ASCII, whose IGNORECASE folds only those."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def _find_all(haystack: str, needle: str) -> list[int]:
    found, at = [], haystack.find(needle)
    while at != -1:
        found.append(at)
        at = haystack.find(needle, at + 1)
    return found


def _trie(words: Sequence[str]) -> str:
    """One pattern matching any of *words*, longest first at each position, as a trie (one
    branch per next character): the engine tries a handful of branches per position instead
    of every word."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(c) + emit(node[c]) for c in sorted(node) if c]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
        return f"(?:{body})?" if "" in node else body

    return emit(root) or "(?!)"


def _allow(data: dict[str, Any]) -> Allow:
    return Allow(target=data.get("target", "secret"),
                 regexes=tuple(re.compile(r, re.ASCII) for r in data.get("regexes", ())),
                 stopwords=tuple(data.get("stopwords", ())), every=bool(data.get("all")))


def _rule(data: dict[str, Any]) -> Rule:
    group = data.get("group", 0)
    return Rule(id=data["id"], regex=data["regex"],
                keywords=frozenset(k.lower() for k in data.get("keywords", ())),
                group=None if group == "first" else int(group),
                entropy=float(data.get("entropy", 0.0)),
                name_prefix=int(data.get("name_prefix", 0)),
                allow=tuple(_allow(a) for a in data.get("allow", ())),
                replace=data.get("replace", MARK))


def load_data(path: Path = RULES_FILE) -> dict[str, Any]:
    """The rule file's plain data (parsed once per content, kept in the start cache)."""
    from probes import shipped

    data: dict[str, Any] = shipped.data(path)
    return data


@lru_cache(maxsize=1)
def rule_set() -> RuleSet:
    """The shipped rules, compiled once per process (on first use: a command that writes
    nothing never pays for ~240 patterns)."""
    data = load_data()
    named = data.get("named") or {}
    return RuleSet([_rule(r) for r in data["rules"]],
                   [_allow(data["allow"])] if data.get("allow") else [],
                   extra_keywords=named.get("keywords", ()))


def named_rule() -> tuple[re.Pattern[str], frozenset[str]]:
    """diag's key-ish names (``NAME=value`` hides the value) and the literals one of which
    every such name contains."""
    named = load_data()["named"]
    return (re.compile(named["regex"], re.IGNORECASE),
            frozenset(k.lower() for k in named["keywords"]))


class Untranslatable(ValueError):
    """A gitleaks rule that Python's ``re`` cannot express as it is meant (``gitleaks.py``)."""
