"""Standing faults: what the fault catalogue names on a host, whichever runbook is walked.

A runbook orders the causes a symptom suggests; the evidence sweep reads every family on every
host first. When the sweep (or any step) finds a catalogued fault of one host with severity
error or worse (docs/fault-format.md, "Standing faults"), the walk never ends without naming
it: a conclusion that found no cause (``unexplained``) gives way to the built-in
``catalogued-fault`` conclusion every runbook has, and an automated walk that stops at a
question reports it as its provisional conclusion. The text of that conclusion is the
catalogue's own: the cause, the action class and the fix of each signature found.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from probes.faults import Signature, load_faults
from probes.faults.apply import WIDE_WORDS
from probes.hostfold import fold_counted
from probes.model import SEVERITY_RANK, Finding

from .model import Node

CATALOGUED = "catalogued-fault"
# What each action class asks of the operator, in the conclusion's fix.
ACTION_TEXT = {
    "none": "nothing by itself",
    "restart-app": "restart the job; the node stays in service",
    "reset-gpu": "drain the host, reset the GPU(s) (nvidia-smi -r, or reboot), validate "
                 "(dcgmi diag -r 3) and resume",
    "reboot": "drain the host and reboot it, then validate before it takes work",
    "reconfigure": "fix the setting named (no hardware is at fault), then rerun the job",
    "drain-rma": "drain the host; the hardware must be repaired or replaced (open a ticket "
                 "with the vendor, attach nvidia-bug-report.sh / the evidence)",
    "call-fabric-team": "call the network team (switches, cables, subnet manager); do not "
                        "drain hosts one by one",
    "call-storage-team": "call the storage team (servers, metadata, evictions)",
}


def standing_faults(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that are standing faults: a catalogued fault of a GPU, link or host, of
    severity error or worse, naming the hosts it is on; or raised on most hosts of the walk
    and so the job's setting (``on_most_hosts: job``: it names no host, and is named as the
    job's)."""
    codes = load_faults().standing_codes()
    return [f for f in findings if f.code in codes and (f.hosts or f.evidence.get("job_wide"))
            and SEVERITY_RANK.get(f.severity, 0) >= SEVERITY_RANK["error"]]


def signature(code: str) -> Signature | None:
    return load_faults().signatures.get(code)


def described(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """Each standing fault as the JSON document names it: hosts, cause, action, source."""
    out = []
    for finding in findings:
        sig = signature(finding.code)
        if sig is None:
            continue
        out.append({"code": finding.code, "hosts": list(finding.hosts),
                    "severity": finding.severity, "scope": sig.scope, "action": sig.action,
                    "summary": sig.summary, "cause": sig.cause,
                    "fix": sig.fix or ACTION_TEXT[sig.action], "source": sig.source,
                    "message": finding.message,
                    **({"scope": finding.evidence.get("scope") or "job",
                        "raised_on": finding.evidence.get("raised_on"),
                        "wide": finding.evidence.get("wide") or "job"}
                       if finding.evidence.get("job_wide") and not finding.hosts else {})})
    return out


def cause_and_fix(findings: Sequence[Finding]) -> tuple[str, str]:
    """The catalogued-fault conclusion's words, from the signatures found."""
    causes, fixes = [], []
    for item in _merged(described(findings)):
        who = WIDE_WORDS.get(item.get("wide") or "job", WIDE_WORDS["job"])[0]
        hosts = fold_counted(item["hosts"], empty=f"{who} (on {item.get('raised_on')})")
        causes.append(f"{hosts}: {item['summary']} {item['cause']}")
        fixes.append(f"{hosts}: {item['fix']} ({item['action']}; source: {item['source']})")
    return " ".join(causes), " ".join(fixes)


def _merged(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per signature, its hosts together (a fault on 40 hosts is one sentence)."""
    by_code: dict[str, dict[str, Any]] = {}
    for item in items:
        if item["code"] in by_code:
            hosts = by_code[item["code"]]["hosts"]
            hosts.extend(h for h in item["hosts"] if h not in hosts)
        else:
            by_code[item["code"]] = {**item, "hosts": list(item["hosts"])}
    return list(by_code.values())


def catalogued_node() -> Node:
    """The conclusion every runbook gets (unless it defines one of that id itself)."""
    codes = tuple(sorted(load_faults().standing_codes()))
    return Node(
        id=CATALOGUED, kind="conclusion", title="Fault named by the evidence sweep",
        explain=("The runbook's own steps found no cause, but the evidence every walk starts "
                 "with names a fault on a host (the fault catalogue, docs/fault-catalogue.md): "
                 "that fault is the finding to act on first."),
        cause="A catalogued fault stands on the named hosts (see the evidence).",
        fix="Follow each fault's action class and fix in the evidence.",
        severity="critical", evidence=codes, kb=())
