"""connectivity across hosts: whose fault is a name that does not resolve, or a master that
does not answer?

A per-host verdict needs a result that differs from the fleet's under the same conditions:

- a name that does not resolve on a host while most hosts that looked it up resolve it is that
  host's (its /etc/hosts, its resolver settings); a name no host resolves is the job's
  configuration (a misspelt MASTER_ADDR or host name, a zone without the names), not any host's;
  hosts split without a majority name no host either;
- a name resolving to another address on a host than on most hosts is that host's
  (name-resolution-inconsistent needs a real different address: a lookup that timed out is no
  address at all);
- a lookup that timed out or failed for another reason than "not found" is slow, not measured;
- MASTER_ADDR:MASTER_PORT refused, unreachable or silent from a host while most hosts connect is
  that host's path; every host refused, or none answered, is the master (nothing listening yet,
  a firewall in front of it): no host is named.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from probes.base import Context, finding, majority_groups
from probes.hostfold import fold_hosts
from probes.model import Finding

NAME = "connectivity"
# master_result values that are a TCP answer (the others: the name, not the path, failed)
TCP_RESULTS = ("connected", "refused", "unreachable", "timeout", "failed")
_TCP_WORDS = {"refused": "connection refused", "unreachable": "no route / unreachable",
              "timeout": "no answer (timed out twice)", "failed": "connection failed"}


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    return _names(facts_by_host) + _slow(facts_by_host) + _master(facts_by_host)


def _majority(count: int, of: int) -> bool:
    return count * 2 > of


def _names(facts_by_host: dict[str, dict[str, Any]]) -> list[Finding]:
    asked: dict[str, dict[str, str | None]] = {}
    for host, facts in facts_by_host.items():
        for name, addrs in (facts.get("resolved") or {}).items():
            asked.setdefault(name, {})[host] = addrs
    failed: dict[tuple[str, ...], dict[str, str]] = {}
    nowhere: dict[str, list[str]] = {}
    split: dict[str, dict[str, list[str]]] = {}
    odd: dict[tuple[str, ...], dict[str, Any]] = {}
    no_majority: dict[str, dict[str, list[str]]] = {}
    for name in sorted(asked):
        answers = asked[name]
        ok = {h: a for h, a in answers.items() if a}
        missing = tuple(sorted(h for h, a in answers.items() if a is None))
        if missing and not ok:
            nowhere[name] = list(missing)
        elif missing and _majority(len(ok), len(answers)):
            failed.setdefault(missing, {})[name] = f"resolves on {len(ok)} of {len(answers)}"
        elif missing:
            split[name] = {"resolves": sorted(ok), "does_not": list(missing)}
        if len(ok) < 2:
            continue
        majority, groups = majority_groups(ok)
        if len(groups) < 2:
            continue
        if _majority(len(groups[majority]), len(ok)):
            off = tuple(sorted(h for h, a in ok.items() if a != majority))
            entry = odd.setdefault(off, {})
            entry[name] = {"majority": majority, "odd": {h: ok[h] for h in off[:10]}}
        else:
            no_majority[name] = {addr: sorted(hs) for addr, hs in groups.items()}
    findings = []
    for hosts, names in failed.items():
        findings.append(finding(
            "name-resolution-failed", hosts,
            f"{len(names)} peer name(s) do not resolve on {fold_hosts(hosts)} while most hosts "
            f"that looked them up do: {', '.join(list(names)[:8])}", NAME,
            names=list(names)[:20], resolved_elsewhere=dict(list(names.items())[:20])))
    if nowhere:
        askers = sorted({h for hs in nowhere.values() for h in hs})
        findings.append(finding(
            "name-resolution-failed", [],
            f"{len(nowhere)} name(s) resolve on no host that looked them up "
            f"({fold_hosts(askers)}): {', '.join(list(nowhere)[:8])} - the job's "
            "configuration (a misspelt MASTER_ADDR or host name, names missing from DNS or "
            "/etc/hosts everywhere), not any host's", NAME,
            names=list(nowhere)[:20], scope="job", asked_on=len(askers)))
    for name, sides in list(split.items())[:5]:
        findings.append(finding(
            "name-resolution-failed", [],
            f"{name} resolves on {fold_hosts(sides['resolves'])} but not on "
            f"{fold_hosts(sides['does_not'])}: no majority, so no host is named", NAME,
            names=[name], resolves=sides["resolves"], does_not=sides["does_not"]))
    for hosts, entry in odd.items():
        first = next(iter(entry))
        findings.append(finding(
            "name-resolution-inconsistent", hosts,
            f"{len(entry)} name(s) resolve differently on {len(hosts)} host(s) than on most "
            f"hosts that looked them up (e.g. {first} -> "
            f"{next(iter(entry[first]['odd'].values()))} instead of "
            f"{entry[first]['majority']})", NAME,
            names=dict(list(entry.items())[:5]), names_count=len(entry)))
    for name, groups in list(no_majority.items())[:5]:
        findings.append(finding(
            "name-resolution-inconsistent", [],
            f"{name} resolves to different addresses with no majority: "
            + "; ".join(f"{addr} on {fold_hosts(hs)}" for addr, hs in groups.items())
            + " - no host is named", NAME, names={name: groups}, names_count=1))
    return findings


def _slow(facts_by_host: dict[str, dict[str, Any]]) -> list[Finding]:
    """Lookups that timed out or failed temporarily: not measured, named once for the fleet."""
    slow = {h: f["unmeasured_names"] for h, f in facts_by_host.items()
            if f.get("unmeasured_names")}
    if not slow:
        return []
    names = sorted({n for per in slow.values() for n in per})
    reasons = Counter(why for per in slow.values() for why in per.values())
    everywhere = len(slow) == len(facts_by_host) and all(
        not f.get("resolved") for f in facts_by_host.values())
    hosts = sorted(slow)
    why = (f"{sum(reasons.values())} lookup(s) gave no answer ("
           + "; ".join(f"{n}x {r}" for r, n in reasons.most_common(3)) + ")"
           + (": no host got any answer - the name service (DNS) is slow or down for the "
              "whole job, not any host" if everywhere and len(slow) > 1 else "")
           + "; slow, not measured: not evidence that a name does not resolve")
    return [finding(
        "name-resolution-slow", hosts,
        f"peer name resolution of {len(names)} name(s) not measured on {fold_hosts(hosts)}: "
        f"{why}", NAME, what="peer name resolution", why=why, names=names[:20],
        per_host={h: sorted(slow[h])[:5] for h in hosts[:10]})]


def _master(facts_by_host: dict[str, dict[str, Any]]) -> list[Finding]:
    results = {h: f["master_result"] for h, f in facts_by_host.items()
               if f.get("master_result") in TCP_RESULTS}
    failed = {h: r for h, r in results.items() if r != "connected"}
    if not failed:
        return []
    connected = sorted(h for h, r in results.items() if r == "connected")
    first = facts_by_host[min(failed)]
    addr, port = first.get("master_addr"), first.get("master_port")
    where = f"{addr}:{port}"
    by_kind: dict[str, list[str]] = {}
    for host, result in sorted(failed.items()):
        by_kind.setdefault(result, []).append(host)
    breakdown = "; ".join(f"{_TCP_WORDS[k]} on {fold_hosts(hs)}" for k, hs in by_kind.items())
    evidence: dict[str, Any] = {"master_addr": addr, "master_port": port,
                                "method": first.get("method"),
                "results": dict(sorted(failed.items())[:20]),
                "rc": {h: facts_by_host[h].get("tcp_rc") for h in sorted(failed)[:20]},
                "connected": len(connected)}
    if connected and _majority(len(connected), len(results)):
        return [finding(
            "master-unreachable", failed,
            f"{where} is not reachable over TCP from {fold_hosts(failed)} while "
            f"{len(connected)} of {len(results)} host(s) connect: {breakdown}"
            + (" (exit status 124: no answer within 5 s, twice)" if "timeout" in by_kind
               else ""), NAME, **evidence)]
    if set(by_kind) == {"timeout"} and not connected:
        cause = ("no host got an answer within 5 s (tried twice): nothing reachable listens "
                 "there yet, or a firewall in front of the master drops the port")
    elif set(by_kind) == {"refused"} and not connected:
        cause = ("every host was refused: nothing listens on the port (rank 0 has not started "
                 "its store, or MASTER_ADDR/MASTER_PORT name the wrong place)")
    else:
        cause = (f"{len(connected)} of {len(results)} host(s) connect ({breakdown}): not a "
                 "majority, so the master's side is at fault rather than any one host's path")
    return [finding("master-unreachable", [],
                    f"{where} is not reachable over TCP from {len(failed)} host(s): {cause}; "
                    "no host is named", NAME, scope="job", **evidence)]
