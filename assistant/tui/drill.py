"""Drills for new hires, without Textual: pick a scenario, count hints, score the walk.

A drill replays one simulated incident (``fixtures/scenarios/NAME``). The trainee sees only
its symptom, picks a runbook and walks it; the score compares the walk with what an expert
would have done:

- *correct*: the conclusion reached is the scenario's ``expect.conclusion``;
- *steps* vs *shortest*: the walk's path (undone answers excluded) against the shortest path,
  in the chosen runbook's graph, from its start to the expected conclusion (None when that
  runbook cannot reach it: the wrong runbook);
- *hints*: how many times the trainee pressed ``i``. On the drill screen a hint names the runbook
  the scenario is about; on the walk it names the next step on the expert's path from the
  current step (and why). The walk screen always shows each step's ``explain``: reading it is
  not a hint;
- *seconds*: from the symptom shown to the conclusion, on the drill's clock (injectable, so
  tests and snapshots are frozen).

``grade`` turns these into an overall score out of 100 with what each part means.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from assistant.fleet.scenario import Scenario, load_scenario, scenario_names
from assistant.runbook.model import Runbook
from assistant.store.drills import DrillScore

from . import hooks
from .context import TUI_CONCURRENCY, DiagContext, FleetOptions

EXCLUDED = ("_baseline",)


def drillable(names: Sequence[str] | None = None) -> list[str]:
    """Scenarios that have an expected conclusion (``_baseline`` is not an incident)."""
    out = []
    for name in names if names is not None else scenario_names():
        if name in EXCLUDED or name.startswith("_"):
            continue
        if load_scenario(name).expect.get("conclusion"):
            out.append(name)
    return out


def pick_scenario(name: str | None, done: set[str], rng: random.Random | None = None,
                  names: Sequence[str] | None = None) -> str:
    """*name* if given (it must exist), else a random drillable scenario not in *done* (any
    one once every scenario was drilled)."""
    if name:
        load_scenario(name)  # raises ScenarioError for an unknown name
        return name
    candidates = drillable(names)
    if not candidates:
        raise ValueError("no drillable scenario in fixtures/scenarios")
    fresh = [n for n in candidates if n not in done] or candidates
    return (rng or random.Random()).choice(sorted(fresh))


def shortest_path(runbook: Runbook, goal: str | None, source: str | None = None,
                  ) -> list[str] | None:
    """Node ids from *source* (default: the start) to *goal*, both included; None if the goal
    is not in this runbook or cannot be reached."""
    import networkx as nx

    if not goal or goal not in runbook.nodes:
        return None
    graph = nx.DiGraph()
    graph.add_nodes_from(runbook.nodes)
    for node in runbook.nodes.values():
        graph.add_edges_from((node.id, nxt) for nxt in runbook.successors(node)
                             if nxt in runbook.nodes)
    if source is None or source not in runbook.nodes:  # the evidence sweep: before the start
        source = runbook.start
    try:
        return list(nx.shortest_path(graph, source, goal))
    except nx.NetworkXNoPath:
        return None


@dataclass
class Drill:
    """One drill in progress: shared by the drill screen, its walk and the score screen."""

    scenario: Scenario
    trainee: str
    clock: Callable[[], float] = time.time
    started: float = 0.0
    hints: int = 0
    runbook: str = ""
    revealed: list[str] = field(default_factory=list)  # the hints shown, in order
    finished: bool = False

    def __post_init__(self) -> None:
        self.started = self.clock()

    @property
    def expected(self) -> str | None:
        conclusion = self.scenario.expect.get("conclusion")
        return str(conclusion) if conclusion else None

    def hint_runbook(self) -> str:
        """Names the runbook; the drill screen also shows the matcher's ranking from then on
        (hidden before: reading the symptom and choosing is what the drill trains)."""
        self.hints += 1
        text = f"This incident is one for the '{self.scenario.runbook}' runbook."
        self.revealed.append(text)
        return text

    def hint_step(self, runbook: Runbook, current: str | None) -> str:
        """The next step on the expert's path from *current*, with its explain."""
        self.hints += 1
        path = shortest_path(runbook, self.expected, current) if current else None
        if not path:
            text = (f"The expected conclusion is not reachable from here in '{runbook.id}': "
                    "go back, or try another runbook.")
        elif len(path) == 1:
            text = "You are at the expected conclusion."
        else:
            node = runbook.node(path[1])
            text = f"Next, the expert looks at '{node.id}': {node.explain.strip()}"
        self.revealed.append(text)
        return text

    def score(self, runbook: Runbook, state: dict[str, Any]) -> DrillScore:
        """Score the concluded walk *state* (``Walk.to_dict()``)."""
        self.finished = True
        # the runbook's steps: the evidence sweep before them is the same for every walk
        path = [str(step["node"]) for step in state.get("steps", [])
                if step.get("kind") != "sweep"]
        node = runbook.nodes.get(path[-1]) if path else None
        conclusion = node.id if node is not None and node.kind == "conclusion" else None
        shortest = shortest_path(runbook, self.expected)
        now = self.clock()
        return DrillScore(
            trainee=self.trainee, scenario=self.scenario.name, runbook=runbook.id,
            conclusion=conclusion, expected=self.expected,
            correct=conclusion is not None and conclusion == self.expected,
            steps=len(path), shortest=len(shortest) if shortest else None, hints=self.hints,
            seconds=round(max(0.0, now - self.started), 1),
            finished=datetime.fromtimestamp(now, tz=timezone.utc).replace(tzinfo=None))


@dataclass(frozen=True)
class Part:
    """One part of a drill's overall score: its points out of its weight, and in words what it
    measured, so the trainee knows what to do better."""

    name: str
    points: int
    out_of: int
    meaning: str


# The weights and the time bounds are a teaching choice, not a measurement: the conclusion is
# half the score because a wrong one drains a good node or leaves the bad one in; a path near
# the shortest, no hints and a few minutes are what a practised on-call engineer shows.
WEIGHTS = {"conclusion": 50, "path": 20, "hints": 15, "time": 15}
HINT_COST = 5
FULL_MARKS_S, NO_MARKS_S = 300.0, 1200.0


def grade(score: DrillScore) -> tuple[int, list[Part]]:
    """The overall score out of 100 and its parts. A wrong conclusion scores 0 overall, what
    ever the other parts: in an incident a wrong verdict is worse than none. The parts are
    still shown, so the trainee sees what went well."""
    right = WEIGHTS["conclusion"] if score.correct else 0
    parts = [Part("conclusion", right, WEIGHTS["conclusion"],
                  "reached the expected conclusion" if score.correct else
                  "not the expected conclusion: the overall score is 0")]
    if score.shortest is None or not score.steps:
        path, why = 0, "the chosen runbook cannot reach the expected conclusion"
    else:
        path = round(WEIGHTS["path"] * min(1.0, score.shortest / score.steps))
        why = f"{score.steps} steps against the shortest {score.shortest}"
    parts.append(Part("path", path, WEIGHTS["path"], why))
    hints = max(0, WEIGHTS["hints"] - HINT_COST * score.hints)
    parts.append(Part("hints", hints, WEIGHTS["hints"],
                      f"{score.hints} taken, {HINT_COST} points each"))
    span = NO_MARKS_S - FULL_MARKS_S
    late = min(1.0, max(0.0, score.seconds - FULL_MARKS_S) / span)
    minutes, seconds = divmod(round(score.seconds), 60)
    parts.append(Part("time", round(WEIGHTS["time"] * (1 - late)), WEIGHTS["time"],
                      f"{minutes}m{seconds:02d}s: full within {FULL_MARKS_S / 60:.0f} min, "
                      f"none after {NO_MARKS_S / 60:.0f}"))
    total = sum(p.points for p in parts) if score.correct else 0
    return total, parts


def right_answer(scenario: Scenario) -> tuple[str, str, str]:
    """(runbook, conclusion title, its cause) the scenario expects: shown after a wrong pick."""
    from assistant.runbook.library import get_runbook

    runbook = get_runbook(scenario.runbook)
    node = runbook.nodes.get(str(scenario.expect.get("conclusion")))
    if node is None:
        return runbook.id, str(scenario.expect.get("conclusion")), ""
    return runbook.id, f"{node.title} ({node.id})", " ".join(node.cause.split())


def expert_path(scenario: Scenario) -> list[tuple[str, str, str]]:
    """What an expert would have looked at: (node id, kind, explain) along the shortest path
    of the scenario's own runbook to its expected conclusion."""
    from assistant.runbook.library import get_runbook

    runbook = get_runbook(scenario.runbook)
    path = shortest_path(runbook, scenario.expect.get("conclusion")) or []
    return [(n, runbook.node(n).kind, runbook.node(n).explain.strip()) for n in path]


def drill_context(name: str | None, *, trainee: str | None = None,
                  clock: Any = None, export_dir: Path | None = None,
                  done: set[str] | None = None) -> DiagContext:
    """The context of a drill on scenario *name* (None or "": a random one not in *done*,
    by default the scenarios the trainee already drilled, read from the store)."""
    from assistant.store import current_operator

    trainee = trainee or current_operator()
    if done is None and not name:
        done = hooks.drilled(trainee)
    scenario = load_scenario(pick_scenario(name or None, done or set()))
    drill = Drill(scenario, trainee, **({"clock": clock} if clock else {}))
    options = FleetOptions(scenario=str(scenario.path), concurrency=TUI_CONCURRENCY)
    return DiagContext(options, export_dir=export_dir, drill=drill, record=False)
