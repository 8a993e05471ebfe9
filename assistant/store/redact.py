"""Secrets never reach the store: token-like values are replaced before anything is written.

Probe output is mostly counters and versions, but a node's output can carry what a job put in
its environment or its logs: an ``HF_TOKEN=...`` echoed by a launcher, a bearer token in a
``curl -v`` line, a private key cat'ed into a log. The store keeps history for a year and is
exported and pooled with other people's, so redaction happens on the way in, not on display.

Redaction errs on the side of hiding: ``max_tokens=4096`` loses its number, which costs nothing
for a diagnosis; a leaked key costs a rotation. Values are replaced by ``[REDACTED]`` and the
name in front of them is kept, so a reader still sees *that* a token was there.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

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


# Each rule above can only match where its literal is: (literals, case-insensitive), in
# _RULES' order. A rule whose literals are all absent is skipped; its regular expression would
# scan the whole text for nothing (most of a probe's output is counters and names).
_TRIGGERS: list[tuple[tuple[str, ...], bool]] = [
    (("PRIVATE KEY",), False), (("://",), False), (("hooks.slack",), False),
    (("discord",), False), (("mysql", "mariadb"), False), (("sshpass",), False),
    (("pass",), True), (("curl", "wget"), False), (("bearer", "basic", "token"), True),
    (("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"), False), (("gh",), False),
    (("github_pat_",), False), (("eyJ",), False), (("xox",), False), (("sk-",), False),
    (("hf_",), False), (("glpat-",), False), (("AIza",), False),
]
assert len(_TRIGGERS) == len(_RULES)


def _redact_named(text: str) -> str:
    """NAME=value, NAME: value, "name": "value", --name value, where NAME is key-ish.

    Done as a scan, not one regular expression: a pattern like ``[\\w.-]*token[\\w.-]*=``
    backtracks quadratically on long runs of word characters (200 kB of output took
    minutes); here each name is looked at once and its value matched at a fixed position.
    """
    out: list[str] = []
    done = 0  # text[:done] is already in out
    for name in _NAME.finditer(text):
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


# The walk's whole state is redacted again at every step (each write carries the steps so
# far), so the same short strings (findings' messages, facts, host names) come back tens of
# thousands of times in one walk: a 12-host walk spent ~6 s in 17 regular expressions each.
# Redaction is a pure function of the text: short texts are remembered (bounded memory:
# CACHED_CHARS x CACHE_SIZE at most); a host's long raw output is redacted once anyway.
CACHED_CHARS = 2048
CACHE_SIZE = 8192


def redact_text(text: str) -> str:
    """*text* with every token-like value replaced by ``[REDACTED]``."""
    if not text:
        return text
    if len(text) <= CACHED_CHARS:
        return _redact_short(text)
    return _redact(text)


def _redact(text: str) -> str:
    lower = text.lower()
    for (pattern, replacement), (literals, folded) in zip(_RULES, _TRIGGERS, strict=True):
        if any(literal in (lower if folded else text) for literal in literals):
            text = pattern.sub(replacement, text)
            lower = text.lower()
    # a key-ish name anywhere, or no NAME=value to look at (one scan instead of one a name)
    return _redact_named(text) if _KEYISH_RE.search(text) else text


_redact_short = functools.lru_cache(maxsize=CACHE_SIZE)(_redact)


def redact_data(value: Any) -> Any:
    """A JSON-able structure with secrets hidden: values under key-ish names, and token-like
    text anywhere in strings. Structure, keys and non-string values are kept."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(key, str) and _KEYISH_RE.search(key) and isinstance(item, str) \
                    and item:
                out[key] = MARK
            else:
                out[key] = redact_data(item)
        return out
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


RAW_LIMIT = 16 * 1024  # characters kept of one host's output for one probe


def bound_text(text: str, limit: int = RAW_LIMIT) -> str:
    """At most about *limit* characters: the head and the tail, which is where tools print
    their header and their verdict, with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters cut by diag ...]\n{text[-half:]}"
