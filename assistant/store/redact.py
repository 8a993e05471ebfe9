"""Secrets never reach the store: token-like values are replaced before anything is written.

Probe output is mostly counters and versions, but a node's output can carry what a job put in
its environment or its logs: an ``HF_TOKEN=...`` echoed by a launcher, a bearer token in a
``curl -v`` line, a private key cat'ed into a log. The store keeps history for a year and is
exported and pooled with other people's, so redaction happens on the way in, not on display.

Redaction errs on the side of hiding: ``max_tokens=4096`` loses its number, which costs nothing
for a diagnosis; a leaked key costs a rotation. Values are replaced by ``[REDACTED]`` and the
name in front of them is kept, so a reader still sees *that* a token was there.

Redaction runs on every byte a fleet sends back, so it must be cheap (``bench/recording.py``):
each rule's pattern is run only when the text holds a literal every match of it must contain
(worked out from the pattern itself, so a rule added to ``_RULES`` needs nothing else), the
key-ish names are looked for only around those literals, and a raw output is bounded *before*
it is redacted (:func:`bound_redacted`), so no work is spent on bytes that are not kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

try:  # the parser behind re.compile; only used to read literals out of the rules' patterns
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # Python 3.10
    import sre_parse as _sre_parse

MARK = "[REDACTED]"

# Names that say "the value after me is a secret". Matched inside longer names too
# (HF_TOKEN, AWS_SECRET_ACCESS_KEY, db_password, x-api-key), but a bare "key" is not one:
# evidence like {"key": "driver_version"} and pkey/partition keys are not secrets.
_KEYISH = (r"(?:passw(?:or)?d|passphrase|pass\b|pwd\b|secret|token|api[_-]?key|apikey"
           r"|access[_-]?key|private[_-]?key|auth[_-]?key|client[_-]?key|credentials?"
           r"|auth\b|authorization|session[_-]?key|signature)")
_KEYISH_RE = re.compile(_KEYISH, re.IGNORECASE)
# A name is a run of [\w.-]; what may follow it: a closing quote, a separator, a value.
_NAME = re.compile(r"[\w.-]+")
_AFTER = re.compile(r"""(["']?)(\s*[=:]\s*|[ \t]+)("[^"\n]*"|'[^'\n]*'|[^\s,;&"'}\]]+)""")

_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str] | str]

_RULES: list[_Rule] = [
    # PEM private keys, whole block; a block cut short (truncated output) to the end.
    (re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY((?: BLOCK)?)-----.*?"
                r"(?:-----END \1PRIVATE KEY\2-----|\Z)", re.DOTALL),
     f"-----BEGIN PRIVATE KEY----- {MARK} -----END PRIVATE KEY-----"),
    # ...and a key's tail whose head was cut off (a bounded output, a `tail` of a log): the
    # base64 lines right before its END line.
    (re.compile(r"^(?:[A-Za-z0-9+/=]+\r?\n)+-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
                re.MULTILINE),
     f"{MARK} -----END PRIVATE KEY-----"),
    # Credentials inside URLs: scheme://user:password@host, also as a shell prints them back
    # (`set -x`, printf %q: `pa\ ss`, `p'\''w`), with an '@' inside the password (up to the
    # last one before the host), and with no user (redis://:password@host).
    (re.compile(r"((?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^/\s:@]*:)((?:\\.|[^\s/\\])+)(@)",
                re.IGNORECASE),
     lambda m: f"{m.group(1)}{MARK}{m.group(3)}"),
    # Chat webhooks: the URL is the credential (anyone holding it can post).
    (re.compile(r"(https://hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/)[\w/-]+"),
     lambda m: f"{m.group(1)}{MARK}"),
    (re.compile(r"(https://(?:[\w-]+\.)?discord(?:app)?\.com/api/webhooks/\d+/)[\w-]+"),
     lambda m: f"{m.group(1)}{MARK}"),
    # Passwords on command lines, as `ps`, shell history and `set -x` show them:
    # mysql/mariadb -pPASS (attached: a space would make it prompt), sshpass -p PASS,
    # --password PASS / --passwd / --pass (a flag's value, whatever its shape), curl -u user:PASS.
    (re.compile(r"(\b(?:mysql\w*|mariadb\w*)\b[^\n]*?\s-p)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)"),
     lambda m: f"{m.group(1)}{MARK}"),
    (re.compile(r"(\bsshpass\b[^\n]*?\s-p\s*)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)"),
     lambda m: f"{m.group(1)}{MARK}"),
    (re.compile(r"((?<![\w-])--?(?:password|passwd|pass)\s+)(?!-)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)",
                re.IGNORECASE),
     lambda m: f"{m.group(1)}{MARK}"),
    (re.compile(r"(\b(?:curl|wget)\b[^\n]*?\s(?:-u\s*|--user[=\s]\s*|--http-password[=\s])"
                r"['\"]?[^\s:'\"]*:)([^\s'\"]+)"),
     lambda m: f"{m.group(1)}{MARK}"),
    # Authorization headers and bearer/basic tokens.
    (re.compile(r"\b(bearer|basic|token)(\s+)([A-Za-z0-9\-._~+/]{8,}=*)", re.IGNORECASE),
     lambda m: f"{m.group(1)}{m.group(2)}{MARK}"),
    # Well-known token shapes, wherever they appear.
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b"), MARK),        # AWS key id
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), MARK),                           # GitHub
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}\b"), MARK),                         # GitHub PAT
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MARK),  # JWT
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), MARK),                          # Slack
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), MARK),                                  # OpenAI-style
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), MARK),                                  # Hugging Face
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), MARK),                               # GitLab
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), MARK),                                # Google API
]


Literals = frozenset[str]


def _literal_sets(items: list[Any]) -> list[Literals]:
    """Sets of literals, each set such that every match of the sequence *items* contains one
    of its strings (lower-cased by the caller for case-insensitive patterns)."""
    found: list[Literals] = []
    run: set[str] = {""}  # the literal text just matched, one of these (a small class forks)

    def extend(chars: list[str]) -> None:
        nonlocal run
        if len(run) * len(chars) > 64:
            close()
        run = {r + c for r in run for c in chars}

    def close() -> None:
        nonlocal run
        if run != {""}:
            found.append(frozenset(run))
        run = {""}

    for op, arg in items:
        name = str(op)
        if name == "SUBPATTERN" and not arg[1] and not arg[2] and len(arg[3]) == 1:
            op, arg = arg[3][0]  # (?:X) is X
            name = str(op)
        words = _words(arg[1]) if name == "BRANCH" else None
        if words is not None:
            extend(words)  # A(?:KIA|SIA) -> AKIA, ASIA
        elif name == "LITERAL":
            extend([chr(arg)])
        elif name == "IN" and len(arg) <= 8 and all(str(o) == "LITERAL" for o, _ in arg):
            extend([chr(a) for _, a in arg])  # gh[pousr]_ -> ghp_, gho_, ...
        elif name == "SUBPATTERN" and not arg[1] and not arg[2]:  # a group, no flag changes
            inner = list(arg[3])
            if len(inner) == 1 and str(inner[0][0]) == "BRANCH":
                close()
                found.extend(_branch_sets(inner[0][1][1]))
            elif all(str(o) == "LITERAL" for o, _ in inner):
                extend(["".join(chr(a) for _, a in inner)])
            else:
                close()
                found.extend(_literal_sets(inner))
        elif name == "BRANCH":
            close()
            found.extend(_branch_sets(arg[1]))
        elif name in ("MAX_REPEAT", "MIN_REPEAT") and arg[0] >= 1:
            close()
            found.extend(_literal_sets(list(arg[2])))
        else:
            close()
    close()
    return found


def _words(branches: list[Any]) -> list[str] | None:
    """The strings of an alternation of plain words, else None."""
    words = []
    for branch in branches:
        if not all(str(o) == "LITERAL" for o, _ in branch):
            return None
        words.append("".join(chr(a) for _, a in branch))
    return words


def _branch_sets(branches: list[Any]) -> list[Literals]:
    """An alternation: one literal of each branch (every match takes one of the branches)."""
    union: set[str] = set()
    for branch in branches:
        sets = _literal_sets(list(branch))
        if not sets:
            return []
        union |= max(sets, key=lambda found: min(map(len, found)))
    return [frozenset(union)]


def required_literals(pattern: re.Pattern[str]) -> Literals | None:
    """Strings of which every match of *pattern* contains at least one, lower-cased when the
    pattern ignores case; None when none can be relied on (the pattern then always runs)."""
    try:
        sets = _literal_sets(list(_sre_parse.parse(pattern.pattern, pattern.flags)))
    except Exception:  # an exotic pattern: just run it
        return None
    sets = [found for found in sets if min(map(len, found)) >= 2]
    if not sets:
        return None
    best = max(sets, key=lambda found: (min(map(len, found)), -len(found)))
    return frozenset(s.lower() for s in best) if pattern.flags & re.IGNORECASE else best


def _folded(text: str) -> str:
    """What the literals are looked for in: lower case (casefold beyond ASCII, so a Kelvin
    sign still finds the 'k' that re.IGNORECASE would have matched)."""
    return text.lower() if text.isascii() else text.casefold()


def _gate(pattern: re.Pattern[str]) -> tuple[Literals | None, bool]:
    return required_literals(pattern), bool(pattern.flags & re.IGNORECASE)


def _present(gate: tuple[Literals | None, bool], text: str, folded: str) -> bool:
    literals, fold = gate
    if literals is None:
        return True
    haystack = folded if fold else text
    return any(literal in haystack for literal in literals)


def _redact_named(text: str) -> str:
    """NAME=value, NAME: value, "name": "value", --name value, where NAME is key-ish.

    Done as a scan, not one regular expression: a pattern like ``[\\w.-]*token[\\w.-]*=``
    backtracks quadratically on long runs of word characters (200 kB of output took
    minutes); here each name is looked at once and its value matched at a fixed position.
    """
    out: list[str] = []
    done = 0  # text[:done] is already in out
    for name in _candidate_names(text):
        if name.start() < done or not _KEYISH_RE.search(name.group()):
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
    literals = _KEYISH_GATE[0]
    if literals is None or not text.isascii():  # case folding could move positions
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
    """*text* with every token-like value replaced by ``[REDACTED]``."""
    if not text:
        return text
    folded = _folded(text)
    for (pattern, replacement), gate in zip(_RULES, _rule_gates(), strict=True):
        if _present(gate, text, folded):
            redacted = pattern.sub(replacement, text)
            if redacted != text:
                text, folded = redacted, _folded(redacted)
    if not _present(_KEYISH_GATE, text, folded):
        return text
    return _redact_named(text)


@lru_cache(maxsize=4096)
def _short(text: str) -> str:
    """Short strings (fact values, messages) repeat across hosts: redacted once each."""
    return redact_text(text)


def _rule_gates() -> list[tuple[Literals | None, bool]]:
    """One gate per rule, rebuilt when the rule list changed (rules are data: kept in
    ``_RULES``, appended to by whoever adds a secret shape)."""
    global _GATES_FOR
    key = tuple(id(pattern) for pattern, _ in _RULES)
    if _GATES_FOR[0] != key:
        _GATES_FOR = (key, [_gate(pattern) for pattern, _ in _RULES])
    return _GATES_FOR[1]


_GATES_FOR: tuple[tuple[int, ...], list[tuple[Literals | None, bool]]] = ((), [])
_NAME_CHAR = re.compile(r"[\w.-]")
_KEYISH_GATE = _gate(_KEYISH_RE)


@lru_cache(maxsize=4096)
def _keyish(key: str) -> bool:
    """Is *key* a name whose value is hidden whole? Fact and field names repeat for every
    host of a step: each is looked at once."""
    return _KEYISH_RE.search(key) is not None


def redact_data(value: Any) -> Any:
    """A JSON-able structure with secrets hidden: values under key-ish names, and token-like
    text anywhere in strings. Structure, keys and non-string values are kept."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(item, str) and item and isinstance(key, str) and _keyish(key):
                out[key] = MARK
            else:
                out[key] = redact_data(item)
        return out
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    if isinstance(value, str):
        return _short(value) if len(value) <= 256 else redact_text(value)
    return value


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
