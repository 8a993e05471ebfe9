"""Evidence before questions, and conclusions that need it: the rules a walk applies where it
goes next (docs/runbook-format.md).

- A question whose answer the evidence already holds (a choice's ``when``) is answered by it,
  and the walk says so.
- A conclusion names what must hold for it (``requires``); a branch into one whose
  requirement does not hold is not taken, and an answer leading into one goes to the
  runbook's "no cause found" conclusion instead.
- "No cause found" (``unexplained``) gives way to a standing catalogued fault: the walk never
  ends without naming a fault the evidence holds (runbook.standing).

A mixin of ``Walk``: it reads the walk's runbook and evidence and changes nothing itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from probes.model import Finding

from .conditions import Evidence, describe, holds
from .model import Node, Runbook
from .standing import CATALOGUED, standing_faults


class EvidenceRules:
    runbook: Runbook

    if TYPE_CHECKING:
        def evidence(self) -> Evidence: ...
        def findings(self) -> list[Finding]: ...

    def evident_choice(self, node: Node) -> Any:
        """The choice of a question the evidence already answers (its ``when`` holds, the
        first in the runbook's order), or None: then it is asked."""
        choices = [c for c in node.choices if c.when is not None]
        if not choices:
            return None
        evidence = self.evidence()
        return next((c for c in choices if c.when is not None and holds(c.when, evidence)
                     and self.confirmed(c.goto, evidence)), None)

    def confirmed(self, goto: str, evidence: Evidence) -> bool:
        """Whether the conclusion *goto* leads to (through actions) has what it requires."""
        node = self.runbook.nodes.get(goto)
        for _ in range(32):  # actions lead on; a runbook's graph has no loop without a question
            if node is None or node.kind != "action" or not node.next:
                break
            node = self.runbook.nodes.get(node.next)
        if node is None or node.kind != "conclusion" or node.requires is None:
            return True
        return holds(node.requires, evidence)

    def _resolve(self, goto: str, because: str, evidence: Evidence) -> tuple[str, str]:
        """Where the walk really goes next: a conclusion whose confirming evidence does not
        hold gives way to the runbook's "no cause found"; that one, to a standing catalogued
        fault (runbook.standing). Other nodes as they are."""
        node = self.runbook.nodes.get(goto)
        if node is None or node.kind != "conclusion":
            return goto, because
        if node.requires is not None and not holds(node.requires, evidence):
            fallback = self.unexplained_conclusion()
            if fallback is not None:
                because += (f"; not '{node.title}': what it requires does not hold "
                            f"({describe(node.requires)})")
                node = fallback
                goto = fallback.id
        if node.unexplained:
            faults = standing_faults(evidence.findings)
            if faults and CATALOGUED in self.runbook.nodes:
                codes = ", ".join(dict.fromkeys(f.code for f in faults))
                return CATALOGUED, (f"{because}; instead of '{node.title}': the evidence "
                                    f"names a fault ({codes})")
        return goto, because

    def unexplained_conclusion(self) -> Node | None:
        return next((n for n in self.runbook.nodes.values()
                     if n.kind == "conclusion" and n.unexplained), None)

    def standing_faults(self) -> list[Finding]:
        """The catalogued faults of hosts found so far (runbook.standing)."""
        return standing_faults(self.findings())
