"""The probe catalog (catalog.yaml): which probes exist, their facts and finding codes.

Kept as data so the runbook validator, the docs and the probes themselves agree on one list.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from assistant import yamlfile
from probes import shipped

CATALOG_FILE = Path(__file__).with_name("catalog.yaml")


@dataclass(frozen=True)
class CodeInfo:
    code: str
    probe: str  # "common" for codes the engine raises for any probe
    severity: str
    summary: str


@dataclass(frozen=True)
class Hang:
    """A section of a probe's script that never returned, and what that says about the host."""

    code: str  # the finding raised on the host (one of the probe's codes)
    what: str  # the command that hung, as the operator knows it ("nvidia-smi")


@dataclass(frozen=True)
class ProbeInfo:
    name: str
    summary: str
    facts: dict[str, str]
    codes: tuple[str, ...]
    hangs: dict[str, Hang] = field(default_factory=dict)  # section -> what its hang means
    active: bool = False  # loads the node: runs only after a confirmation (probes/active.py)
    # Part of the evidence sweep every walk starts with (probes/sweep.py): cheap, passive.
    sweep: bool = False
    # Sections whose lines are log lines of a stream the fault catalogue reads (kernel, job).
    logs: dict[str, str] = field(default_factory=dict)
    # ``sweep: first``: runs alone before the other components start, because it measures the
    # host's load (CPU busy, run queue), which diag's own concurrent components would add to.
    sweep_first: bool = False
    # ``sweep: job``: a client-side probe read once by the sweep of a Slurm job's walk (the
    # scheduler's view of the job's nodes); only its host-level signatures count there.
    sweep_job: bool = False
    # Host-level codes such a reading leaves out of the sweep (an operator's drain in their own
    # words says nothing against a job's node; queue-idle still reports it).
    sweep_leaves_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class Catalog:
    probes: dict[str, ProbeInfo]
    codes: dict[str, CodeInfo]
    categories: dict[str, tuple[str, ...]] = field(default_factory=dict)
    category_summaries: dict[str, str] = field(default_factory=dict)

    def category(self, *names: str) -> tuple[str, ...]:
        """The codes of the named categories (KeyError for a category the catalog lacks)."""
        return tuple(code for name in names for code in self.categories[name])

    def match_codes(self, pattern: str) -> list[str]:
        """Known codes matching *pattern* (a code, or a glob such as ``xid-*``)."""
        if pattern in self.codes:  # a plain code (no glob character can be in one)
            return [pattern]
        if pattern == "@standing":  # every standing fault of the fault catalogue
            from probes.faults import load_faults

            return sorted(load_faults().standing_codes())
        return [code for code in self.codes if fnmatch.fnmatchcase(code, pattern)]

    def has_fact(self, path: str) -> bool:
        probe, _, key = path.partition(".")
        info = self.probes.get(probe)
        return info is not None and key.split(".")[0] in info.facts


@cache
def load_catalog(path: Path = CATALOG_FILE) -> Catalog:
    raw = shipped.data(path) if path == CATALOG_FILE else yamlfile.load_file(path).data
    probes: dict[str, ProbeInfo] = {}
    codes: dict[str, CodeInfo] = {}
    for name, spec in raw["probes"].items():
        findings = spec.get("findings") or {}
        hangs = {section: Hang(info["code"], info["what"])
                 for section, info in (spec.get("hangs") or {}).items()}
        probes[name] = ProbeInfo(name, spec["summary"], dict(spec.get("facts") or {}),
                                 tuple(findings), hangs, bool(spec.get("active", False)),
                                 spec.get("sweep") in (True, "first"),
                                 dict(spec.get("logs") or {}), spec.get("sweep") == "first",
                                 spec.get("sweep") == "job",
                                 tuple(spec.get("sweep_leaves_out") or ()))
        for code, info in findings.items():
            codes[code] = CodeInfo(code, name, info["severity"], info["summary"])
    for code, info in raw.get("common", {}).get("findings", {}).items():
        codes[code] = CodeInfo(code, "common", info["severity"], info["summary"])
    _add_fault_codes(path, probes, codes)
    for probe in probes.values():
        unknown = sorted(set(probe.sweep_leaves_out) - set(codes))
        if unknown:
            raise ValueError(f"{path}: probe '{probe.name}': sweep_leaves_out names unknown "
                             f"code(s) {unknown}")
        unknown = sorted({h.code for h in probe.hangs.values()} - set(codes))
        if unknown:
            raise ValueError(f"{path}: probe '{probe.name}': hangs name unknown code(s) "
                             f"{unknown}")
    categories: dict[str, tuple[str, ...]] = {}
    summaries: dict[str, str] = {}
    for name, spec in (raw.get("categories") or {}).items():
        unknown = [c for c in spec["codes"] if c not in codes]
        if unknown:
            raise ValueError(f"{path}: category '{name}' names unknown code(s) {unknown}")
        categories[name] = tuple(spec["codes"])
        summaries[name] = spec["summary"]
    return Catalog(probes, codes, categories, summaries)


def _add_fault_codes(path: Path, probes: dict[str, ProbeInfo],
                     codes: dict[str, CodeInfo]) -> None:
    """The fault catalogue's signatures are finding codes too (probes/faults/): a runbook may
    branch on them, and the probe whose facts they read lists them. A ``raised_by: check``
    entry describes a code this file already has."""
    from probes.faults import load_faults

    for sig in load_faults().signatures.values():
        where = f"{sig.file}: signature '{sig.id}'"
        if sig.raised_by == "check":
            if sig.id not in codes:
                raise ValueError(f"{where}: raised_by check, but {path.name} has no such code")
            continue
        if sig.id in codes:
            raise ValueError(f"{where}: the code is already in {path.name} (use raised_by: "
                             "check to describe it)")
        if sig.probe not in probes:
            raise ValueError(f"{where}: unknown probe '{sig.probe}'")
        codes[sig.id] = CodeInfo(sig.id, sig.probe, sig.severity, sig.summary)
        info = probes[sig.probe]
        probes[sig.probe] = ProbeInfo(info.name, info.summary, info.facts,
                                      (*info.codes, sig.id), info.hangs, info.active,
                                      info.sweep, info.logs, info.sweep_first, info.sweep_job,
                                      info.sweep_leaves_out)


def sweep_components(catalog: Catalog) -> list[str]:
    """The probes of the evidence sweep, in the catalog's order."""
    return [name for name, info in catalog.probes.items() if info.sweep]


def job_sweep_components(catalog: Catalog) -> list[str]:
    """The client-side probes the sweep of a Slurm job's walk reads once (``sweep: job``)."""
    return [name for name, info in catalog.probes.items() if info.sweep_job]


def to_markdown(catalog: Catalog) -> str:
    """docs/probe-catalog.md, generated so the page can never drift from the data."""
    lines = ["# Probe catalog", "",
             "Generated from `probes/catalog.yaml` (`python -m probes.catalog > "
             "docs/probe-catalog.md`); a test keeps the two equal. Runbooks may name only these "
             "probes, facts (`PROBE.KEY`) and finding codes.", ""]
    for probe in catalog.probes.values():
        lines += [f"## {probe.name}", "", probe.summary, ""]
        if probe.active:
            lines += ["**Active**: loads the node; runs only after a confirmation, on an idle "
                      "node, bounded in time (docs/acceptance.md).", ""]
        if probe.facts:
            lines.append("Facts: " + ", ".join(f"`{k}` ({t})" for k, t in probe.facts.items()))
            lines.append("")
        lines += ["| code | severity | meaning |", "|---|---|---|"]
        lines += [f"| `{c}` | {catalog.codes[c].severity} | {catalog.codes[c].summary} |"
                  for c in probe.codes]
        lines.append("")
        if probe.hangs:
            lines.append("A host that lets diag in and then hangs in a section raises: "
                         + ", ".join(f"`{section}` ({hang.what}) -> `{hang.code}`"
                                     for section, hang in probe.hangs.items()) + ".")
            lines.append("")
    common = [c for c in catalog.codes.values() if c.probe == "common"]
    lines += ["## Raised for any probe", "", "| code | severity | meaning |", "|---|---|---|"]
    lines += [f"| `{c.code}` | {c.severity} | {c.summary} |" for c in common]
    lines += ["", "## Categories", "",
              "Codes that the checks and the history treat alike.", "",
              "| category | codes | meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {', '.join(f'`{c}`' for c in codes)} | "
              f"{catalog.category_summaries[name]} |"
              for name, codes in catalog.categories.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(to_markdown(load_catalog()), end="")
