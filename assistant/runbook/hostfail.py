"""Hosts a probe could not run on, turned into findings: no data is never a pass.

Three different things look alike in a transport's result and must not be confused, because an
on-call engineer drains nodes on what comes out of here:

- **diag cannot reach the fleet.** Every host (or most) failed *the same way on diag's side*:
  names do not resolve, no route, refused everywhere, the login or the host keys are refused,
  the jump host is down. That is the operator's VPN, inventory, agent or known_hosts — not a
  dead fleet — so one ``fleet-unreachable`` finding says so, and nothing is accused.
- **A host did not let diag in** (refused, no route, connect or banner timeout while its peers
  answer): ``host-unreachable``, the node may be down. Failures that are about diag's access
  and not the node (a name that does not resolve, login or host key refused) are
  ``host-access-failed``, never evidence the node is down.
- **A host let diag in, then the probe hung.** That is evidence about the host, and the
  section that was running says what hung: the catalog maps it to a code (``gpu-driver-hung``
  for nvidia-smi, ``filesystem-hung`` for stat/df on the checkpoint mount), else
  ``probe-hung``. Unless its processes were only slow (none blocked in the kernel) on a host
  whose CPUs were saturated, or had run there for under half the time diag gave them
  (probes/hangstate.py): then it is ``not-measured``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from assistant.fleet.lagclock import CLIENT_BEHIND
from probes.catalog import load_catalog
from probes.hangstate import NOT_MEASURED
from probes.hostfold import fold_counted
from probes.model import Finding, HostResult, ProbeOutcome

# How a failure that happened before login reads, by family: the words of diag's own
# transports (assistant/fleet/sshconnect.py, sshauth.py) and OpenSSH's, lower-cased.
_FAMILY_WORDS = (
    ("client", (CLIENT_BEHIND.lower(),)),  # first: its reasons also name the phase that ran out
    ("name", ("dns lookup failed", "could not resolve", "name or service not known",
              "temporary failure in name resolution", "nodename nor servname")),
    ("jump", ("jump host",)),
    ("refused", ("connection refused",)),
    ("network", ("no route to host", "network unreachable", "network is unreachable",
                 "connect timeout", "connect timed out", "connection timed out")),
    ("ssh", ("ssh banner", "ssh handshake", "not an ssh server", "connection reset",
             "connection closed")),
    ("deadline", ("deadline",)),
)

# Per family: what failed, in the operator's words, and what to check on diag's side.
FAMILIES: dict[str, tuple[str, str]] = {
    "name": ("host names do not resolve",
             "the host names in --hosts / the inventory (a typo, a stale inventory), the DNS "
             "servers of the machine diag runs on (resolvectl status, getent hosts NAME), the "
             "VPN that serves the cluster's DNS"),
    "network": ("no network path to the hosts",
                "the VPN or the route to the management network (ip route get ADDRESS, "
                "ping ADDRESS), the addresses in the inventory, a firewall between diag and the "
                "cluster"),
    "refused": ("every host refuses the SSH connection",
                "the SSH port in the inventory or ssh_config (port:, Port), whether the cluster "
                "is reached through a jump host (ProxyJump) from here, a firewall sending "
                "resets"),
    "ssh": ("the SSH handshake fails on every host",
            "a proxy or middlebox on diag's side, the port in the inventory (is it SSH?), "
            "connect/banner timeouts too short for this network (--connect-timeout)"),
    "jump": ("the jump host does not get diag through",
             "the jump host itself (ssh JUMP), its ProxyJump entry in the inventory or "
             "ssh_config, its host key and your login there"),
    "login": ("every host refuses diag's login",
              "the user and identity file in the inventory, ssh-agent (ssh-add -l), "
              "whether the key is in the hosts' authorized_keys (ssh -v HOST)"),
    "host-key": ("every host key is refused",
                 "known_hosts (the file in the inventory's defaults, ~/.ssh/known_hosts): "
                 "unknown keys need --accept-new-host-keys once, changed keys need checking "
                 "with the cluster's admins (ssh-keygen -R HOST after verifying)"),
    "lost": ("every connection dropped while the commands ran",
             "the VPN or network of the machine diag runs on (it dropped all sessions at "
             "once), then rerun"),
    "deadline": ("the step's deadline ended every host before it answered",
                 "--deadline and --concurrency against the fleet's size (a 512-host fan-out "
                 "at 64 at a time needs 8 rounds of --timeout)"),
}
# Families that say nothing about the node even for a single host: the name, the login, the
# host key and the jump host are all on diag's side of the connection.
CLIENT_SIDE = frozenset({"name", "login", "host-key", "jump"})
# Pre-login failures that are about diag's access, never evidence the node is down.
_ACCESS = frozenset({"name", "login", "host-key"})


def failure_family(result: HostResult) -> str | None:
    """The family of a host's failure to run the probe (see FAMILIES); None for hosts that
    answered (ok, parse-error), that hung after login, or that were cancelled."""
    if result.state in ("ok", "parse-error", "cancelled"):
        return None
    if result.phase == "command":  # diag got in: a hang is about the host, a drop may not be
        return None if result.state == "timeout" else "lost"
    if result.state == "auth-failed":
        return "login"
    if result.state == "host-key-refused":
        return "host-key"
    reason = result.reason.lower()
    for family, words in _FAMILY_WORDS:
        if any(w in reason for w in words):
            return family
    return "other"


def fleet_unreachable(hosts: Mapping[str, HostResult], share: float,
                      fleet_size: int = 0) -> tuple[str, list[str]] | None:
    """(family, hosts) when diag failed to get into (nearly) every host the same way.

    The rule of DESIGN.md ("when every host, or most, fails the same way on the client side,
    the walk concludes that diag cannot reach the fleet"): the largest family of pre-login
    failures covers at least *share* of the walk's hosts (*fleet_size*; a step aimed at two
    suspects out of 64 does not speak for the fleet) and two of them — or, in a one-host walk,
    the failure is one that is always on diag's side (name, login, host key, jump host).
    """
    total = max(len(hosts), fleet_size)
    families: dict[str, list[str]] = {}
    for host, result in hosts.items():
        family = failure_family(result)
        if family is not None and family not in ("other", "client"):
            families.setdefault(family, []).append(host)
    if not families or not total:
        return None
    family, failed = max(families.items(), key=lambda item: len(item[1]))
    if len(failed) < math.ceil(share * total):
        return None
    if len(failed) < 2 and family not in CLIENT_SIDE:
        return None
    return family, sorted(failed)


def _reasons(outcome: ProbeOutcome, hosts: list[str]) -> dict[str, str]:
    return {h: f"{outcome.hosts[h].state}: {outcome.hosts[h].reason}".rstrip(": ")
            for h in hosts}


def _waited(result: HostResult) -> float:
    """How long a timed-out command was given: its limit as the transport said it ("did not
    finish in 900s"), else how long it ran."""
    said = re.search(r"in ([0-9.]+)s\b", result.reason or "")
    return float(said.group(1)) if said else float(result.duration_s)


def _grouped(reasons: Mapping[str, str], limit: int = 3) -> str:
    """'no route to host on gpu[003-004] (2); connection refused on gpu009 (1)': each distinct
    reason with the hosts that gave it, so every front end shows why, not only how many."""
    by_reason: dict[str, list[str]] = {}
    for host, reason in reasons.items():
        by_reason.setdefault(reason.split(": ", 1)[-1] or reason, []).append(host)
    parts = [f"{reason} on {fold_counted(hosts)}" for reason, hosts in
             sorted(by_reason.items(), key=lambda item: -len(item[1]))]
    more = len(parts) - limit
    return "; ".join(parts[:limit]) + (f"; and {more} other reason(s)" if more > 0 else "")


def add_host_failure_findings(outcome: ProbeOutcome,
                              thresholds: Mapping[str, Any] | None = None,
                              fleet_size: int = 0) -> None:
    """Append the findings for *outcome*'s hosts that could not be probed (see module doc).
    *fleet_size* is the number of hosts of the walk (the step may run on fewer)."""
    from probes.base import default_thresholds

    thresholds = thresholds or default_thresholds()
    catalog = load_catalog()
    codes = catalog.codes
    present = {f.code for f in outcome.findings}
    new: list[Finding] = []

    def add(code: str, hosts: list[str], message: str, **evidence: Any) -> None:
        if hosts and code not in present:
            new.append(Finding(code, codes[code].severity, tuple(sorted(hosts)), message,
                               outcome.probe, evidence))

    total = max(len(outcome.hosts), fleet_size)
    spared: set[str] = set()
    fleet = fleet_unreachable(outcome.hosts, float(thresholds["fleet_unreachable_share"]),
                              fleet_size)
    if fleet is not None:
        family, hosts = fleet
        what, check = FAMILIES[family]
        reasons = _reasons(outcome, hosts)
        add("fleet-unreachable", hosts,
            f"diag cannot reach the fleet: {len(hosts)} of {total} host(s) failed the same way "
            f"on diag's side ({what}): {_grouped(reasons)}. Check {check}.",
            family=family, check=check, reasons=reasons)
        spared.update(hosts)

    # Hosts that hung after login: what hung, by the section that was running. A test that
    # loads the node and did not finish (its time limit ended it, or the step's deadline came
    # before it started) proves nothing: active-test-ended, which acceptance stops a node on
    # (probe-hung and not-measured, the read-only probes' warnings, let it be resumed).
    active = outcome.probe in catalog.probes and catalog.probes[outcome.probe].active
    unfinished = "active-test-ended" if active else "probe-hung"
    hung: dict[str, list[str]] = {}
    slow: list[str] = []
    hangs = catalog.probes[outcome.probe].hangs if outcome.probe in catalog.probes else {}
    for host, result in outcome.hosts.items():
        if result.state == "timeout" and result.phase == "command":
            # not stuck (hangstate.py); a test that loads the node and did not finish fails its
            # level whatever the reason (acceptance never resumes a node on it)
            if not active and result.facts.get("hang_verdict") in NOT_MEASURED:
                slow.append(host)
                continue
            code = hangs[result.section].code if result.section in hangs else unfinished
            hung.setdefault(code, []).append(host)
    if slow:
        add("not-measured", slow,
            f"{len(slow)} host(s) let diag in, but the {outcome.probe} probe did not finish in "
            "its time there and none of its processes stayed blocked in the kernel: slow, not "
            "stuck (the host's CPUs saturated, diag slow to start it, or a --timeout / "
            "--deadline shorter than the probe is given by default), so not measured, "
            f"not a hang: {_grouped(_reasons(outcome, slow))}", reasons=_reasons(outcome, slow))
        spared.update(slow)
    for code, hosts in hung.items():
        sections = {h: outcome.hosts[h].section for h in hosts}
        where: dict[str, list[str]] = {}
        for host, section in sections.items():
            label = (f"{hangs[section].what} (section '{section}')" if section in hangs else
                     f"section '{section}'" if section else "between sections")
            where.setdefault(label, []).append(host)
        if code == "active-test-ended":  # the test's own words: what it cost, that it ended
            waited = max(_waited(outcome.hosts[h]) for h in hosts)
            message = (f"{outcome.probe} hung: no result in {waited:.0f} s, killed (its process "
                       f"group on the node) on {fold_counted(hosts)}, in "
                       + "; ".join(where) + "; the level fails and the node stays drained")
        else:
            message = (f"{len(hosts)} host(s) let diag in, then the {outcome.probe} probe hung "
                       "there: " + "; ".join(f"in {label} on {fold_counted(hs)}"
                                             for label, hs in where.items()))
        add(code, hosts, message, reasons=_reasons(outcome, hosts), sections=sections)
        spared.update(hosts)

    groups: dict[str, list[str]] = {}
    for host, result in outcome.hosts.items():
        if host in spared:
            continue
        kind = failure_family(result)
        if kind in _ACCESS:
            groups.setdefault("host-access-failed", []).append(host)
        elif kind == "deadline":  # diag's own limit ended the step before this host's turn
            groups.setdefault("not-reached", []).append(host)
        elif kind == "client":  # the login ran out of time while diag itself was behind
            groups.setdefault("client-behind", []).append(host)
        elif kind is not None:
            groups.setdefault("host-unreachable", []).append(host)
        elif result.state == "cancelled":
            groups.setdefault("not-measured", []).append(host)
        elif result.state == "parse-error":
            groups.setdefault("probe-parse-error", []).append(host)
    words = {"host-unreachable": "did not let diag in (the node may be down)",
             "host-access-failed": "could not be reached for reasons on diag's side (name, "
                                   "login or host key), which say nothing about the node",
             "not-measured": "were cancelled", "probe-parse-error": "gave output that could "
                                                                    "not be read",
             "not-reached": "were not reached before the step's deadline (diag's own limit, "
                            "not the hosts': --deadline and --concurrency against the fleet's "
                            "size), so they are not measured",
             "client-behind": "ran out of diag's login time while diag's own process was "
                              "behind (busy or starved of CPU on the machine it runs on): "
                              "diag's limit, not the hosts', so they are not measured"}
    for group, hosts in groups.items():
        reasons = _reasons(outcome, hosts)
        code = ("active-test-ended" if active else "not-measured") if group == "not-reached" \
            else "not-measured" if group == "client-behind" else group
        add(code, hosts, f"{len(hosts)} host(s) {words[group]} during {outcome.probe}: "
            f"{_grouped(reasons)}", reasons=reasons)
    outcome.findings.extend(new)
