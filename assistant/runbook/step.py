"""One step of a walk, as the engine keeps it and the store records it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from probes.model import ProbeOutcome


@dataclass
class Step:
    node: str
    kind: str
    started: float
    ended: float = 0.0
    outcomes: list[ProbeOutcome] = field(default_factory=list)
    answer: str | None = None
    goto: str | None = None
    because: str = ""
    action: dict[str, Any] | None = None
    answered_by: str = ""  # "evidence": the walk answered the question from what it found
    _record: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The step as plain data. A finished step never changes, so its record is built once:
        the walk's state is sent after every step, and rebuilding every earlier step's
        outcomes each time made a walk quadratic in its steps."""
        if self._record is not None:
            return self._record
        record = {"node": self.node, "kind": self.kind, "started": self.started,
                  "ended": self.ended, "outcomes": [o.to_dict() for o in self.outcomes],
                  "answer": self.answer, "goto": self.goto, "because": self.because,
                  "action": self.action}
        if self.answered_by:
            record["answered_by"] = self.answered_by
        if self.ended:
            self._record = record
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        return cls(node=data["node"], kind=data["kind"], started=data["started"],
                   ended=data.get("ended", 0.0),
                   outcomes=[ProbeOutcome.from_dict(o) for o in data.get("outcomes", [])],
                   answer=data.get("answer"), goto=data.get("goto"),
                   because=data.get("because", ""), action=data.get("action"),
                   answered_by=data.get("answered_by", ""))


class WalkError(Exception):
    """Misuse of a walk (answering a question that is not asked, an unknown choice...)."""
