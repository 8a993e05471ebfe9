"""Acceptance criteria (probes/acceptance.yaml): every pass/fail value with its source, per GPU
model or fabric, and a site's overrides.

Kept as data with the source next to each value so the acceptance report can say *why* a
figure failed ("460 GB/s: Azure azurehpc-health-checks nd96isr_h100_v5.conf"), and so a site
can replace a value without touching code; an override must bring its own source.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from assistant import yamlfile
from probes import shipped

CRITERIA_FILE = Path(__file__).with_name("acceptance.yaml")
# A counter name as the kernel's sysfs and diag's own counters spell them (symbol_error,
# rx_icrc_encapsulated, xid_events): names are written into the scripts that read the counters
# on every node, so anything else is refused here, before a script is built.
COUNTER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class CriteriaError(ValueError):
    """A criteria file that cannot be used: one line naming the file, line and key."""


@dataclass(frozen=True)
class Criterion:
    value: Any
    source: str


@dataclass(frozen=True)
class Criteria:
    models: dict[str, tuple[str, ...]]
    levels: dict[str, dict[str, Any]]  # test -> key -> Criterion | {model/fabric: Criterion}

    def model_of(self, gpu_name: str | None) -> str | None:
        """The model key whose pattern occurs in *gpu_name* (longest pattern first)."""
        if not gpu_name:
            return None
        name = gpu_name.upper()
        patterns = sorted(((p.upper(), key) for key, ps in self.models.items() for p in ps),
                          key=lambda pk: len(pk[0]), reverse=True)
        return next((key for pattern, key in patterns if pattern in name), None)

    def get(self, test: str, key: str) -> Criterion:
        """A single-valued criterion (KeyError: a bug, the file is validated on load)."""
        value = self.levels[test][key]
        assert isinstance(value, Criterion), f"{test}.{key} is per model or fabric"
        return value

    def per(self, test: str, key: str, which: Any) -> Criterion | None:
        """The criterion for a model or fabric (None: this site has no value for it)."""
        table = self.levels[test][key]
        assert isinstance(table, dict), f"{test}.{key} is a single value"
        return table.get(str(which)) if which is not None else None

    def keys(self, test: str, key: str) -> list[str]:
        table = self.levels[test][key]
        return list(table) if isinstance(table, dict) else []


def _criterion(raw: Any, where: str, item: Callable[[int], str] | None = None) -> Criterion:
    """One ``{value, source}``; *item* words where the i-th name of a list is (its own line)."""
    if not isinstance(raw, Mapping) or set(raw) != {"value", "source"}:
        raise CriteriaError(f"{where}: expected {{value: ..., source: \"where it comes from\"}}")
    if not isinstance(raw["source"], str) or not raw["source"].strip():
        raise CriteriaError(f"{where}: 'source' must say where the value comes from")
    value = raw["value"]
    if isinstance(value, list):
        for i, name in enumerate(value):
            if not isinstance(name, str) or not COUNTER_NAME.fullmatch(name):
                raise CriteriaError(f"{item(i) if item else where}: {_shown(name)} is not a "
                                    "counter name (letters, digits and _, not starting with a "
                                    "digit)")
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise CriteriaError(f"{where}: 'value' must be a number (or a list of counter names)")
    elif not math.isfinite(value):
        # .nan compares false with everything and .inf passes or fails everything: either
        # switches the criterion off without saying so
        raise CriteriaError(f"{where}: 'value' is {value!r}: a criterion must be a finite number")
    return Criterion(value, raw["source"].strip())


def _shown(value: Any) -> str:
    """*value* for an error line: its repr, cut short (the CLI makes it inert)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _like(raw: Any, default: Any, where: str) -> None:
    """*raw* (an override as written) must be of the kind its default is: one criterion or a
    table per model/fabric, a number where the probes read a number (``int(value)`` in a
    script), names where they read names."""
    single = isinstance(raw, Mapping) and "value" in raw
    if isinstance(default, dict) == single:
        kind = "a table per model or fabric" if isinstance(default, dict) else "one criterion"
        raise CriteriaError(f"{where}: expected {kind}")
    want = next(iter(default.values())) if isinstance(default, dict) else default
    values = [raw["value"]] if single else [v.get("value") for v in raw.values()
                                            if isinstance(v, Mapping)]
    for value in values:
        if isinstance(want.value, list) and not isinstance(value, list):
            raise CriteriaError(f"{where}: expected a list of counter names, like "
                                f"[{', '.join(want.value[:2])}]")
        if not isinstance(want.value, list) and (isinstance(value, bool)
                                                 or not isinstance(value, int | float)):
            raise CriteriaError(f"{where}: expected a number, like {want.value}")


def _entry(raw: Any, where: str, item: Callable[[int], str] | None = None) -> Any:
    """One key of a test: a criterion, or a table of them per model/fabric."""
    if isinstance(raw, Mapping) and "value" in raw:
        return _criterion(raw, where, item)
    if isinstance(raw, Mapping):
        return {str(k): _criterion(v, f"{where}.{k}") for k, v in raw.items()}
    raise CriteriaError(f"{where}: expected a criterion or a table of criteria")


def _parse(data: Any, path: Path) -> Criteria:
    if not isinstance(data, Mapping) or not isinstance(data.get("levels"), Mapping):
        raise CriteriaError(f"{path}: expected 'levels:' with one mapping per test")
    models = {str(k): tuple(str(p) for p in v) for k, v in (data.get("models") or {}).items()}
    levels = {str(test): {str(key): _entry(raw, f"{path}: {test}.{key}")
                          for key, raw in (keys or {}).items()}
              for test, keys in data["levels"].items()}
    return Criteria(models, levels)


@cache
def default_criteria() -> Criteria:
    return _parse(shipped.data(CRITERIA_FILE), CRITERIA_FILE)


def overrides_from_file(path: str | Path) -> dict[str, Any]:
    """A site's criteria file as plain data, checked against the defaults (unknown tests and
    keys refused, every value with its source); merged later by :func:`merged`."""
    path = Path(path)
    try:
        located = yamlfile.load_file(path)
    except yamlfile.YamlFileError as exc:
        raise CriteriaError(str(exc)) from None
    data = located.data or {}
    if not isinstance(data, Mapping) or set(data) - {"models", "levels"}:
        raise CriteriaError(f"{path}: expected 'models:' and/or 'levels:' at the top")
    base = default_criteria()
    _check_models(data.get("models"), located, path)
    levels = data.get("levels") or {}
    if not isinstance(levels, Mapping):
        raise CriteriaError(f"{path}:{located.mark(('levels',)).line}: 'levels' must be a "
                            "mapping of tests")
    for test, keys in levels.items():
        at = f"{path}:{located.mark(('levels', test)).line}"
        if test not in base.levels:
            raise CriteriaError(f"{at}: unknown test '{test}' (known: {', '.join(base.levels)})")
        if not isinstance(keys or {}, Mapping):
            raise CriteriaError(f"{at}: {test}: expected a mapping of its keys")
        for key, raw in (keys or {}).items():
            where = f"{path}:{located.mark(('levels', test, key)).line}: {test}.{key}"
            if key not in base.levels[test]:
                raise CriteriaError(f"{where}: unknown key (known: "
                                    f"{', '.join(base.levels[test])})")
            _like(raw, base.levels[test][key], where)
            _entry(raw, where, _item_where(located, path, test, key))
    return dict(data)


def _item_where(located: Any, path: Path, test: str, key: str) -> Callable[[int], str]:
    """Where the i-th name of ``levels.TEST.KEY.value`` is: its own line, for the error."""
    return lambda i: (f"{path}:{located.mark(('levels', test, key, 'value', i)).line}: "
                      f"{test}.{key}")


def _check_models(models: Any, located: Any, path: Path) -> None:
    """``models:``: each model key with a list of name patterns (matched here, never run)."""
    if models is None:
        return
    if not isinstance(models, Mapping):
        raise CriteriaError(f"{path}:{located.mark(('models',)).line}: 'models' must map a "
                            "model to the patterns of its GPU names, like H100: [H100, H800]")
    for model, patterns in models.items():
        if not isinstance(patterns, list) or not all(isinstance(p, str) and p.strip()
                                                     for p in patterns):
            raise CriteriaError(f"{path}:{located.mark(('models', model)).line}: models.{model}:"
                                " expected a list of GPU name patterns, like [H100, H800]")


def merged(overrides: Mapping[str, Any] | None) -> Criteria:
    """The defaults with a site's overrides (from :func:`overrides_from_file`) laid over them:
    a per-model table is merged model by model, a single criterion replaced."""
    base = default_criteria()
    if not overrides:
        return base
    models = dict(base.models)
    models.update({str(k): tuple(str(p) for p in v)
                   for k, v in (overrides.get("models") or {}).items()})
    levels = {test: dict(keys) for test, keys in base.levels.items()}
    for test, keys in (overrides.get("levels") or {}).items():
        for key, raw in (keys or {}).items():
            entry = _entry(raw, f"{test}.{key}")
            if isinstance(entry, dict):
                levels[test][key] = {**levels[test][key], **entry}
            else:
                levels[test][key] = entry
    return Criteria(models, levels)
