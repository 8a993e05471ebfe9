"""What every probe is made of, and the pieces they share.

A probe is a module in ``probes/`` exposing a ``PROBE: Probe``:
- ``command(params)``: ONE read-only shell script per host (one SSH round trip), made of named
  sections so each tool's output can be told apart and a missing tool is visible;
- ``parse(text)``: a pure function from that script's output to facts (ParseError if garbled);
- ``check(host, facts, ctx)``: findings about one host;
- ``check_fleet(facts_by_host, ctx)``: findings across hosts (drift, outliers, grouping).
"""

from __future__ import annotations

import importlib
import math
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from assistant import yamlfile
from probes import fleetstats, shipped
from probes.catalog import load_catalog
from probes.model import Finding
from probes.parsers import ParseError

# The fleet statistics (probes.fleetstats), where the probes' fleet checks have imported them.
Minority = fleetstats.Minority
fleet_minority, mad_outliers = fleetstats.fleet_minority, fleetstats.mad_outliers
majority_groups = fleetstats.majority_groups

# Probe modules by probe name; a probe is importable only when it is listed here.
REGISTRY = {
    "versions": "probes.versions",
    "gpu": "probes.gpu",
    "topology": "probes.topology",
    "network": "probes.network",
    "placement": "probes.placement",
    "nccl": "probes.nccl",
    "connectivity": "probes.connectivity",
    "peer-reach": "probes.peer_reach",
    "storage": "probes.storage",
    "host": "probes.host",
    "nccl-tests": "probes.nccl_tests",
    "joblog": "probes.joblog",
    "ranks": "probes.ranks",
    "stacks": "probes.stacks",
    "scheduler": "probes.scheduler",
    "pcie": "probes.pcie",
    "fitness": "probes.accept_fitness",
    "dcgm-diag": "probes.accept_dcgm",
    "gpu-burn": "probes.accept_burn",
    "nvbandwidth": "probes.accept_nvbw",
    "nccl-node": "probes.accept_nccl",
    "ib-loopback": "probes.accept_ib",
    "nccl-multinode": "probes.accept_multinode",
    "soak": "probes.soak",
    # components of the evidence sweep (probes/sweep.py) that no runbook step needs alone
    "services": "probes.services",
    "driver": "probes.driver",
    "nvlink": "probes.nvlink",
    "gpuhealth": "probes.gpuhealth",
    "rdma": "probes.rdma",
    "kernel": "probes.kernel",
    "procs": "probes.procs",
    "mounts": "probes.mounts",
    "logs": "probes.logs",
}

MARK = "=== diag:"
_SECTION = re.compile(r"^=== diag:(section|rc|missing) (\S+)(?: (-?\d+))?\s*$")


# --- sectioned scripts -----------------------------------------------------------------------

def script(sections: Sequence[tuple[str, str]], requires: Mapping[str, str] | None = None) -> str:
    """A POSIX shell script running each (name, command) and marking where its output starts.

    ``requires`` maps a section to the tool it needs: when ``command -v`` cannot find it the
    section prints a ``missing`` mark instead of running, so "tool absent" is never mistaken
    for "nothing to report".
    """
    requires = requires or {}
    lines = ["export LC_ALL=C"]
    for name, command in sections:
        body = f"echo '{MARK}section {name}'; {{ {command} ; }} 2>&1; echo \"{MARK}rc {name} $?\""
        tool = requires.get(name)
        if tool:
            body = (f"if command -v {shlex.quote(tool)} >/dev/null 2>&1; then {body}; "
                    f"else echo '{MARK}missing {name}'; fi")
        lines.append(body)
    return "\n".join(lines) + "\n"


@dataclass
class Section:
    text: str = ""
    rc: int | None = None
    missing: bool = False


def split_sections(text: str) -> dict[str, Section]:
    """The output of a ``script`` back into its sections; text outside any section is dropped."""
    sections: dict[str, Section] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        mark = _SECTION.match(line)
        if not mark:
            if current is not None:
                current.append(line)
            continue
        kind, name, rc = mark.groups()
        if kind == "section":
            current = []
            sections[name] = Section()
        elif kind == "rc" and name in sections:
            sections[name].text = "\n".join(current or []) + ("\n" if current else "")
            sections[name].rc = int(rc) if rc is not None else None
            current = None
        elif kind == "missing":
            sections[name] = Section(missing=True)
            current = None
    if not sections:
        raise ParseError("no diag sections in the output (not the output of this probe's script)")
    return sections


def running_section(text: str) -> str | None:
    """The section a cut-off script output was in: the last one started and never closed.

    A script that hung (a wedged nvidia-smi, a stat on a dead mount) prints the start mark of
    the section that hung and nothing after it, so this names what hung on the host. None when
    every started section closed (the hang was between sections) or none started.
    """
    current: str | None = None
    for line in text.splitlines():
        mark = _SECTION.match(line)
        if not mark:
            continue
        kind, name, _ = mark.groups()
        if kind == "section":
            current = name
        elif name == current:
            current = None
    return current


def failure_text(text: str, rc: int | None) -> str:
    """Why a section's command failed, in one line: its first words, else its exit status."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first[:200] or f"exit status {rc}"


def section_reader(sections: Mapping[str, Section], missing: list[str] | None = None, *,
                   absent_is_missing: bool = False, need_output: bool = False,
                   errors: dict[str, str] | None = None,
                   describe: Callable[[str, int | None], str] = failure_text,
                   ) -> Callable[[str], str | None]:
    """``read(name)``: the text of one section of *sections*, or None when there is none to read.

    A parser asks for many sections and must tell "tool absent" from "nothing to report", so
    the reasons for None are recorded as the probe's facts expect: a section whose tool is
    missing is added to *missing* (with *absent_is_missing*, so is a section the output lacks,
    for scripts that always print every section). A failed command (non-zero exit) gives None
    when *need_output* (as does an empty output) or when *errors* is given, which then holds
    ``describe(text, rc)`` under the section's name; otherwise its text is read as it is.
    """

    def read(name: str) -> str | None:
        sec = sections.get(name)
        if sec is None or sec.missing:
            if missing is not None and (sec is not None or absent_is_missing):
                missing.append(name)
            return None
        if need_output and (sec.rc != 0 or not sec.text.strip()):
            return None
        if errors is not None and sec.rc != 0:
            errors[name] = describe(sec.text, sec.rc)
            return None
        return sec.text

    return read


# --- probes ----------------------------------------------------------------------------------

@dataclass
class Context:
    """What checks may look at besides the facts: thresholds, inventory attributes, params."""

    thresholds: Mapping[str, Any] = field(default_factory=dict)
    attrs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # host -> attributes
    params: Mapping[str, Any] = field(default_factory=dict)

    def threshold(self, key: str) -> Any:
        return self.thresholds[key]


CommandFn = Callable[[Mapping[str, Any]], str | None]
ParseFn = Callable[[str], dict[str, Any]]
CheckFn = Callable[[str, dict[str, Any], Context], list[Finding]]
FleetCheckFn = Callable[[dict[str, dict[str, Any]], Context], list[Finding]]
# host, facts, ctx -> figures: what an acceptance test measured and how each value was judged
# (probes.active.figure); the provider keeps them in the host's facts under "figures".
FiguresFn = Callable[[str, dict[str, Any], Context], list[dict[str, Any]]]


def _no_host_checks(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    return []


def _no_fleet_checks(facts: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    return []


@dataclass(frozen=True)
class Probe:
    name: str
    command: CommandFn  # None: the probe runs nothing on hosts (e.g. placement)
    parse: ParseFn
    check: CheckFn = _no_host_checks
    check_fleet: FleetCheckFn = _no_fleet_checks
    timeout_s: float = 30.0
    # Where the script runs. "node": on every host of the walk. "client": once, on the machine
    # diag runs on, for probes that read something cluster-wide such as the scheduler; the
    # fleet then gives the other hosts ``shared_output(reader)``, which names who holds the
    # facts (docs/slurm.md).
    runs_on: str = "node"
    shared_output: Callable[[str], str] | None = None
    # Probes whose facts this one's command needs, from earlier in the same runbook step (the
    # provider passes them as params["facts"] = {probe: {host: facts}}), and whether the
    # command differs per host (the provider then passes params["host"]). Both are for probes
    # that test something *between* hosts (peer-reach pings each peer's NCCL address).
    uses: tuple[str, ...] = ()
    per_host: bool = False
    # An active probe loads the node (a GPU burn, a bandwidth test): the provider runs it only
    # when the walk confirmed it, in its own process group under a host-side time limit of
    # ``timeout_s`` (killed on cancel), behind the idle guard of probes/active.py.
    active: bool = False
    figures: FiguresFn | None = None
    # An active probe's host-side time limit for its params (default: timeout_s).
    limit_s: Callable[[Mapping[str, Any]], float] | None = None
    # A sampler (the soak, ``diag watch``): the provider runs it round after round for the
    # params' duration_s every interval_s and hands the checks the summary of each host's
    # samples (list of sample dicts -> facts).
    summarize: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if self.runs_on not in ("node", "client"):
            raise ValueError(f"probe {self.name}: runs_on is 'node' or 'client', "
                             f"not {self.runs_on!r}")
        if self.runs_on == "client" and self.shared_output is None:
            raise ValueError(f"probe {self.name}: a client-side probe needs shared_output")


def guard_parse(name: str, parse: ParseFn) -> ParseFn:
    """*parse*, with any slip on odd input (a missing key, a bad int) turned into ParseError:
    a garbled host output marks that host parse-error and never takes the run down."""

    def guarded(text: str) -> dict[str, Any]:
        try:
            return parse(text)
        except ParseError:
            raise
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise ParseError(f"{name}: cannot read the output ({type(exc).__name__}: {exc})") \
                from exc

    guarded.__doc__ = parse.__doc__
    return guarded


def get_probe(name: str) -> Probe:
    """The probe named *name*; KeyError if it is unknown or not part of this build yet."""
    if name not in REGISTRY:
        raise KeyError(f"no probe '{name}' (known: {', '.join(REGISTRY)})")
    try:
        probe: Probe = importlib.import_module(REGISTRY[name]).PROBE
        return probe
    except ModuleNotFoundError as exc:
        if exc.name != REGISTRY[name]:
            raise
        raise KeyError(f"probe '{name}' is not available in this version") from None


def finding(code: str, hosts: Iterable[str], message: str, probe: str = "",
            severity: str | None = None, **evidence: Any) -> Finding:
    """A finding with the catalog's default severity for its code."""
    info = load_catalog().codes[code]  # KeyError: a code the catalog does not list is a bug
    return Finding(code=code, severity=severity or info.severity, hosts=tuple(sorted(hosts)),
                   message=message, probe=probe or info.probe, evidence=evidence)


def not_measured(probe: str, host: str, what: str, why: str) -> Finding:
    return finding("not-measured", [host], f"{what} not measured on {host}: {why}", probe,
                   what=what, why=why)


# --- thresholds ------------------------------------------------------------------------------

THRESHOLDS_FILE = Path(__file__).with_name("thresholds.yaml")


def leaves(value: Any) -> Iterator[Any]:
    """Every scalar inside *value*, as deep as it goes: a threshold's list or table (such as
    busbw_*_gb_s's {H100: {warn: 400, fail: 350}}), a finding's evidence."""
    if isinstance(value, dict):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    else:
        yield value


class ThresholdsError(ValueError):
    pass


@cache
def default_thresholds() -> dict[str, Any]:
    return dict(shipped.data(THRESHOLDS_FILE))


def load_thresholds(path: Path | None = None) -> dict[str, Any]:
    """Defaults, overridden key by key by the user's file (unknown keys are refused)."""
    merged = dict(default_thresholds())
    if path is None:
        return merged
    try:
        located = yamlfile.load_file(path)
    except yamlfile.YamlFileError as exc:
        raise ThresholdsError(str(exc)) from None
    user = located.data or {}
    if not isinstance(user, dict):
        raise ThresholdsError(f"{path}: expected a mapping of threshold names to values")
    for key, value in user.items():
        where = f"{path}:{located.mark((key,)).line}"
        if key not in merged:
            raise ThresholdsError(f"{where}: unknown threshold '{key}'"
                                  f"{yamlfile.did_you_mean(key, merged)}")
        if type(value) is not type(merged[key]) and not (
            isinstance(value, int | float) and isinstance(merged[key], int | float)
        ):
            raise ThresholdsError(f"{where}: '{key}' should be {type(merged[key]).__name__}")
        # YAML's .nan compares false with everything, so `value > .nan` never holds and the
        # check it configures would silently pass every host; .inf does the same one way.
        if any(isinstance(v, float) and not math.isfinite(v) for v in leaves(value)):
            raise ThresholdsError(f"{where}: '{key}' is {value!r}: a threshold must be a finite "
                                  "number (.nan or .inf would switch its check off)")
        merged[key] = value
    if path is not None and "xid_overrides" in user:
        from probes.xid import check_overrides  # the catalog is read only when a file sets it

        problems = check_overrides(merged["xid_overrides"])
        if problems:
            where = f"{path}:{located.mark(('xid_overrides',)).line}"
            raise ThresholdsError(f"{where}: {problems[0]}")
    return merged
