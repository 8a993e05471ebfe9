"""Shared by the probe tests: build whole-script outputs out of sections, and judge them.

A probe's script prints each tool's output between ``=== diag:section NAME`` and
``=== diag:rc NAME RC`` marks (or a single ``=== diag:missing NAME`` when the tool is absent).
Tests assemble such outputs from the real samples in ``fixtures/real/`` and from hand-written
realistic tool outputs, or edit one section of a baseline in ``fixtures/scenarios/_baseline/``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from probes.base import MARK, Context, default_thresholds, split_sections
from probes.model import Finding

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "real"
BASELINE = ROOT / "fixtures" / "scenarios" / "_baseline"

# A section's content: text (rc 0), (text, rc), or None for "tool missing".
SectionSpec = str | tuple[str, int] | None


def real(name: str) -> str:
    """A real sample from fixtures/real/ (file name with or without the .txt suffix)."""
    path = REAL / name if name.endswith(".txt") else REAL / f"{name}.txt"
    return path.read_text(encoding="utf-8")


def baseline(probe: str) -> str:
    """The healthy baseline output of a probe (fixtures/scenarios/_baseline/<probe>.txt)."""
    return (BASELINE / f"{probe}.txt").read_text(encoding="utf-8")


def block(name: str, text: str, rc: int = 0) -> str:
    """One section as the script prints it."""
    body = text if not text or text.endswith("\n") else text + "\n"
    return f"{MARK}section {name}\n{body}{MARK}rc {name} {rc}\n"


def missing(name: str) -> str:
    """The mark a section prints when its tool is not installed."""
    return f"{MARK}missing {name}\n"


def output(sections: Mapping[str, SectionSpec]) -> str:
    """A whole script output, sections in the given order."""
    parts = []
    for name, spec in sections.items():
        if spec is None:
            parts.append(missing(name))
        elif isinstance(spec, tuple):
            parts.append(block(name, spec[0], spec[1]))
        else:
            parts.append(block(name, spec))
    return "".join(parts)


def sections_of(text: str) -> dict[str, SectionSpec]:
    """A script output back into {name: spec}, the inverse of ``output``."""
    specs: dict[str, SectionSpec] = {}
    for name, sec in split_sections(text).items():
        specs[name] = None if sec.missing else (sec.text, sec.rc if sec.rc is not None else 0)
    return specs


def section_text(text: str, name: str) -> str:
    """The text of one section of a script output."""
    return split_sections(text)[name].text


def replace(text: str, **changes: SectionSpec) -> str:
    """A copy of a script output with some sections replaced (None: the tool went missing)."""
    specs = sections_of(text)
    unknown = set(changes) - set(specs)
    if unknown:
        raise KeyError(f"no section(s) {sorted(unknown)} in this output")
    specs.update(changes)
    return output(specs)


def edit(text: str, name: str, old: str, new: str, count: int = 1) -> str:
    """A copy of a script output with ``old`` replaced by ``new`` inside one section.

    Fails loudly when ``old`` is not there, so a test never silently edits nothing.
    """
    specs = sections_of(text)
    spec = specs[name]
    if spec is None:
        raise KeyError(f"section {name} is a 'missing' mark")
    body, rc = spec if isinstance(spec, tuple) else (spec, 0)
    if old not in body:
        raise ValueError(f"{old!r} not found in section {name}")
    specs[name] = (body.replace(old, new, count), rc)
    return output(specs)


def context(thresholds: Mapping[str, Any] | None = None,
            attrs: Mapping[str, Mapping[str, Any]] | None = None,
            params: Mapping[str, Any] | None = None) -> Context:
    """A Context with the default thresholds, some of them overridden."""
    merged = dict(default_thresholds())
    merged.update(thresholds or {})
    return Context(merged, dict(attrs or {}), dict(params or {}))


def codes(findings: Iterable[Finding]) -> list[str]:
    """The sorted finding codes, duplicates kept."""
    return sorted(f.code for f in findings)


def by_code(findings: Iterable[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def sh_accepts(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``sh -n -c SCRIPT``: a syntax check that executes nothing."""
    return subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True, timeout=30)
