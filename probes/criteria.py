"""Acceptance criteria (probes/acceptance.yaml): every pass/fail value with its source, per GPU
model or fabric, and a site's overrides.

Kept as data with the source next to each value so the acceptance report can say *why* a
figure failed ("460 GB/s: Azure azurehpc-health-checks nd96isr_h100_v5.conf"), and so a site
can replace a value without touching code; an override must bring its own source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from assistant import yamlfile
from probes import shipped

CRITERIA_FILE = Path(__file__).with_name("acceptance.yaml")


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


def _criterion(raw: Any, where: str) -> Criterion:
    if not isinstance(raw, Mapping) or set(raw) != {"value", "source"}:
        raise CriteriaError(f"{where}: expected {{value: ..., source: \"where it comes from\"}}")
    if not isinstance(raw["source"], str) or not raw["source"].strip():
        raise CriteriaError(f"{where}: 'source' must say where the value comes from")
    value = raw["value"]
    if isinstance(value, bool) or not isinstance(value, int | float | list):
        raise CriteriaError(f"{where}: 'value' must be a number (or a list of counter names)")
    return Criterion(value, raw["source"].strip())


def _entry(raw: Any, where: str) -> Any:
    """One key of a test: a criterion, or a table of them per model/fabric."""
    if isinstance(raw, Mapping) and "value" in raw:
        return _criterion(raw, where)
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
    for test, keys in (data.get("levels") or {}).items():
        if test not in base.levels:
            raise CriteriaError(f"{path}:{located.mark(('levels', test)).line}: unknown test "
                                f"'{test}' (known: {', '.join(base.levels)})")
        for key, raw in (keys or {}).items():
            where = f"{path}:{located.mark(('levels', test, key)).line}: {test}.{key}"
            if key not in base.levels[test]:
                raise CriteriaError(f"{where}: unknown key (known: "
                                    f"{', '.join(base.levels[test])})")
            entry = _entry(raw, where)
            if isinstance(entry, dict) != isinstance(base.levels[test][key], dict):
                kind = "a table per model or fabric" if isinstance(base.levels[test][key],
                                                                    dict) else "one criterion"
                raise CriteriaError(f"{where}: expected {kind}")
    return dict(data)


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
