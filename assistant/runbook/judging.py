"""A probe's collected results judged: each host's own checks, then what compares hosts.

Two halves because a sharded walk (assistant/probeworker/shards.py) runs them in different
processes: each worker judges its own hosts, the walk's process the fleet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.base import Context, Probe
from probes.model import ProbeOutcome
from probes.placement import concentration


def judge_hosts(probe: Probe, outcome: ProbeOutcome, ctx: Context) -> ProbeOutcome:
    """Each answering host's own checks."""
    for host, result in outcome.hosts.items():
        if result.state == "ok":
            outcome.findings.extend(probe.check(host, result.facts, ctx))
    return outcome


def judge_fleet(probe: Probe, outcome: ProbeOutcome, ctx: Context,
                attrs: Mapping[str, Mapping[str, Any]]) -> ProbeOutcome:
    """The checks that compare hosts (the probe's fleet checks, the fault catalogue with its
    majorities) and where the findings gather (placement). The catalogue's per-host findings
    are the shards' (``outcome.unfolded``, folded here over every host) when a sharded walk's
    workers judged them, else judged here."""
    from probes.faults import apply

    ok_facts = {h: r.facts for h, r in outcome.hosts.items() if r.state == "ok"}
    outcome.findings.extend(probe.check_fleet(ok_facts, ctx))
    if outcome.unfolded is not None:
        outcome.findings.extend(apply.judge_fleet(probe.name, ok_facts, ctx.thresholds))
        outcome.findings.extend(apply.fold(probe.name, outcome.unfolded, len(ok_facts)))
        outcome.unfolded = None
    else:
        outcome.findings.extend(apply.judge(probe.name, ok_facts, ctx.thresholds))
    outcome.findings.extend(concentration(outcome.findings, list(outcome.hosts), attrs))
    return outcome
