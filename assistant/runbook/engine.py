"""The engine: walks a runbook for a set of hosts, one step at a time.

Probe steps go to a ``ProbeProvider`` (SSH fan-out, replay of a scenario, recorded facts in a
rehearsal); questions stop the walk until answered; actions only run after a confirmer says
yes; a conclusion ends it. Every step is kept in ``steps`` with what it saw, so the walk can be
undone to the last answer, serialized, resumed, and recorded as it happens. The same inputs
always give the same path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from probes.catalog import load_catalog, sweep_components
from probes.hostfold import fold_counted
from probes.model import Finding, HostResult, ProbeOutcome

from . import events as ev
from .actions import action_outcome
from .conditions import describe, holds
from .hostfail import add_host_failure_findings
from .model import CONFIRMED_ACTIVE, SWEEP, Node, Runbook
from .step import Step, WalkError
from .walk_evidence import ACCESS_CODES, WalkEvidence, excludes, finding_key

__all__ = ["ActionRunner", "Confirmer", "ProbeProvider", "Step", "Walk", "WalkError",
           "action_outcome"]

MAX_STEPS = 500  # question loops are legal; a runaway walk is still stopped
# The evidence sweep every walk starts with: a step of its own, before the runbook's start
# (docs/architecture.md, "Evidence first"). Not a runbook node, so no runbook may use the id.
SWEEP_TITLE = "Evidence sweep"


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


class Walk(WalkEvidence):
    """One walk of one runbook over a set of hosts."""

    def __init__(self, runbook: Runbook, hosts: Iterable[str], provider: ProbeProvider,
                 answers: Mapping[str, str] | None = None,
                 listeners: Iterable[ev.Listener] = (),
                 confirm: Confirmer | None = None,
                 run_action: ActionRunner | None = None,
                 clock: Callable[[], float] = time.time, sweep: bool = True) -> None:
        self.runbook = runbook
        self.hosts = tuple(hosts)
        self.provider = provider
        self.pending_answers = dict(answers or {})
        self.listeners = list(listeners)
        self.confirm = confirm
        self.run_action = run_action
        self.clock = clock
        self.steps: list[Step] = []
        self.current: str | None = SWEEP if sweep else runbook.start
        self.status = "ready"  # ready | waiting (a question) | concluded
        self._by_evidence: set[str] = set()  # questions the evidence is answering
        self._check_answers(self.pending_answers)

    # --- the walk ----------------------------------------------------------------------------

    def run(self) -> str:
        """Advance until a conclusion or an unanswered question; return the status."""
        while self.current is not None and self.status != "concluded":
            if len(self.steps) >= MAX_STEPS:
                raise WalkError(f"walk stopped after {MAX_STEPS} steps (a question loop?)")
            if self.current == SWEEP:
                self._sweep()
                continue
            node = self.runbook.node(self.current)
            if node.kind == "question" and node.id not in self.pending_answers:
                evident = self.evident_choice(node)
                if evident is not None:  # the evidence holds the answer: not asked
                    self.pending_answers[node.id] = evident.id
                    self._by_evidence.add(node.id)
                    continue
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
                                                node.severity, tuple(self.cited_evidence(node)),
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
            if step.kind == "question" and step.answer is not None and not step.answered_by:
                del self.steps[index:]
                self.current = step.node
                self.status = "ready"
                self.pending_answers.pop(step.node, None)
                self._emit(ev.AnswerUndone(step.node, step.answer))
                self.run()  # re-asks the question
                return True
        return False

    # --- the evidence sweep ------------------------------------------------------------------

    def _sweep(self) -> None:
        """Every host's passive evidence of every family, before the first node: one round trip
        per host. Its findings count for every branch after it. Hosts it could not reach are
        "not measured" here; the runbook's steps that need them report why (and its guards act
        on that), so a sweep that cannot reach a pending job's nodes ends nothing."""
        self._emit(ev.StepEntered(SWEEP, SWEEP, SWEEP_TITLE))
        step = Step(SWEEP, SWEEP, started=self.clock())
        self.steps.append(step)
        thresholds = getattr(self.provider, "thresholds", None)
        components = sweep_components(load_catalog())
        try:
            run_sweep = getattr(self.provider, "run_sweep", None)
            if run_sweep is not None:
                outcomes = run_sweep(components, self.hosts, self.sweep_params(), self._emit)
            else:  # a provider that knows only probes: the components one by one
                outcomes = self.provider.run_probes(components, self.hosts,
                                                    self.sweep_params(), self._emit)
        except BaseException:
            self.steps.pop()
            raise
        self._add_outcomes(step, outcomes, thresholds, sweep=True)
        step.goto, step.because = self.runbook.start, "evidence swept; the runbook starts"
        self._emit(ev.BranchTaken(SWEEP, step.goto, step.because))
        step.ended = self.clock()
        self.current = step.goto
        self._emit(ev.StepFinished(SWEEP, len(self.steps) - 1, step.to_dict(), self.to_dict()))

    def _add_outcomes(self, step: Step, outcomes: Sequence[ProbeOutcome],
                      thresholds: Mapping[str, Any] | None, sweep: bool = False) -> None:
        """A step's outcomes, each finding raised once in the walk: a step that reuses what
        the sweep read finds the same again, which is not new evidence (nor a new row)."""
        seen = {finding_key(f) for f in self.findings()}
        for outcome in outcomes:
            add_host_failure_findings(outcome, thresholds, len(self.hosts))
            if sweep:
                outcome = _unreached_not_measured(outcome)
            fresh = [f for f in outcome.findings if finding_key(f) not in seen]
            seen.update(finding_key(f) for f in fresh)
            if len(fresh) != len(outcome.findings):
                outcome = ProbeOutcome(outcome.probe, outcome.hosts, fresh)
            step.outcomes.append(outcome)
            for finding in outcome.findings:
                self._emit(ev.FindingRaised(finding))

    def sweep_params(self) -> dict[str, dict[str, Any]]:
        """Each component's parameters as the runbook's own steps give them, when they all
        agree (a hang walk reads XIDs over 240 minutes): its steps then reuse what the sweep
        read instead of running the same script again."""
        seen: dict[str, list[dict[str, Any]]] = {}
        for node in self.runbook.nodes.values():
            if node.kind == "probe":
                for probe in node.probes:
                    seen.setdefault(probe, []).append(dict(node.params.get(probe) or {}))
        return {probe: values[0] for probe, values in seen.items()
                if values[0] and all(v == values[0] for v in values)}

    # --- node kinds --------------------------------------------------------------------------

    def _do_probe(self, node: Node, step: Step) -> None:
        # A probe step aimed at suspects ({finding: straggler-rank}) runs on them alone, so the
        # node the others wait for is checked first; with no suspect it runs on every host. A
        # step for the hosts still standing ({without_finding: [...]}) runs on those only.
        hosts = self.target_hosts(node)
        if not hosts and not excludes(node):
            hosts = self.hosts
        thresholds = getattr(self.provider, "thresholds", None)  # the operator's, if any
        outcomes: list[ProbeOutcome] = []
        if hosts:
            params: Mapping[str, Mapping[str, Any]] = node.params
            if self.is_active(node):
                params, outcomes = self._confirm_active(node, step, hosts)
            if not outcomes:
                outcomes = self.provider.run_probes(node.probes, hosts, params, self._emit)
        self._add_outcomes(step, outcomes, thresholds)
        evidence = self.evidence()
        for branch in (*self.runbook.guards, *node.branches):
            if branch.when is None or (holds(branch.when, evidence)
                                       and self.confirmed(branch.goto, evidence)):
                step.goto, step.because = self._resolve(
                    branch.goto, branch.label or describe(branch.when), evidence)
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
        if node.id in self._by_evidence:
            self._by_evidence.discard(node.id)
            step.answered_by = "evidence"
            because = f"answered by the evidence: {choice.label} ({describe(choice.when)})"
        else:
            because = f"answer: {choice.label}"
        step.goto, step.because = self._resolve(choice.goto, because, self.evidence())
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
        step.goto, step.because = self._resolve(node.next or "", step.because, self.evidence())
        self._emit(ev.ActionDecided(node.id, node.command, hosts, confirmed, result, outcome,
                                    tuple((h, r["state"], r["detail"])
                                          for h, r in per_host.items())))

    def _do_conclusion(self, node: Node, step: Step) -> None:
        step.goto = None

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
            if step.node not in runbook.nodes and step.kind != SWEEP:
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


def _unreached_not_measured(outcome: ProbeOutcome) -> ProbeOutcome:
    """The sweep's hosts it could not reach, as "not measured" rather than diag's access
    findings: the sweep is extra evidence, and a host it could not reach (a pending job has no
    allocation for srun to run in) says nothing the runbook asked about. The runbook's own
    steps report the failure where they need the host (the provider remembers dead hosts, so
    that costs no second time-out) and its guards act on it there."""
    access = [f for f in outcome.findings if f.code in ACCESS_CODES]
    if not access:
        return outcome
    kept = [f for f in outcome.findings if f.code not in ACCESS_CODES]
    if outcome.probe != SWEEP:  # said once, by the sweep's own outcome, not per component
        return ProbeOutcome(outcome.probe, outcome.hosts, kept)
    hosts = tuple(sorted({h for f in access for h in f.hosts}))
    info = load_catalog().codes["not-measured"]
    why = "; ".join(f.message for f in access)
    unreached = Finding("not-measured", info.severity, hosts,
                        f"the evidence sweep did not reach {fold_counted(list(hosts))}: {why}",
                        outcome.probe, {"what": "the evidence sweep", "why": why})
    return ProbeOutcome(outcome.probe, outcome.hosts, [*kept, unreached])
