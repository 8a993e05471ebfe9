"""gitleaks' rule set turned into diag's secret rules: ``python -m assistant.store.gitleaks``.

diag's redactor used to be a hand list of token shapes; a leak report (issue 27) found eight
kinds of secret it did not know. gitleaks (github.com/gitleaks/gitleaks) maintains ~220 rules,
each with the literals every match contains (its ``keywords``: exactly the pre-filter the
redactor needs to stay fast), the capture group that is the secret, an entropy floor and
allowlists. This module converts its published ``config/gitleaks.toml`` into the ``gitleaks``
section of ``secret_rules.yaml``, keeping the file's own section (diag's rules) as it is::

    git show v8.30.1:config/gitleaks.toml > /tmp/gitleaks.toml
    .venv/bin/python -m assistant.store.gitleaks /tmp/gitleaks.toml v8.30.1 COMMIT

gitleaks is written in Go, whose RE2 syntax differs from Python's ``re`` in a few places that
change what a pattern means or make it fail to compile; ``translate`` rewrites them (see its
docstring). A rule that cannot be translated, or that applies only to files of a given name,
is left out and listed with the reason at the top of the generated section.
"""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from .secret_rules import RULES_FILE, Untranslatable

# POSIX classes as RE2 defines them (ASCII only), for use inside a Python character class.
_POSIX = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "ascii": r"\x00-\x7f", "blank": r" \t",
          "cntrl": r"\x00-\x1f\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z",
          "print": " -~", "punct": r"!-/:-@\[-`{-~", "space": r"\t\n\v\f\r ", "upper": "A-Z",
          "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f"}
# The lazy name prefix many gitleaks rules start with: it only widens the match back over the
# rest of the variable's name (for the report), and Python's backtracking engine tries it at
# every position of the text (RE2 does not backtrack): dropped, and the rule says how far back
# the match is widened when an allowlist reads it (``name_prefix``).
_NAME_PREFIX = r"[\w.-]{0,50}?"

# Rules left out by judgment, with the reason (the rest of the reasons are found by the code).
LEFT_OUT = {
    "pkcs12-file": "matches a file's name (*.p12, *.pfx), not text",
}
# Rules gitleaks applies only to files of a given name that diag keeps anyway (the text is the
# same when a tool prints it into a log), with the reason.
KEEP_DESPITE_PATH = {
    "kubernetes-secret-yaml": "`kubectl get secret -o yaml` prints the same text into a log",
}
# Rules whose extra capture groups are structure, not the secret: the whole match is hidden.
WHOLE_MATCH = {
    "microsoft-teams-webhook": "its groups are repeated UUID pieces; the whole URL is the secret",
    "jwt-base64": "its named groups say which header field the token starts with; the whole "
                  "token is the secret",
}


def translate(go: str) -> str:
    """A Go RE2 pattern as a Python ``re`` pattern of the same meaning (compiled with
    ``re.ASCII``, which gives ``\\w``, ``\\d``, ``\\s`` and ``\\b`` RE2's ASCII meaning).

    What differs: a flag group such as ``(?i)`` in the middle of a pattern sets the flag up to
    the end of the enclosing group in RE2 (across its ``|``) but is refused by Python 3.11, so
    it becomes a scoped ``(?i:...)`` closed at that group's end and reopened after each ``|``;
    ``\\z`` (end of text) is Python's ``\\Z``; ``$`` outside a class is the end of the text in
    RE2 but also matches before a final newline in Python, so it becomes ``\\Z``; POSIX classes
    (``[[:alnum:]]``) are spelled out; ``(?<name>`` is ``(?P<name>``; inside a class ``[`` and
    doubled ``-&~|`` are escaped (Python reserves them for set operations). What Python cannot
    express — Unicode classes ``\\p{..}``, ``\\Q..\\E``, ``\\C``, the ``U`` and ``m`` flags,
    ``x{,n}`` (a literal in RE2) — raises Untranslatable.
    """
    out: list[str] = []
    # Per open group: the flags of the scoped groups opened in it (closed at its end).
    scopes: list[list[str]] = [[]]
    i = 0
    while i < len(go):
        c = go[i]
        if c == "\\":
            nxt = go[i + 1:i + 2]
            if nxt in ("p", "P", "Q", "E", "C", ""):
                raise Untranslatable(f"\\{nxt} has no Python equivalent")
            if nxt == "x" and go[i + 2:i + 3] == "{":
                end = go.index("}", i)
                out.append(f"\\U{int(go[i + 3:end], 16):08x}")
                i = end + 1
                continue
            out.append("\\Z" if nxt == "z" else go[i:i + 2])
            i += 2
        elif c == "[":
            i = _char_class(go, i, out)
        elif c == "(":
            flags = re.match(r"\(\?([a-zA-Z-]+)\)", go[i:])
            if flags:
                _check_flags(flags.group(1))
                if i == 0:
                    out.append(flags.group(0))  # global flags at the start: Python's too
                else:
                    out.append(f"(?{flags.group(1)}:")
                    scopes[-1].append(flags.group(1))
                i += len(flags.group(0))
                continue
            opening = re.match(r"\((?:\?(?:P?<(\w+)>|([a-zA-Z-]*):|<?[=!]))?", go[i:])
            assert opening is not None  # the pattern matches a bare "(" at least
            if opening.group(1):
                out.append(f"(?P<{opening.group(1)}>")
            else:
                if opening.group(2):
                    _check_flags(opening.group(2))
                out.append(opening.group(0))
            scopes.append([])
            i += len(opening.group(0))
        elif c == ")":
            out.append(")" * len(scopes.pop()) + ")")
            i += 1
        elif c == "|":
            here = scopes[-1]
            out.append(")" * len(here) + "|" + "".join(f"(?{f}:" for f in here))
            i += 1
        elif c == "{" and re.match(r"\{,\d+\}", go[i:]):
            raise Untranslatable("x{,n} is a literal in RE2 and a repetition in Python")
        else:
            out.append("\\Z" if c == "$" else c)
            i += 1
    out.append(")" * len(scopes[0]))
    return "".join(out)


def _check_flags(flags: str) -> None:
    for flag in flags.replace("-", ""):
        if flag not in "is":
            raise Untranslatable(f"the ({flag}) flag is not translated")


def _char_class(go: str, i: int, out: list[str]) -> int:
    """Copy the class starting at go[i] into *out*; returns the index after it."""
    body: list[str] = ["["]
    i += 1
    if go[i:i + 1] == "^":
        body.append("^")
        i += 1
    first = True
    while i < len(go):
        c = go[i]
        if c == "]" and not first:
            out.append("".join(body) + "]")
            return i + 1
        first = False
        if c == "\\":
            if go[i + 1:i + 2] in ("p", "P"):
                raise Untranslatable("Unicode classes have no Python equivalent")
            body.append(go[i:i + 2])
            i += 2
            continue
        posix = re.match(r"\[:(\^?)(\w+):\]", go[i:])
        if posix:
            if posix.group(1) or posix.group(2) not in _POSIX:
                raise Untranslatable(f"POSIX class {posix.group(0)}")
            body.append(_POSIX[posix.group(2)])
            i += len(posix.group(0))
            continue
        if c == "[" or (c in "-&~|" and body[-1] == c) or (c in "&~|"):
            body.append("\\" + c)
        else:
            body.append(c)
        i += 1
    raise Untranslatable("unterminated character class")


def strip_name_prefix(go: str) -> tuple[str, int]:
    """*go* without its leading lazy name prefix(es), and how many characters they spanned."""
    head, rest, span = "", go, 0
    if rest.startswith("(?i)"):
        head, rest = "(?i)", rest[4:]
    while True:
        if rest.startswith(_NAME_PREFIX):
            rest, span = rest[len(_NAME_PREFIX):], span + 50
        elif rest.startswith("(?i:" + _NAME_PREFIX):
            rest, span = "(?i:" + rest[4 + len(_NAME_PREFIX):], span + 50
        else:
            return head + rest, span


def compile_python(pattern: str) -> re.Pattern[str]:
    """Compile as the redactor does; a warning (a nested set, a bad escape) is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return re.compile(pattern, re.ASCII)
        except (re.error, FutureWarning, DeprecationWarning) as exc:
            raise Untranslatable(f"Python's re refuses it: {exc}") from None


def convert_rule(rule: dict[str, Any], version: str) -> dict[str, Any]:
    """One gitleaks rule as a secret_rules.yaml entry; Untranslatable says why it cannot be."""
    ident = rule["id"]
    if ident in LEFT_OUT:
        raise Untranslatable(LEFT_OUT[ident])
    if "regex" not in rule:
        raise Untranslatable("no pattern (it matches file names only)")
    if "path" in rule and ident not in KEEP_DESPITE_PATH:
        raise Untranslatable(f"gitleaks applies it only to files named {rule['path']}; "
                             "out of them its pattern is too loose")
    go, span = strip_name_prefix(rule["regex"])
    python = translate(go)
    compiled = compile_python(python)
    entry: dict[str, Any] = {"id": ident, "source": f"gitleaks {version} {ident}",
                             "regex": python, "keywords": sorted({k.lower() for k in
                                                                  rule.get("keywords", [])})}
    if rule.get("secretGroup"):
        entry["group"] = int(rule["secretGroup"])
    elif ident in WHOLE_MATCH or compiled.groups == 0:
        entry["group"] = 0
    elif compiled.groups == 1:
        entry["group"] = 1
    else:
        entry["group"] = "first"  # gitleaks: the first group that matched something
    if rule.get("entropy"):
        entry["entropy"] = float(rule["entropy"])
    if span:
        entry["name_prefix"] = span
    allow = [converted for a in rule.get("allowlists", [])
             if (converted := convert_allowlist(a)) is not None]
    if allow:
        entry["allow"] = allow
    for regex in (r for a in allow for r in a.get("regexes", [])):
        compile_python(regex)
    notes = [KEEP_DESPITE_PATH[ident]] if ident in KEEP_DESPITE_PATH else []
    notes += [WHOLE_MATCH[ident]] if ident in WHOLE_MATCH else []
    if notes:
        entry["note"] = "; ".join(notes)
    return entry


def convert_allowlist(allow: dict[str, Any]) -> dict[str, Any] | None:
    """A rule's allowlist as the redactor applies it, or None when it cannot apply to text
    that has no file name or commit (its paths or commits are required, or all it has)."""
    needs_place = allow.get("condition", "OR").upper() == "AND" and (
        allow.get("paths") or allow.get("commits"))
    if needs_place or not (allow.get("regexes") or allow.get("stopwords")):
        return None
    out: dict[str, Any] = {"target": allow.get("regexTarget", "secret")}
    if allow.get("condition", "OR").upper() == "AND":
        out["all"] = True
    if allow.get("regexes"):
        out["regexes"] = [translate(r) for r in allow["regexes"]]
    if allow.get("stopwords"):
        out["stopwords"] = sorted({w.lower() for w in allow["stopwords"]})
    return out


def convert(config: dict[str, Any], version: str,
            commit: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The ``gitleaks`` section from a parsed gitleaks.toml, and the rules left out (id ->
    why). generic-api-key goes last: gitleaks lets any other rule's finding win over it."""
    rules, left_out = [], {}
    for rule in config["rules"]:
        try:
            rules.append(convert_rule(rule, version))
        except Untranslatable as exc:
            left_out[rule["id"]] = str(exc)
    rules.sort(key=lambda r: "generic" in r["id"])
    glob = config.get("allowlist") or {}
    section = {"version": version, "commit": commit,
               "file": "https://github.com/gitleaks/gitleaks/blob/"
                       f"{commit}/config/gitleaks.toml",
               "left_out": left_out,
               "allow": {"regexes": [translate(r) for r in glob.get("regexes", [])],
                         "stopwords": sorted({w.lower() for w in glob.get("stopwords", [])})},
               "rules": rules}
    return section, left_out


# The block of diag's own rules: hand-written, kept as it is when the file is generated again.
DIAG_BEGIN = "# >>> diag's own rules"
DIAG_END = "# <<< diag's own rules"
HEADER = """\
# Secret rules: what the redactor (assistant/store/redact.py) hides before anything is written
# to the store, a journal, a bundle or an export. Generated by `python -m
# assistant.store.gitleaks` (docs/store.md, "Secrets": how to update) from gitleaks {version}'s
# config/gitleaks.toml (commit {commit}) around diag's own rules (the block
# between the >>> and <<< lines, edited by hand and kept as it is by the generator).
#
# A rule: regex (Python re, compiled with re.ASCII; gitleaks' Go RE2 translated), keywords (the
# rule runs only when the lower-cased text holds one), group (the capture group that is the
# secret: 0 the whole match, 'first' the first group that matched), entropy (a secret at or
# below this many bits per character is let through), name_prefix (gitleaks' match began up to
# this many name characters earlier: allowlists on the match see them), allow (allowlists:
# target secret|match|line, regexes, stopwords, all: every kind must hold), replace (what the
# whole match becomes, instead of hiding the group), source.
#
# gitleaks rules left out ({left}), and why:
{left_out}
"""


def _q(text: str) -> str:
    """A YAML single-quoted scalar (backslashes stay as they are)."""
    if any(not (c.isprintable() and c.isascii()) for c in text):
        raise Untranslatable(f"non-printable text in {text!r}")
    return "'" + text.replace("'", "''") + "'"


def _flow(items: list[str], indent: int) -> list[str]:
    """A flow list of quoted strings, wrapped under 100 columns."""
    lines, line = [], "["
    for n, item in enumerate(items):
        piece = _q(item) + (", " if n < len(items) - 1 else "]")
        if len(line) + len(piece) > 100 - indent and line != "[":
            lines.append(line.rstrip())
            line = " "
        line += piece
    lines.append(line if items else "[]")
    return lines


def _emit(key: str, value: Any, indent: int, first: bool = False) -> list[str]:
    pad = " " * indent
    lead = pad[:-2] + "- " if first else pad
    if isinstance(value, list) and value and isinstance(value[0], dict):
        out = [f"{lead}{key}:"]
        for item in value:
            for n, (k, v) in enumerate(item.items()):
                out += _emit(k, v, indent + 4, first=n == 0)
        return out
    if isinstance(value, list):
        flow = _flow(value, indent + len(key) + 2)
        return [f"{lead}{key}: {flow[0]}"] + [" " * (indent + len(key) + 2) + f
                                             for f in flow[1:]]
    if isinstance(value, dict):
        out = [f"{lead}{key}:"]
        for k, v in value.items():
            out += _emit(k, v, indent + 2)
        return out
    text = value if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else _q(str(value))
    return [f"{lead}{key}: {text}"]


def render(section: dict[str, Any], diag_block: str) -> str:
    """The whole rule file: the header, gitleaks' metadata and allowlist, diag's block as it
    was, then gitleaks' rules."""
    left = section["left_out"]
    out = [HEADER.format(version=section["version"], commit=section["commit"],
                         left=len(left), left_out="\n".join(
                             f"#   {k}: {v}" for k, v in left.items()) or "#   none").rstrip()]
    out += _emit("gitleaks", {k: section[k] for k in ("version", "commit", "file")}, 0)
    out += _emit("left_out", left, 0) if left else ["left_out: {}"]
    out.append("# gitleaks' global allowlist: a value it matches is not a secret (a variable")
    out.append("# reference, a path, true/false/null). Applied to one-line secrets of every rule.")
    out += _emit("allow", section["allow"], 0)
    out.append(diag_block.rstrip("\n"))
    out.append(f"  # gitleaks {section['version']}: generated, do not edit by hand")
    for rule in section["rules"]:
        for n, (k, v) in enumerate(rule.items()):
            out += _emit(k, v, 4, first=n == 0)
    return "\n".join(out) + "\n"


def diag_block(path: Path) -> str:
    """The hand-written block of the rule file at *path* (markers included)."""
    text = path.read_text(encoding="utf-8")
    begin, end = text.index(DIAG_BEGIN), text.index(DIAG_END)
    return text[begin:text.index("\n", end) + 1]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m assistant.store.gitleaks GITLEAKS.TOML VERSION COMMIT",
              file=sys.stderr)
        return 2
    toml_path, version, commit = argv
    tomllib = importlib.import_module("tomllib")  # Python 3.11+: only the maintainer runs this
    config = tomllib.loads(Path(toml_path).read_text(encoding="utf-8"))
    section, left_out = convert(config, version, commit)
    RULES_FILE.write_text(render(section, diag_block(RULES_FILE)), encoding="utf-8")
    print(f"{RULES_FILE}: {len(section['rules'])} gitleaks rules, {len(left_out)} left out",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
