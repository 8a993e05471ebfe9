"""The fault catalogue applied: a probe's facts on every host, and the log lines it read, in;
findings out. Pure: the provider calls it after each probe's own checks.

Log lines come from the sections a probe declares in probes/catalog.yaml (``logs: {SECTION:
STREAM}``): the kernel log of the ``kernel`` component (and of the gpu probe), what the ranks
printed (the ``logs`` component, and the job log, NCCL log and rank logs of ``--logs``). They
are kept in the host's facts as ``log_lines`` by :func:`attach_log_lines` when the output is
parsed, so a walk's record holds the lines its verdict rests on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from probes.model import Finding

from .catalogue import FaultCatalogue, Signature, load_faults
from .predicate import Env, drift_specs, keys_read, lookup, majorities, matching

_ABSENT = lookup({}, "x")  # what lookup gives for an absent fact
MAX_LOG_LINES = 300  # per host and probe, kept in the facts (the newest)
MAX_ITEMS = 8  # matching entries named in a finding's evidence
MAX_EVIDENCE_LINES = 5
JOB_WIDE_MIN_HOSTS = 3  # on_most_hosts: the majority rule of drift / common (fault-format.md)
_STAMP = re.compile(r"^\s*\[\s*(\d+(?:\.\d+)?)\]")
_SECTION = re.compile(r"^=== diag:(section|rc|missing) (\S+)")
# How an entry of a list fact is named in a message, first key present wins.
_ITEM_NAMES = ("node", "name", "unit", "mountpoint", "device", "netdev", "bus_id", "gpu", "index",
               "pid", "id", "port", "link")


def attach_log_lines(text: str, sections: Mapping[str, str], facts: dict[str, Any],
                     catalogue: FaultCatalogue | None = None) -> None:
    """Keep, in ``facts["log_lines"]``, the lines of *text*'s log *sections* (section ->
    stream) that some log signature of their stream could match, each dated from boot when
    it carries a ``[seconds]`` stamp and the facts an ``uptime_s``."""
    catalogue = catalogue or load_faults()
    wanted = {stream: _union(catalogue, stream) for stream in set(sections.values())}
    uptime = facts.get("uptime_s")
    kept: list[dict[str, Any]] = []
    current: str | None = None
    for line in text.splitlines():
        mark = _SECTION.match(line)
        if mark:
            current = mark.group(2) if mark.group(1) == "section" else None
            continue
        stream = sections.get(current or "")
        regex = wanted.get(stream or "")
        if stream is None or regex is None or not regex.search(line):
            continue
        age = None
        stamp = _STAMP.match(line)
        if stamp and isinstance(uptime, int | float) and not isinstance(uptime, bool):
            age = round(max(0.0, float(uptime) - float(stamp.group(1))), 1)
        kept.append({"stream": stream, "text": line.strip()[:500], "age_s": age})
    if kept or "log_lines" not in facts:
        facts["log_lines"] = kept[-MAX_LOG_LINES:]


def _union(catalogue: FaultCatalogue, stream: str) -> re.Pattern[str] | None:
    sigs = catalogue.for_stream(stream)
    if not sigs:
        return None
    return re.compile("|".join(f"(?:{p})" for s in sigs if s.log for p in s.log.wanted))


def judge(probe: str, facts_by_host: Mapping[str, Mapping[str, Any]],
          thresholds: Mapping[str, Any], catalogue: FaultCatalogue | None = None
          ) -> list[Finding]:
    """Every catalogue finding on *probe*'s facts: predicates of signatures that read this
    probe, and log signatures over the log lines this probe read."""
    catalogue = catalogue or load_faults()
    return [*judge_fleet(probe, facts_by_host, thresholds, catalogue),
            *fold(probe, judge_hosts(probe, facts_by_host, thresholds, catalogue),
                  len(facts_by_host), catalogue)]


def judge_hosts(probe: str, facts_by_host: Mapping[str, Mapping[str, Any]],
                thresholds: Mapping[str, Any], catalogue: FaultCatalogue | None = None
                ) -> list[Finding]:
    """The findings each host's own facts decide, one per host and signature, not yet folded
    (:func:`fold`): predicates that compare with no majority, and log signatures. A sharded
    walk's workers judge these on their own hosts (assistant/probeworker/shards.py)."""
    catalogue = catalogue or load_faults()
    findings: list[Finding] = []
    if not _client_side(probe):
        env = Env(thresholds, {})
        for sig in catalogue.for_probe(probe):
            assert sig.when is not None
            if not drift_specs(sig.when):
                findings += [_fact_finding(sig, host, hits, facts)
                             for host, facts in facts_by_host.items()
                             if (hits := matching(sig.when, facts, env))]
    window_default = float(thresholds.get("fault_log_window_minutes", 120))
    for host, facts in facts_by_host.items():
        lines = facts.get("log_lines")
        if not lines:
            continue
        for stream in sorted({line.get("stream") for line in lines}):
            for sig in catalogue.for_stream(str(stream)):
                if sig.log and sig.log.unless and matching(sig.log.unless, facts,
                                                           Env(thresholds, {})):
                    continue  # measured to be the healthy twin
                hits = _log_hits(sig, [x for x in lines if x.get("stream") == stream],
                                 window_default)
                if sig.log and len(hits) >= sig.log.min_count:
                    findings.append(_log_finding(sig, host, hits, str(stream)))
    return findings


def judge_fleet(probe: str, facts_by_host: Mapping[str, Mapping[str, Any]],
                thresholds: Mapping[str, Any], catalogue: FaultCatalogue | None = None
                ) -> list[Finding]:
    """The findings that need every host's facts: predicates against the fleet's majority
    (``drift``, ``common``), and a client-side probe's reading credited to the nodes it names."""
    catalogue = catalogue or load_faults()
    findings: list[Finding] = []
    client = _client_side(probe)
    for sig in catalogue.for_probe(probe):
        assert sig.when is not None
        if client:
            env = Env(thresholds, majorities(sig.when, facts_by_host))
            findings += _node_findings(sig, facts_by_host, env)
        elif drift_specs(sig.when):
            env = Env(thresholds, majorities(sig.when, facts_by_host))
            found = [_fact_finding(sig, host, hits, facts)
                     for host, facts in facts_by_host.items()
                     if (hits := matching(sig.when, facts, env))]
            findings += on_most_hosts(sig, found, len(facts_by_host))
    return findings


def fold(probe: str, findings: list[Finding], hosts: int,
         catalogue: FaultCatalogue | None = None) -> list[Finding]:
    """*findings* with each catalogue signature's per-host findings (``judge_hosts``, from one
    or several shards) folded by :func:`on_most_hosts` over the *hosts* read; any other
    finding is kept as it is, in its place."""
    catalogue = catalogue or load_faults()
    grouped: dict[str, list[Finding]] = {}
    out: list[Finding | str] = []
    for finding in findings:
        sig = catalogue.signatures.get(finding.code)
        if sig is None or finding.evidence.get("job_wide"):
            out.append(finding)
            continue
        if finding.code not in grouped:
            grouped[finding.code] = []
            out.append(finding.code)  # where the signature's folded findings go
        grouped[finding.code].append(finding)
    folded: list[Finding] = []
    for item in out:
        if isinstance(item, str):
            folded += on_most_hosts(catalogue.signatures[item], grouped[item], hosts)
        else:
            folded.append(item)
    return folded


def on_most_hosts(sig: Signature, found: list[Finding], hosts: int) -> list[Finding]:
    """*found* (one finding a host) as one finding of the job, naming no host, when *sig* says
    so (``on_most_hosts: job``) and it was raised on most of the *hosts* read: at least
    ``JOB_WIDE_MIN_HOSTS`` and more than half, the majority rule of ``drift`` and ``common``
    (docs/fault-format.md). A setting every rank inherits from the job (its container's
    /dev/shm and memlock, its NCCL_SOCKET_IFNAME) prints the same line on every host: the
    fix is the job's, and no host is faulty. A walk of fewer hosts is judged host by host."""
    raised = list(dict.fromkeys(h for f in found for h in f.hosts))
    wide = sig.on_most_hosts
    if wide is None or len(raised) < JOB_WIDE_MIN_HOSTS or 2 * len(raised) <= hosts:
        return found
    from probes.hostfold import fold_counted

    # "storage" / "fabric": the shared system every client talks to (a Lustre server evicting
    # every client, a fabric dropping them all) is what most hosts report; no host is faulty
    evidence = {**found[0].evidence, **_evidence(sig), "scope": "job" if wide == "job" else
                "fabric", "job_wide": True, "wide": wide, "hosts_raised": len(raised),
                "hosts_read": hosts, "raised_on": fold_counted(raised)}
    evidence.pop("count", None)
    whose = WIDE_WORDS[wide]
    message = (f"{whose[0]}, on {len(raised)} of {hosts} hosts ({fold_counted(raised)}): "
               f"{sig.summary} The same on most hosts is {whose[1]}, not a fault of each host.")
    return [Finding(sig.id, sig.severity, (), message, sig.probe, evidence)]


# on_most_hosts: (who it is, whose trouble it is), in the finding's words
WIDE_WORDS = {"job": ("the job", "the job's setting (its container, launch or environment)"),
              "storage": ("the shared storage", "the storage servers' (every client sees it)"),
              "fabric": ("the fabric", "the network fabric's (every host sees it)")}


def _client_side(probe: str) -> bool:
    """A probe read once where diag runs (the scheduler): its facts describe other nodes."""
    from probes.base import get_probe

    try:
        return get_probe(probe).runs_on == "client"
    except KeyError:
        return False


def _node_findings(sig: Signature, facts_by_host: Mapping[str, Mapping[str, Any]], env: Env
                   ) -> list[Finding]:
    """A client-side probe's facts are the same reading on every host that holds them (the
    reader, or every host of a replay): each matching entry credits the node it names, once,
    and never the host that happened to read it."""
    by_node: dict[str, Mapping[str, Any]] = {}
    for facts in facts_by_host.values():
        for hit in matching(sig.when or {}, facts, env) or []:
            node = hit.get("node")
            if isinstance(node, str) and node:
                by_node.setdefault(node, hit)
    return [_fact_finding(sig, node, [hit], {}) for node, hit in sorted(by_node.items())]


def _log_hits(sig: Signature, lines: Iterable[Mapping[str, Any]], window_default: float
              ) -> list[Mapping[str, Any]]:
    """The lines that show the fault: they match, are not ignored, are in the window, and no
    later line resolves them (``resolved_by``). Read once, from the newest line back, so what
    later lines resolved is known at each hit (a long outage logs hundreds of lines)."""
    assert sig.log is not None
    window_s = 60.0 * (sig.log.window_minutes or window_default)
    ignore = sig.log.ignore_regex
    resolving = sig.log.resolved_regex
    # what the lines after the current one hold: a resolving line at all, and the things the
    # first group of each named (the same server: when both rules have a group, only a line
    # naming the hit's own thing resolves it)
    resolved_any, resolved = False, set[str | None]()
    by_name = resolving is not None and resolving.groups > 0
    hits = []
    for line in reversed(list(lines)):
        text = str(line.get("text", ""))
        m = sig.log.regex.search(text)
        if m and not (ignore is not None and ignore.search(text)):
            age = line.get("age_s")
            # dated and older than the window: history, not this incident
            old = isinstance(age, int | float) and age > window_s
            key = m.group(1) if m.re.groups else None
            # a later line says it is over (the server answered again)
            over = key in resolved if by_name and key is not None else resolved_any
            if not old and not over:
                hits.append(line)
        if resolving is not None and (r := resolving.search(text)):
            resolved_any = True
            if by_name:
                resolved.add(r.group(1))
    hits.reverse()
    return hits


def _evidence(sig: Signature) -> dict[str, Any]:
    # "catalogue_id", not "signature": the store's redactor hides any value under a name
    # containing "signature" (X-Amz-Signature and the like), and did so to every finding's id
    return {"catalogue_id": sig.id, "family": sig.family, "scope": sig.scope,
            "action": sig.action, "cause": sig.cause, "source": sig.source}


def _item_name(item: Mapping[str, Any]) -> str:
    parts = [f"{key} {item[key]}" for key in _ITEM_NAMES if item.get(key) not in (None, "")]
    return " ".join(parts[:2])


def _fact_finding(sig: Signature, host: str, hits: list[Mapping[str, Any]],
                  facts: Mapping[str, Any]) -> Finding:
    evidence = _evidence(sig)
    named = [name for name in (_item_name(h) for h in hits) if name]
    detail = ""
    if named:
        # what names each entry and what the predicate read of it, not the whole entry (a
        # port's every counter is hundreds of keys)
        read = keys_read(sig.when or {})
        evidence["matched"] = [
            {**{k: h[k] for k in _ITEM_NAMES if h.get(k) not in (None, "")},
             **{k: v for k in read if (v := lookup(h, k)) is not _ABSENT}}
            for h in hits[:MAX_ITEMS]]
        evidence["count"] = len(hits)
        shown = ", ".join(named[:4]) + (f" and {len(named) - 4} more" if len(named) > 4 else "")
        detail = f" ({shown})"
    else:  # a host-level predicate: the facts it read
        read = keys_read(sig.when or {})
        evidence["facts"] = {k: v for k in read if (v := lookup(facts, k)) is not _ABSENT}
    return Finding(sig.id, sig.severity, (host,), f"{host}: {sig.summary}{detail}", sig.probe,
                   evidence)


def _log_finding(sig: Signature, host: str, hits: list[Mapping[str, Any]], stream: str
                 ) -> Finding:
    evidence = _evidence(sig)
    evidence["count"] = len(hits)
    evidence["lines"] = [str(h.get("text", "")) for h in hits[-MAX_EVIDENCE_LINES:]]
    ages = [h["age_s"] for h in hits if isinstance(h.get("age_s"), int | float)]
    if ages:
        evidence["newest_age_s"] = min(ages)
    where = "kernel log" if stream == "kernel" else "job's output"
    return Finding(sig.id, sig.severity, (host,),
                   f"{host}: {sig.summary} ({len(hits)} line(s) in the {where})", sig.probe,
                   evidence)
