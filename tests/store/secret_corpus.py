"""The secret corpus (``tests/data/secret_samples.yaml``): one made-up secret per rule of
``assistant/store/secret_rules.yaml``, in a line such as a job log or a shell trace shows it.

The samples are data, checked by ``test_secret_rules.py``; this module writes samples for the
rules that have none (a rule added, gitleaks' set updated) and keeps the others as they are::

    .venv/bin/python -m tests.store.secret_corpus

A sample is drawn from the rule's own pattern (a seeded walk of its parse tree: literals as
written, each class and repetition picked at random), placed in a line, and kept only when the
rule alone hides it and the whole redactor hides it too, with the line around it intact.
"""

from __future__ import annotations

import random
import string
import sys
from pathlib import Path
from typing import Any

import yaml

try:
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # Python 3.10
    import sre_parse  # type: ignore[no-redef]

from assistant.store.redact import redact_text
from assistant.store.secret_rules import MARK, Rule, rule_set

CORPUS = Path(__file__).resolve().parents[1] / "data" / "secret_samples.yaml"
# What stands before a sample: where such lines are seen (a launcher's log, a shell trace).
CONTEXTS = ["2024-05-02T03:14:07Z rank0 launcher: ", "+ ", "[job 4711] env: ",
            "Jun 02 03:14:07 gpu017 train.sh[2290117]: "]
_PRINTABLE = string.ascii_letters + string.digits + "-_./+="
_CATEGORY = {"CATEGORY_DIGIT": string.digits, "CATEGORY_WORD": string.ascii_letters + "_" +
             string.digits, "CATEGORY_SPACE": " ", "CATEGORY_NOT_SPACE": _PRINTABLE,
             "CATEGORY_NOT_WORD": "-./:", "CATEGORY_NOT_DIGIT": string.ascii_letters}


class _Draw:
    """One walk of a parse tree. Inside the secret's group repetitions take random counts
    (a secret of varied length and characters); outside it mostly their least (the name and
    separator as a person writes them, not padded with random filler)."""

    def __init__(self, rng: random.Random, secret: int | None) -> None:
        self.rng, self.secret = rng, secret
        self.groups: dict[int, str] = {}
        self.inside = secret == 0

    def seq(self, items: list[Any]) -> str:
        return "".join(self.one(op, arg) for op, arg in items)

    def one(self, op: Any, arg: Any) -> str:
        name, rng = str(op), self.rng
        if name == "LITERAL":
            return chr(arg)
        if name == "NOT_LITERAL":
            return rng.choice([c for c in _PRINTABLE if ord(c) != arg])
        if name == "ANY":  # an unescaped '.' in a rule is most often meant as a dot
            return "." if rng.random() < 0.7 else rng.choice(_PRINTABLE)
        if name == "IN":
            return rng.choice(_class(arg))
        if name == "BRANCH":
            return self.seq(list(rng.choice(arg[1])))
        if name == "SUBPATTERN":
            group, was = arg[0], self.inside
            if group is not None and (group == self.secret or self.secret is None):
                self.inside, self.secret = True, group
            text = self.seq(list(arg[-1]))
            self.inside = was
            if group is not None:
                self.groups[group] = text
            return text
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, inner = arg
            high = min(high, low + 24)
            count = rng.randint(low, max(low, high)) \
                if self.inside or rng.random() < 0.3 else low
            return "".join(self.seq(list(inner)) for _ in range(count))
        if name == "GROUPREF":
            return self.groups.get(arg, "")
        return ""  # AT, ASSERT, ASSERT_NOT: zero width (a draw that breaks one is retried)


def draw(rule: Rule, rng: random.Random) -> str:
    """A string the rule's pattern may match (the caller checks that it does)."""
    pattern = rule.pattern
    return _Draw(rng, rule.group).seq(list(sre_parse.parse(pattern.pattern, pattern.flags)))


def _class(items: list[Any]) -> str:
    chars: list[str] = []
    negate = False
    for op, arg in items:
        kind = str(op)
        if kind == "NEGATE":
            negate = True
        elif kind == "LITERAL":
            chars.append(chr(arg))
        elif kind == "RANGE":
            chars += [chr(c) for c in range(arg[0], arg[1] + 1) if chr(c).isprintable()
                      or chr(c) in "\n\t"]
        elif kind == "CATEGORY":
            chars += _CATEGORY.get(str(arg), "")
    if negate:
        return "".join(c for c in _PRINTABLE if c not in chars) or "x"
    usable = [c for c in chars if c.isprintable()]
    return "".join(usable or chars or ["x"])


def sample_for(rule: Rule, tries: int = 400) -> dict[str, str] | None:
    """A line holding a secret *rule* hides, or None when no draw made one."""
    rng = random.Random(rule.id)
    shared = rule_set().shared
    for _ in range(tries):
        drawn = draw(rule, rng)
        if rule.keywords and not any(k in drawn.lower() for k in rule.keywords):
            drawn = f"{rng.choice(sorted(rule.keywords))} {drawn}"  # gitleaks' gate: the line
        m = rule.pattern.search(drawn)
        if m is None or "\r" in drawn or "\x0b" in drawn or "\x0c" in drawn:
            continue
        start, end = rule._span(m)
        secret = drawn[start:end]
        if len(secret) < 6 or secret.strip() != secret or MARK in drawn:
            continue
        context = rng.choice(CONTEXTS)
        text = f"{context}{drawn}"
        alone = rule.hide(text, shared)
        if secret in alone or secret in redact_text(text) \
                or not redact_text(text).startswith(context.rstrip()):
            continue
        return {"rule": rule.id, "text": text, "secret": secret}
    return None


def main() -> int:
    known = yaml.safe_load(CORPUS.read_text()) if CORPUS.exists() else []
    have = {entry["rule"] for entry in known}
    missing = []
    for rule in rule_set().rules:
        if rule.id in have:
            continue
        made = sample_for(rule)
        if made is None:
            missing.append(rule.id)
        else:
            known.append(made)
    order = {rule.id: n for n, rule in enumerate(rule_set().rules)}
    known = sorted((e for e in known if e["rule"] in order), key=lambda e: order[e["rule"]])
    header = ("# One made-up secret per rule of assistant/store/secret_rules.yaml, in a line as a\n"
              "# log or a shell trace shows it (text), and what must not survive redaction\n"
              "# (secret). Drawn from each rule's pattern by tests/store/secret_corpus.py;\n"
              "# diag's own rules' samples are written by hand. None is a real credential.\n")
    CORPUS.write_text(header + yaml.safe_dump(known, sort_keys=False, width=4096,
                                              allow_unicode=False), encoding="utf-8")
    print(f"{CORPUS}: {len(known)} samples" + (f"; no sample drawn for {', '.join(missing)}"
                                               if missing else ""), file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
