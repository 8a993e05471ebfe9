"""The probe catalog (catalog.yaml): which probes exist, their facts and finding codes.

Kept as data so the runbook validator, the docs and the probes themselves agree on one list.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

CATALOG_FILE = Path(__file__).with_name("catalog.yaml")
SEVERITIES = ("info", "warning", "error", "critical")


@dataclass(frozen=True)
class CodeInfo:
    code: str
    probe: str  # "common" for codes the engine raises for any probe
    severity: str
    summary: str


@dataclass(frozen=True)
class ProbeInfo:
    name: str
    summary: str
    facts: dict[str, str]
    codes: tuple[str, ...]


@dataclass(frozen=True)
class Catalog:
    probes: dict[str, ProbeInfo]
    codes: dict[str, CodeInfo]

    def match_codes(self, pattern: str) -> list[str]:
        """Known codes matching *pattern* (a code, or a glob such as ``xid-*``)."""
        return [code for code in self.codes if fnmatch.fnmatchcase(code, pattern)]

    def has_fact(self, path: str) -> bool:
        probe, _, key = path.partition(".")
        info = self.probes.get(probe)
        return info is not None and key.split(".")[0] in info.facts


@cache
def load_catalog(path: Path = CATALOG_FILE) -> Catalog:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    probes: dict[str, ProbeInfo] = {}
    codes: dict[str, CodeInfo] = {}
    for name, spec in raw["probes"].items():
        findings = spec.get("findings") or {}
        probes[name] = ProbeInfo(name, spec["summary"], dict(spec.get("facts") or {}),
                                 tuple(findings))
        for code, info in findings.items():
            codes[code] = CodeInfo(code, name, info["severity"], info["summary"])
    for code, info in raw.get("common", {}).get("findings", {}).items():
        codes[code] = CodeInfo(code, "common", info["severity"], info["summary"])
    return Catalog(probes, codes)
