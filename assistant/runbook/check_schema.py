"""Validation layer 2: the runbook against its JSON schema, with errors an author can act on.

The schema compiled to Python (fastjsonschema) answers "valid?" fast; jsonschema, the
reference, runs only when the answer is no, to word each error for the author (a misspelt key
is one mistake, not an unknown key plus a missing one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant.yamlfile import did_you_mean

from .issue import Report

if TYPE_CHECKING:
    import jsonschema

SCHEMA_FILE = Path(__file__).with_name("runbook.schema.json")


@cache
def runbook_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema


@cache
def _fast_schema_check() -> Callable[[Any], bool]:
    """True when *data* is valid by the runbook schema, from the schema compiled to Python
    (fastjsonschema): about ten times faster than jsonschema, which took 3 of every 4 seconds
    of a large runbook's validation. jsonschema stays the reference: it runs when this says
    no, and words the errors. (The schema is read as draft 7, the newest fastjsonschema
    knows; it uses nothing that differs from 2020-12 but ``$ref`` beside a ``description``,
    an annotation.)"""
    import fastjsonschema

    schema = {**runbook_schema(), "$schema": "http://json-schema.org/draft-07/schema#"}
    # Generated here, never kept in the start cache: a cached file that runs is one another
    # user could replace (about 30 ms, paid only by a start that validates something).
    code = fastjsonschema.compile_to_code(schema)
    namespace: dict[str, Any] = {}
    exec(compile(code, "<runbook schema>", "exec"), namespace)  # code generated from our schema
    # The root schema's function is the first the code defines (each $defs entry gets its own).
    root = re.search(r"^def (\w+)\(", code, re.MULTILINE)
    if root is None:
        raise RuntimeError("fastjsonschema generated no validator")
    validate = namespace[root.group(1)]

    def check(data: Any) -> bool:
        try:
            validate(data)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return check


def check(data: dict[str, Any], report: Report) -> None:
    if _fast_schema_check()(data):
        return
    import jsonschema  # the reference validator, for its detailed errors

    validator = jsonschema.Draft202012Validator(runbook_schema())
    seen: set[tuple[tuple[Any, ...], str]] = set()
    described = [item for error in validator.iter_errors(data) for item in _describe(error)]
    for path, message in _one_report_per_misspelling(described):
        if (path, message) in seen:
            continue
        seen.add((path, message))
        report.add("schema", path, message)


_UNKNOWN_KEY = re.compile(r"unknown key '([^']+)' \(allowed: ([^)]*)\)$")
_MISSING_KEY = re.compile(r"missing required key '([^']+)'$")


def _one_report_per_misspelling(
        described: list[tuple[tuple[Any, ...], str]]) -> list[tuple[tuple[Any, ...], str]]:
    """A misspelt key (``explian:``) is one mistake, not two: the schema reports the unknown
    key *and* the required key it was meant to be as missing. Keep one line naming the key,
    the likely intended one and the allowed ones, and drop the "missing" it explains."""
    missing: dict[tuple[Any, ...], set[str]] = {}
    for path, message in described:
        found = _MISSING_KEY.search(message)
        if found:
            missing.setdefault(path, set()).add(found.group(1))
    explained: set[tuple[tuple[Any, ...], str]] = set()
    out = []
    for path, message in described:
        found = _UNKNOWN_KEY.search(message)
        if found:
            name, allowed = found.groups()
            hint = did_you_mean(name, allowed.split(", "))
            intended = [k for k in missing.get(path[:-1], ()) if f"'{k}'" in hint]
            explained.update((path[:-1], k) for k in intended)
            message = f"unknown key '{name}' ({hint.strip(' ()') + ' ' if hint else ''}" \
                      f"allowed: {allowed})"
        out.append((path, message))
    return [(path, message) for path, message in out
            if not ((found := _MISSING_KEY.search(message))
                    and (path, found.group(1)) in explained)]


def _describe(error: jsonschema.ValidationError) -> list[tuple[tuple[Any, ...], str]]:
    """Plain-language messages for the schema errors an author actually makes."""
    path = tuple(error.absolute_path)
    where = _field_name(path)
    kind = error.validator
    if kind == "additionalProperties":
        names = re.findall(r"'([^']+)'", error.message.split("(")[-1])
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        return [((*path, name), f"unknown key '{name}' (allowed: {allowed})") for name in names]
    if kind == "required":
        missing = error.message.split("'")[1]
        message = f"{where}missing required key '{missing}'"
    elif kind == "type":
        message = (f"{where}expected {error.validator_value}, got "
                   f"{type(error.instance).__name__} {error.instance!r}")
    elif kind in ("enum", "const"):
        options = error.validator_value if kind == "enum" else [error.validator_value]
        message = f"{where}{error.instance!r} is not one of {', '.join(map(str, options))}"
    elif kind == "pattern":
        message = (f"{where}{error.instance!r} is not a valid id (lowercase letters, digits "
                   "and dashes)")
    elif kind == "propertyNames":
        return [((*path, error.instance), f"node id {error.instance!r} is not a valid id "
                 "(lowercase letters, digits and dashes)")]
    elif kind in ("minItems", "minProperties", "minLength"):
        message = f"{where}must not be empty"
    elif kind == "oneOf":
        message = f"{where}{error.instance!r} is not valid here"
    else:
        message = f"{where}{error.message}"
    return [(path, message)]


def _field_name(path: tuple[Any, ...]) -> str:
    if not path:
        return ""
    # e.g. nodes/check-xid/branches/0/goto -> "branches[0].goto: "
    tail = list(path[2:]) if len(path) > 1 and path[0] == "nodes" else list(path)
    if not tail:
        return ""
    text = ""
    for part in tail:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return f"{text}: "
