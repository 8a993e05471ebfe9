"""A recorded incident window, replayed: what the monitoring step found over a real
Prometheus, kept with a scenario (``monitoring:`` in scenario.yaml, docs/scenario-format.md) so
``diag --demo`` and the drills show the timeline with no server.

The file holds the step's findings as it produced them (codes, hosts, message, evidence with
the first-abnormal times and each accused host's signal) and the window; a walk over the
scenario gets them as the ``monitoring`` outcome of its evidence sweep, for its own hosts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assistant import yamlfile
from probes.model import SEVERITY_RANK, Finding, HostResult, ProbeOutcome

PROBE = "monitoring"
_KEYS = {"recorded", "window", "findings"}


class RecordedWindowError(ValueError):
    """A recorded window that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class RecordedWindow:
    """The window (``from``/``to``, RFC 3339) and the findings recorded over it."""

    window: Mapping[str, str]
    findings: tuple[Finding, ...]

    def run(self, hosts: Sequence[str], say: Callable[[str], None]) -> ProbeOutcome:
        """The recorded findings that name the walk's hosts (as the step would have read
        them), and each host's first-abnormal times."""
        walk = set(hosts)
        kept = [f for f in self.findings if not f.hosts or walk & set(f.hosts)]
        outcome = ProbeOutcome(PROBE, findings=kept)
        for host in hosts:
            first = {f.code: f.evidence["first_abnormal"][host] for f in kept
                     if host in (f.evidence.get("first_abnormal") or {})}
            outcome.hosts[host] = HostResult(host, "ok", {"first_abnormal": first,
                                                          "window": dict(self.window)})
        return outcome


def load(path: Path) -> RecordedWindow:
    """Read and check a recorded window file."""
    try:
        data = yamlfile.load_file(path).data
    except yamlfile.YamlFileError as exc:
        raise RecordedWindowError(str(exc)) from None
    if not isinstance(data, dict) or set(data) - _KEYS or "findings" not in data:
        raise RecordedWindowError(f"{path}: a recorded window is a mapping of "
                                  f"{', '.join(sorted(_KEYS))} (findings required)")
    window = data.get("window") or {}
    if not isinstance(window, dict) or set(window) - {"from", "to"}:
        raise RecordedWindowError(f"{path}: window: from and to (RFC 3339)")
    found = []
    for i, item in enumerate(data["findings"] or []):
        where = f"{path}: findings[{i}]"
        if not isinstance(item, dict) or not {"code", "severity", "message"} <= set(item):
            raise RecordedWindowError(f"{where}: code, severity and message are required")
        if item["severity"] not in SEVERITY_RANK:
            raise RecordedWindowError(f"{where}: severity '{item['severity']}' is not one of "
                                      f"{', '.join(SEVERITY_RANK)}")
        evidence: Any = item.get("evidence") or {}
        hosts = item.get("hosts") or []
        if not isinstance(evidence, dict) or not isinstance(hosts, list):
            raise RecordedWindowError(f"{where}: hosts is a list, evidence a mapping")
        found.append(Finding(str(item["code"]), str(item["severity"]),
                             tuple(str(h) for h in hosts), str(item["message"]), PROBE,
                             evidence))
    return RecordedWindow({k: str(v) for k, v in window.items()}, tuple(found))


def dump(outcome: ProbeOutcome, window: Mapping[str, str], recorded: str) -> str:
    """The YAML of a recorded window: *recorded* says how it was made (kept at the top)."""
    import yaml

    return yaml.safe_dump({
        "recorded": recorded, "window": dict(window),
        "findings": [{"code": f.code, "severity": f.severity, "hosts": list(f.hosts),
                      "message": f.message, "evidence": f.evidence}
                     for f in outcome.findings]},
        sort_keys=False, allow_unicode=True, width=100)
