"""What a probe produces: per-host results with facts, and findings.

These are plain data shared by the probes, the fleet, the engine and the store; they serialize
to JSON-able dicts so a walk can be saved, resumed and recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Every host ends a probe in exactly one of these states.
HOST_STATES = ("ok", "unreachable", "auth-failed", "host-key-refused", "timeout", "parse-error",
               "cancelled")
FAILED_STATES = ("unreachable", "auth-failed", "host-key-refused", "timeout", "cancelled")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2, "critical": 3}


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    hosts: tuple[str, ...]
    message: str
    probe: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it deep-copies the evidence, and a walk over 512 hosts
        # serialises thousands of these per step. The evidence is shared; nobody mutates it.
        return {"code": self.code, "severity": self.severity, "hosts": list(self.hosts),
                "message": self.message, "probe": self.probe, "evidence": self.evidence}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(code=data["code"], severity=data["severity"], hosts=tuple(data["hosts"]),
                   message=data.get("message", ""), probe=data.get("probe", ""),
                   evidence=dict(data.get("evidence") or {}))


@dataclass
class HostResult:
    """One probe on one host: its state, the facts parsed from its output, and why if not ok."""

    host: str
    state: str
    facts: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    duration_s: float = 0.0
    # Where a failure happened ("connect": the host did not let diag in; "command": diag got
    # in and the probe hung or was cut) and, for a probe that hung, the section of its script
    # that was running (e.g. "query", where nvidia-smi runs).
    phase: str = ""
    section: str = ""

    def to_dict(self) -> dict[str, Any]:
        # Facts are shared, not deep-copied (asdict did, and that was half of a walk's CPU):
        # a finished probe's facts are never changed.
        return {"host": self.host, "state": self.state, "facts": self.facts,
                "reason": self.reason, "duration_s": self.duration_s}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostResult:
        return cls(host=data["host"], state=data["state"], facts=dict(data.get("facts") or {}),
                   reason=data.get("reason", ""), duration_s=float(data.get("duration_s", 0.0)),
                   phase=data.get("phase", ""), section=data.get("section", ""))


@dataclass
class ProbeOutcome:
    """One probe over a set of hosts: every host's result and every finding (per host and fleet)."""

    probe: str
    hosts: dict[str, HostResult] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    # A shard's catalogue findings that each host's facts decided, not yet folded over the
    # whole fleet (probes.faults.apply.fold): the walk's process folds them; never recorded.
    # None: not judged that way (the walk's process judges the catalogue whole).
    unfolded: list[Finding] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"probe": self.probe,
                "hosts": {name: result.to_dict() for name, result in self.hosts.items()},
                "findings": [f.to_dict() for f in self.findings]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeOutcome:
        return cls(probe=data["probe"],
                   hosts={n: HostResult.from_dict(r) for n, r in data.get("hosts", {}).items()},
                   findings=[Finding.from_dict(f) for f in data.get("findings", [])])
