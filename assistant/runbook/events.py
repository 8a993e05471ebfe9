"""Typed events a walk emits, so front ends (TUI, CLI, store) follow along without polling."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from probes.model import Finding


@dataclass(frozen=True)
class Event:
    pass


@dataclass(frozen=True)
class StepEntered(Event):
    node: str
    kind: str
    title: str


@dataclass(frozen=True)
class StepFinished(Event):
    """A step is done: *step* is its full record (Step.to_dict()), *state* the whole walk's
    (Walk.to_dict()) — enough for a listener to persist it and for a walk to resume from it."""

    node: str
    index: int
    step: dict[str, Any]
    state: dict[str, Any]


@dataclass(frozen=True)
class ProbeStarted(Event):
    probe: str
    host: str


@dataclass(frozen=True)
class ProbeFinished(Event):
    probe: str
    host: str
    state: str
    reason: str = ""
    duration_s: float = 0.0


@dataclass(frozen=True)
class FiguresReady(Event):
    """An acceptance test judged on one host as soon as it answered: its figures
    (``probes.active.figure``: metric, value, threshold, verdict, source). The TUI's matrix
    fills in from these; the store keeps them with the finished step."""

    probe: str
    host: str
    figures: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class SampleTaken(Event):
    """One round of a sampling probe (soak, ``diag watch``): each host's state and counters at
    *ts*. Recorded as it happens, so a soak cut short keeps what it saw and resumes from it."""

    probe: str
    seq: int
    ts: float
    samples: dict[str, dict[str, Any]]  # host -> {state, reason, counters}


@dataclass(frozen=True)
class FindingRaised(Event):
    finding: Finding


@dataclass(frozen=True)
class BranchTaken(Event):
    node: str
    goto: str
    because: str


@dataclass(frozen=True)
class QuestionAsked(Event):
    node: str
    text: str
    choices: tuple[tuple[str, str], ...]  # (id, label)
    hosts: tuple[str, ...] = ()  # the hosts the question is about


@dataclass(frozen=True)
class AnswerGiven(Event):
    node: str
    choice: str


@dataclass(frozen=True)
class AnswerUndone(Event):
    node: str
    choice: str


@dataclass(frozen=True)
class ActionDecided(Event):
    """An action step's decision and, when it ran, each host's result.

    *outcome*: done | partly | failed | simulated (a replayed incident: nothing ran) |
    declined | not-run | advice (no command). *per_host*: (host, state, detail) with state
    done | failed | simulated."""

    node: str
    command: str | None
    hosts: tuple[str, ...]
    confirmed: bool
    result: str = ""
    outcome: str = ""
    per_host: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class ConclusionReached(Event):
    node: str
    title: str
    cause: str
    fix: str
    severity: str
    evidence: tuple[Finding, ...] = field(default_factory=tuple)
    kb: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()  # the hosts it accuses (Walk.accused_hosts)
    actions: tuple[dict[str, Any], ...] = ()  # every action of the walk and what was done


Listener = Callable[[Event], Any]
