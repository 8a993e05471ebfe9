"""YAML for the tests' own data, through libyaml where PyYAML has it: the signature examples
alone are ~40,000 lines, and PyYAML's Python scanner and emitter cost seconds a worker (the
product's own loader, assistant/yamlfile.py, already parses with libyaml)."""

from __future__ import annotations

from typing import Any

import yaml

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str) -> Any:
    """yaml.safe_load(*text*). libyaml refuses a tab where PyYAML's scanner reads it as
    content (ibstat's tab-indented lines in a block scalar): such a text is read as
    PyYAML reads it."""
    try:
        return yaml.load(text, Loader=_LOADER)  # a safe loader: libyaml's SafeLoader
    except yaml.YAMLError:
        return yaml.safe_load(text)


def dump(data: Any, **options: Any) -> str:
    """yaml.safe_dump(*data*, **options) as text."""
    return str(yaml.dump(data, Dumper=_DUMPER, **options))
