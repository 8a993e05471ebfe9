"""The fault catalogue's files read into signatures, and checked (docs/fault-format.md).

One YAML file per family under ``probes/faults/``. A signature is a finding code with what it
means (scope, action class, cause, published source, healthy twin) and how it is recognised:
a predicate over one probe's facts (``when``), a pattern over a log stream (``log``), or a
check already in code (``raised_by: check``). Everything is checked when the files are read,
so a broken entry is one clear line naming the file and the signature, never a wrong verdict.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

FAULTS_DIR = Path(__file__).parent
SCOPES = ("gpu", "link", "host", "job", "fabric")
# Scopes a standing fault can have: what is faulty belongs to one host.
HOST_SCOPES = ("gpu", "link", "host")
ACTIONS = ("none", "restart-app", "reset-gpu", "reboot", "reconfigure", "drain-rma",
           "call-fabric-team", "call-storage-team")
SEVERITIES = ("info", "warning", "error", "critical")
STREAMS = ("kernel", "job")
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_KEYS_REQUIRED = ("id", "probe", "scope", "severity", "action", "summary", "cause", "source",
                  "twin")
_KEYS_ALLOWED = {*_KEYS_REQUIRED, "fix", "when", "log", "raised_by", "on_most_hosts"}
# on_most_hosts: what a host-scope signature raised on most hosts of a walk is instead: the
# job's setting, or the shared storage's / fabric's trouble (every client evicted at once)
ON_MOST_HOSTS = ("job", "storage", "fabric")
# the action each reading may have: a job's setting is reconfigured; a shared system's trouble
# seen from every client is never a hardware action on each of them
_MOST_HOSTS_ACTIONS = {"job": ("reconfigure",),
                       "storage": ("none", "restart-app", "reconfigure", "call-storage-team"),
                       "fabric": ("none", "restart-app", "reconfigure", "call-fabric-team")}
_LOG_KEYS = {"streams", "pattern", "ignore", "min_count", "window_minutes", "unless",
             "resolved_by"}
# What a POSIX ERE (grep -E on the host) and Python's re read alike: no Perl classes, no
# groups with options, no lazy quantifiers, no POSIX bracket classes (Python reads them as
# literal characters).
_NOT_ERE = re.compile(r"\\[dDwWsSbBAZz]|\(\?|[*+?}]\?|\[:[a-z]+:\]")


class FaultCatalogueError(ValueError):
    """A catalogue file that cannot be used; the message names the file and the signature."""


@dataclass(frozen=True)
class LogRule:
    streams: tuple[str, ...]
    pattern: str
    ignore: str | None = None
    min_count: int = 1
    window_minutes: float | None = None  # None: the threshold fault_log_window_minutes
    # a predicate over the same host's facts (the probe that read the lines) under which the
    # lines are not this fault: the host was measured to be the healthy twin (e.g. no RDMA
    # device at all). A fact not measured does not hold, so the lines still count.
    unless: dict[str, Any] | None = None
    # an ERE for the line that says the fault is over ("nfs: server X OK"): a matching line
    # later in the log resolves the hits before it that name the same thing (the first group
    # of pattern and of resolved_by, when both have one), and those no longer count
    resolved_by: str | None = None

    @property
    def regex(self) -> re.Pattern[str]:
        return _compiled(self.pattern)

    @property
    def ignore_regex(self) -> re.Pattern[str] | None:
        return _compiled(self.ignore) if self.ignore else None

    @property
    def resolved_regex(self) -> re.Pattern[str] | None:
        return _compiled(self.resolved_by) if self.resolved_by else None

    @property
    def wanted(self) -> tuple[str, ...]:
        """The EREs of every line this rule reads: its pattern and its resolving line."""
        return (self.pattern,) + ((self.resolved_by,) if self.resolved_by else ())


@dataclass(frozen=True)
class Signature:
    id: str
    family: str
    probe: str
    scope: str
    severity: str
    action: str
    summary: str
    cause: str
    source: str
    twin: str
    fix: str = ""
    when: Mapping[str, Any] | None = None
    log: LogRule | None = None
    raised_by: str | None = None  # "check": a probe's checks raise it (code in catalog.yaml)
    # "job": raised on most hosts of the walk (at least 3, more than half), it is the job's
    # setting (its container, launch or environment), one finding naming no host
    on_most_hosts: str | None = None
    file: str = ""

    @property
    def standing(self) -> bool:
        """A fault of one host that every walk must name (docs/fault-format.md). A symptom or a
        state whose action is "none" (a drained node, a stuck NCCL watchdog, a reboot that
        happened) is evidence for a runbook to weigh, not a verdict of its own."""
        return (self.scope in HOST_SCOPES and self.severity in ("error", "critical")
                and self.action != "none")


@dataclass
class FaultCatalogue:
    signatures: dict[str, Signature]
    families: dict[str, str] = field(default_factory=dict)  # family -> title
    _by_probe: dict[str, list[Signature]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for sig in self.signatures.values():
            if sig.when is not None:
                self._by_probe.setdefault(sig.probe, []).append(sig)

    def for_probe(self, probe: str) -> list[Signature]:
        """The predicate signatures reading *probe*'s facts."""
        return self._by_probe.get(probe, [])

    def for_stream(self, stream: str) -> list[Signature]:
        return [s for s in self.signatures.values() if s.log and stream in s.log.streams]

    def stream_ere(self, stream: str) -> str:
        """One POSIX ERE matching every line a log signature of *stream* wants: the host greps
        its logs with it, so only lines that could matter leave the node."""
        patterns = sorted({p for s in self.for_stream(stream) if s.log for p in s.log.wanted})
        return "|".join(f"({p})" for p in patterns) if patterns else "^$diag-none"

    def standing_codes(self) -> frozenset[str]:
        return frozenset(s.id for s in self.signatures.values() if s.standing)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def read_files(raw_files: Iterable[tuple[str, Any]]) -> FaultCatalogue:
    """Signatures from (file name, parsed YAML) pairs, checked one by one."""
    signatures: dict[str, Signature] = {}
    families: dict[str, str] = {}
    for name, data in raw_files:
        if not isinstance(data, dict) or not isinstance(data.get("signatures"), list):
            raise FaultCatalogueError(f"{name}: a family file is a mapping with 'family', "
                                      "'title' and a list 'signatures'")
        family = data.get("family")
        if not isinstance(family, str) or not _ID.match(family):
            raise FaultCatalogueError(f"{name}: 'family' must be lowercase-with-dashes")
        if family in families:
            raise FaultCatalogueError(f"{name}: family '{family}' is defined twice")
        families[family] = str(data.get("title") or family)
        for index, raw in enumerate(data["signatures"]):
            sig = _signature(name, family, index, raw)
            if sig.id in signatures:
                raise FaultCatalogueError(f"{name}: signature '{sig.id}' is defined twice "
                                          f"(also in {signatures[sig.id].file})")
            signatures[sig.id] = sig
    return FaultCatalogue(signatures, families)


def _signature(name: str, family: str, index: int, raw: Any) -> Signature:
    where = f"{name}: signature {index + 1}"
    if not isinstance(raw, dict):
        raise FaultCatalogueError(f"{where}: a signature is a mapping")
    if isinstance(raw.get("id"), str):
        where = f"{name}: signature '{raw['id']}'"
    unknown = sorted(set(raw) - _KEYS_ALLOWED)
    if unknown:
        raise FaultCatalogueError(f"{where}: unknown key '{unknown[0]}' (allowed: "
                                  f"{', '.join(sorted(_KEYS_ALLOWED))})")
    for key in _KEYS_REQUIRED:
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise FaultCatalogueError(f"{where}: '{key}' is required (a non-empty string)")
    if not _ID.match(raw["id"]):
        raise FaultCatalogueError(f"{where}: id must be lowercase-with-dashes")
    for key, allowed in (("scope", SCOPES), ("action", ACTIONS), ("severity", SEVERITIES)):
        if raw[key] not in allowed:
            raise FaultCatalogueError(f"{where}: {key} '{raw[key]}' is not one of "
                                      f"{', '.join(allowed)}")
    kinds = [k for k in ("when", "log", "raised_by") if k in raw]
    if len(kinds) != 1:
        raise FaultCatalogueError(f"{where}: needs exactly one of when, log, raised_by "
                                  f"(found: {', '.join(kinds) or 'none'})")
    if "raised_by" in raw and raw["raised_by"] != "check":
        raise FaultCatalogueError(f"{where}: raised_by is 'check' (a probe's checks raise it)")
    log = _log_rule(where, raw["log"]) if "log" in raw else None
    most = raw.get("on_most_hosts")
    if most is not None and (most not in ON_MOST_HOSTS or raw["scope"] not in HOST_SCOPES
                             or raw["action"] not in _MOST_HOSTS_ACTIONS[most]):
        raise FaultCatalogueError(
            f"{where}: on_most_hosts is 'job' (action reconfigure) or 'storage' / 'fabric' "
            "(action none, restart-app, reconfigure or the team's call), on a gpu/link/host "
            "signature: no hardware action on every host")
    when = raw.get("when")
    if when is not None:
        from .predicate import check_predicate  # the predicate language is its own module

        problems = check_predicate(when)
        if problems:
            raise FaultCatalogueError(f"{where}: when: {problems[0]}")
    return Signature(
        id=raw["id"], family=family, probe=raw["probe"], scope=raw["scope"],
        severity=raw["severity"], action=raw["action"], summary=_line(raw["summary"]),
        cause=_line(raw["cause"]), source=_line(raw["source"]), twin=_line(raw["twin"]),
        fix=_line(raw.get("fix") or ""), when=when, log=log, raised_by=raw.get("raised_by"),
        on_most_hosts=most, file=name)


def _log_rule(where: str, raw: Any) -> LogRule:
    if not isinstance(raw, dict):
        raise FaultCatalogueError(f"{where}: log is a mapping (streams, pattern, ...)")
    unknown = sorted(set(raw) - _LOG_KEYS)
    if unknown:
        raise FaultCatalogueError(f"{where}: log: unknown key '{unknown[0]}' (allowed: "
                                  f"{', '.join(sorted(_LOG_KEYS))})")
    streams = raw.get("streams")
    if not isinstance(streams, list) or not streams or any(s not in STREAMS for s in streams):
        raise FaultCatalogueError(f"{where}: log.streams is a list of {', '.join(STREAMS)}")
    for key in ("pattern", "ignore", "resolved_by"):
        value = raw.get(key)
        if value is None and key != "pattern":
            continue
        if not isinstance(value, str) or not value:
            raise FaultCatalogueError(f"{where}: log.{key} is a regular expression (string)")
        bad = _NOT_ERE.search(value)
        if bad:
            raise FaultCatalogueError(
                f"{where}: log.{key}: '{bad.group(0)}' is not POSIX ERE (the host greps with "
                "grep -E): write [0-9], [A-Za-z_], ' ', and no (?...) or lazy quantifiers")
        try:
            re.compile(value)
        except re.error as exc:
            raise FaultCatalogueError(f"{where}: log.{key}: not a regular expression: {exc}")\
                from None
    count = raw.get("min_count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise FaultCatalogueError(f"{where}: log.min_count is a whole number >= 1")
    window = raw.get("window_minutes")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int | float)
                               or window <= 0):
        raise FaultCatalogueError(f"{where}: log.window_minutes is a number > 0")
    unless = raw.get("unless")
    if unless is not None:
        from .predicate import check_predicate

        problems = check_predicate(unless)
        if problems:
            raise FaultCatalogueError(f"{where}: log.unless: {problems[0]}")
    return LogRule(tuple(streams), raw["pattern"], raw.get("ignore"), count,
                   float(window) if window is not None else None, unless,
                   raw.get("resolved_by"))


def _line(text: str) -> str:
    return " ".join(str(text).split())


def catalogue_files(directory: Path = FAULTS_DIR) -> list[Path]:
    return sorted(directory.glob("*.yaml"))


@cache
def load_faults(directory: Path = FAULTS_DIR) -> FaultCatalogue:
    """The shipped catalogue (parsed once per content: probes.shipped's start cache)."""
    from probes import shipped

    return read_files((path.name, shipped.data(path)) for path in catalogue_files(directory))
