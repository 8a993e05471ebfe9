"""The engine: walks a runbook for a set of hosts, one step at a time.

Probe steps go to a ``ProbeProvider`` (SSH fan-out, replay of a scenario, recorded facts in a
rehearsal); questions stop the walk until answered; actions only run after a confirmer says
yes; a conclusion ends it. Every step is kept in ``steps`` with what it saw, so the walk can be
undone to the last answer, serialized, resumed, and recorded as it happens. The same inputs
always give the same path.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from probes.catalog import load_catalog
from probes.hostfold import fold_counted
from probes.model import SEVERITY_RANK, Finding, HostResult, ProbeOutcome

from . import events as ev
from .conditions import Evidence, describe, holds
from .hostfail import add_host_failure_findings
from .model import CONFIRMED_ACTIVE, Node, Runbook

MAX_STEPS = 500  # question loops are legal; a runaway walk is still stopped


class ProbeProvider(Protocol):
    """Runs probes on hosts. Implementations emit ProbeStarted/ProbeFinished as hosts answer."""

    def run_probes(self, probes: Sequence[str], hosts: Sequence[str],
                   params: Mapping[str, Mapping[str, Any]],
                   emit: Callable[[ev.Event], None]) -> list[ProbeOutcome]: ...


# Asked before an action's command runs: (node, hosts) -> confirmed?
Confirmer = Callable[[Node, tuple[str, ...]], bool]
# Runs a confirmed command: (command, hosts) -> each host's result, {host: {"state": "done" |
# "failed" | "simulated", "detail": "..."}} (``actions.transport_runner`` builds one).
ActionRunner = Callable[[str, tuple[str, ...]], Mapping[str, Mapping[str, str]]]


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
        if self.ended:
            self._record = record
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        return cls(node=data["node"], kind=data["kind"], started=data["started"],
                   ended=data.get("ended", 0.0),
                   outcomes=[ProbeOutcome.from_dict(o) for o in data.get("outcomes", [])],
                   answer=data.get("answer"), goto=data.get("goto"),
                   because=data.get("because", ""), action=data.get("action"))


class WalkError(Exception):
    """Misuse of a walk (answering a question that is not asked, an unknown choice...)."""


class Walk:
    """One walk of one runbook over a set of hosts."""

    def __init__(self, runbook: Runbook, hosts: Iterable[str], provider: ProbeProvider,
                 answers: Mapping[str, str] | None = None,
                 listeners: Iterable[ev.Listener] = (),
                 confirm: Confirmer | None = None,
                 run_action: ActionRunner | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.runbook = runbook
        self.hosts = tuple(hosts)
        self.provider = provider
        self.pending_answers = dict(answers or {})
        self.listeners = list(listeners)
        self.confirm = confirm
        self.run_action = run_action
        self.clock = clock
        self.steps: list[Step] = []
        self.current: str | None = runbook.start
        self.status = "ready"  # ready | waiting (a question) | concluded
        self._check_answers(self.pending_answers)

    # --- the walk ----------------------------------------------------------------------------

    def run(self) -> str:
        """Advance until a conclusion or an unanswered question; return the status."""
        while self.current is not None and self.status != "concluded":
            if len(self.steps) >= MAX_STEPS:
                raise WalkError(f"walk stopped after {MAX_STEPS} steps (a question loop?)")
            node = self.runbook.node(self.current)
            if node.kind == "question" and node.id not in self.pending_answers:
                if self.status != "waiting":
                    self.status = "waiting"
                    self._emit(ev.QuestionAsked(node.id, node.text,
                                                tuple((c.id, c.label) for c in node.choices),
                                                self.question_hosts(node)))
                return self.status
            self._emit(ev.StepEntered(node.id, node.kind, node.title))
            step = Step(node.id, node.kind, started=self.clock())
            self.steps.append(step)  # before running it: its own findings count for its branches
            try:
                getattr(self, f"_do_{node.kind}")(node, step)
            except BaseException:
                self.steps.pop()  # a step cut short (cancelled, failed) is not a step taken
                raise
            step.ended = self.clock()
            self.current = step.goto
            self.status = "concluded" if node.kind == "conclusion" else "ready"
            self._emit(ev.StepFinished(node.id, len(self.steps) - 1, step.to_dict(),
                                       self.to_dict()))
            if node.kind == "conclusion":
                self._emit(ev.ConclusionReached(node.id, node.title, node.cause, node.fix,
                                                node.severity, tuple(self.evidence_for(node)),
                                                node.kb, self.accused_hosts(node),
                                                tuple(self.actions())))
        return self.status

    def answer(self, node_id: str, choice: str) -> None:
        """Answer the question the walk is waiting on (then call ``run`` again)."""
        if self.status != "waiting" or self.current != node_id:
            raise WalkError(f"the walk is not waiting on '{node_id}' (current: {self.current})")
        self._check_answers({node_id: choice})
        self.pending_answers[node_id] = choice
        self.status = "ready"

    def add_answers(self, answers: Mapping[str, str]) -> None:
        """Answers for questions still ahead (e.g. given when a saved walk is resumed);
        answers the walk already holds are kept."""
        fresh = {k: v for k, v in answers.items() if k not in self.pending_answers}
        self._check_answers(fresh)
        self.pending_answers.update(fresh)

    def undo(self) -> bool:
        """Take back the last answer: the walk waits on that question again."""
        for index in range(len(self.steps) - 1, -1, -1):
            step = self.steps[index]
            if step.kind == "question" and step.answer is not None:
                del self.steps[index:]
                self.current = step.node
                self.status = "ready"
                self.pending_answers.pop(step.node, None)
                self._emit(ev.AnswerUndone(step.node, step.answer))
                self.run()  # re-asks the question
                return True
        return False

    # --- node kinds --------------------------------------------------------------------------

    def _do_probe(self, node: Node, step: Step) -> None:
        # A probe step aimed at suspects ({finding: straggler-rank}) runs on them alone, so the
        # node the others wait for is checked first; with no suspect it runs on every host. A
        # step for the hosts still standing ({without_finding: [...]}) runs on those only.
        hosts = self.target_hosts(node)
        if not hosts and not _excludes(node):
            hosts = self.hosts
        thresholds = getattr(self.provider, "thresholds", None)  # the operator's, if any
        outcomes: list[ProbeOutcome] = []
        if hosts:
            params: Mapping[str, Mapping[str, Any]] = node.params
            if self.is_active(node):
                params, outcomes = self._confirm_active(node, step, hosts)
            if not outcomes:
                outcomes = self.provider.run_probes(node.probes, hosts, params, self._emit)
        for outcome in outcomes:
            add_host_failure_findings(outcome, thresholds, len(self.hosts))
            step.outcomes.append(outcome)
            for finding in outcome.findings:
                self._emit(ev.FindingRaised(finding))
        evidence = self.evidence()
        for branch in (*self.runbook.guards, *node.branches):
            if branch.when is None or holds(branch.when, evidence):
                step.goto = branch.goto
                step.because = branch.label or describe(branch.when)
                break
        self._emit(ev.BranchTaken(node.id, step.goto or "", step.because))

    @staticmethod
    def is_active(node: Node) -> bool:
        """Whether the step loads its nodes (its probes are active in the catalog)."""
        probes = load_catalog().probes
        return node.kind == "probe" and any(
            probes[p].active for p in node.probes if p in probes)

    def _confirm_active(self, node: Node, step: Step, hosts: tuple[str, ...],
                        ) -> tuple[Mapping[str, Mapping[str, Any]], list[ProbeOutcome]]:
        """Ask once for the whole step; the answer is recorded like an action's (the audit
        trail). Confirmed: the step's params carry the confirmation to the provider. Not
        confirmed: nothing runs and every host says so (no data is never a pass)."""
        confirmed = bool(self.confirm and self.confirm(node, hosts))
        command = "active tests: " + ", ".join(node.probes)
        result = "confirmed; running" if confirmed else "not confirmed; nothing ran"
        step.action = {"command": command, "hosts": list(hosts), "confirmed": confirmed,
                       "result": result}
        self._emit(ev.ActionDecided(node.id, command, hosts, confirmed, result))
        if confirmed:
            return ({p: {**node.params.get(p, {}), CONFIRMED_ACTIVE: True}
                     for p in node.probes}, [])
        info = load_catalog().codes["active-test-not-confirmed"]
        outcomes = []
        for probe in node.probes:
            outcome = ProbeOutcome(probe, {h: HostResult(h, "ok", {"refused": "not confirmed"})
                                           for h in hosts})
            outcome.findings.append(Finding(
                "active-test-not-confirmed", info.severity, hosts,
                f"{probe} loads the nodes and was not confirmed: nothing ran", probe,
                {"what": probe}))
            outcomes.append(outcome)
        return node.params, outcomes

    def _do_question(self, node: Node, step: Step) -> None:
        choice_id = self.pending_answers.pop(node.id)  # an up-front answer is used once
        choice = node.choice(choice_id)
        assert choice is not None  # checked when the answer was given
        step.answer = choice_id
        step.goto = choice.goto
        step.because = f"answer: {choice.label}"
        self._emit(ev.AnswerGiven(node.id, choice_id))

    def _do_action(self, node: Node, step: Step) -> None:
        hosts = self.target_hosts(node)
        confirmed = False
        per_host: dict[str, dict[str, str]] = {}
        if node.command and not hosts:
            result, outcome = "no target hosts; nothing to run", "not-run"
        elif node.command:
            confirmed = bool(self.confirm and self.confirm(node, hosts))
            if confirmed and self.run_action:
                per_host = {h: {"state": str(r.get("state", "failed")),
                                "detail": str(r.get("detail", ""))}
                            for h, r in self.run_action(node.command, hosts).items()}
                outcome, result = action_outcome(per_host)
            elif confirmed:
                result, outcome = "confirmed; no action runner in this front end, so not run", \
                    "not-run"
            else:
                result, outcome = "not confirmed; not run", "declined"
        else:
            result, outcome = "", "advice"
        step.action = {"command": node.command, "hosts": list(hosts), "confirmed": confirmed,
                       "result": result, "outcome": outcome, "per_host": per_host}
        step.goto = node.next
        self._emit(ev.ActionDecided(node.id, node.command, hosts, confirmed, result, outcome,
                                    tuple((h, r["state"], r["detail"])
                                          for h, r in per_host.items())))

    def _do_conclusion(self, node: Node, step: Step) -> None:
        step.goto = None

    # --- what the walk knows -----------------------------------------------------------------

    def findings(self) -> list[Finding]:
        return [f for step in self.steps for o in step.outcomes for f in o.findings]

    def evidence(self) -> Evidence:
        facts: dict[str, dict[str, dict[str, Any]]] = {}
        for step in self.steps:
            for outcome in step.outcomes:
                per_host = facts.setdefault(outcome.probe, {})
                for host, result in outcome.hosts.items():
                    if result.state == "ok":
                        per_host[host] = result.facts
        answers = {s.node: s.answer for s in self.steps if s.answer is not None}
        return Evidence(self.findings(), facts, answers, len(self.hosts))

    def evidence_for(self, node: Node) -> list[Finding]:
        """The findings a conclusion names as its evidence."""
        if not node.evidence:
            return []
        return [f for f in self.findings()
                if any(fnmatch.fnmatchcase(f.code, pat) for pat in node.evidence)]

    def accused_hosts(self, node: Node) -> tuple[str, ...]:
        """The hosts a conclusion blames: those its evidence names with a finding of warning
        or worse that is about the host (not one that only says diag could not look). A
        conclusion of severity info ("nothing found") accuses nobody, nor one whose cause is
        not the hosts' (``accuses: none``: the application's code, the job's settings)."""
        if node.kind != "conclusion" or node.severity == "info" or node.accuses == "none":
            return ()
        blind = set(load_catalog().category("not-evidence"))
        named = {h for f in self.evidence_for(node) if f.code not in blind
                 and SEVERITY_RANK.get(f.severity, 0) >= SEVERITY_RANK["warning"]
                 for h in f.hosts}
        return tuple(h for h in self.hosts if h in named)

    def question_hosts(self, node: Node) -> tuple[str, ...]:
        """The hosts a question is about: those its ``hosts`` selector names, else all."""
        return (self.target_hosts(node) or self.hosts) if isinstance(node.hosts, dict) \
            else self.hosts

    def actions(self) -> list[dict[str, Any]]:
        """Every action step of the walk so far: its node and what was done."""
        return [{"node": s.node, **s.action} for s in self.steps if s.action]

    def target_hosts(self, node: Node) -> tuple[str, ...]:
        """The hosts a probe or action node names: all, or those with some findings."""
        if isinstance(node.hosts, dict):
            evidence = self.evidence()
            exclude = _excludes(node)
            codes = node.hosts["without_finding" if exclude else "finding"]
            chosen = set().union(*(evidence.hosts_with(c) for c in
                                   ([codes] if isinstance(codes, str) else codes)))
            return tuple(h for h in self.hosts if (h in chosen) != exclude)
        return self.hosts

    def path(self) -> list[str]:
        return [step.node for step in self.steps]

    def conclusion(self) -> Node | None:
        if self.status == "concluded" and self.steps:
            return self.runbook.node(self.steps[-1].node)
        return None

    # --- saving and resuming ---------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"runbook": self.runbook.id, "hosts": list(self.hosts),
                "current": self.current, "status": self.status,
                "pending_answers": dict(self.pending_answers),
                "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], runbook: Runbook, provider: ProbeProvider,
                  **kwargs: Any) -> Walk:
        if data["runbook"] != runbook.id:
            raise WalkError(f"saved walk is of runbook '{data['runbook']}', not '{runbook.id}'")
        walk = cls(runbook, data["hosts"], provider, answers=data.get("pending_answers"),
                   **kwargs)
        walk.steps = [Step.from_dict(s) for s in data["steps"]]
        for step in walk.steps:
            if step.node not in runbook.nodes:
                raise WalkError(f"saved step '{step.node}' is not in runbook '{runbook.id}'")
        walk.current = data["current"]
        walk.status = "ready" if data["status"] == "waiting" else data["status"]
        return walk

    # --- internals ---------------------------------------------------------------------------

    def _check_answers(self, answers: Mapping[str, str]) -> None:
        for node_id, choice in answers.items():
            node = self.runbook.nodes.get(node_id)
            if node is None or node.kind != "question":
                questions = [n.id for n in self.runbook.nodes.values() if n.kind == "question"]
                raise WalkError(f"'{node_id}' is not a question of runbook '{self.runbook.id}' "
                                f"(questions: {', '.join(questions)})")
            if node.choice(choice) is None:
                raise WalkError(f"question '{node_id}' has no choice '{choice}' "
                                f"(choices: {', '.join(c.id for c in node.choices)})")

    def _emit(self, event: ev.Event) -> None:
        for listener in self.listeners:
            listener(event)


def _excludes(node: Node) -> bool:
    """A ``{without_finding: [...]}`` selector: the hosts still standing (maybe none)."""
    return isinstance(node.hosts, dict) and "without_finding" in node.hosts


def action_outcome(per_host: Mapping[str, Mapping[str, str]]) -> tuple[str, str]:
    """(outcome, one-line result) of a confirmed action from each host's result: "done" on
    every host, "failed" on every host, "partly" done, or "simulated" (a replayed incident)."""
    by_state: dict[str, list[str]] = {}
    for host, result in per_host.items():
        by_state.setdefault(result["state"], []).append(host)
    if not by_state:
        outcome = "not-run"
    elif set(by_state) == {"simulated"}:
        outcome = "simulated"
    elif set(by_state) <= {"done"}:
        outcome = "done"
    elif "done" in by_state:
        outcome = "partly"
    else:
        outcome = "failed"
    parts = []
    for host, result in per_host.items():
        detail = f": {result['detail']}" if result["detail"] else ""
        parts.append(f"{host}: {result['state']}{detail}")
    if len(parts) <= 1:
        return outcome, parts[0] if parts else "nothing ran"
    summary = "; ".join(f"{state} on {fold_counted(hosts)}" for state, hosts in by_state.items())
    return outcome, f"{summary} — " + "; ".join(parts)

