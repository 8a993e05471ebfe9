"""Host lists folded for humans: ``gpu[001-031]`` instead of thirty-one names.

One helper for every layer (probe messages, the fleet's errors, terminal and post-mortem
reports, the TUI), so a host list reads the same everywhere. It lives in ``probes``, the
bottom layer, because probe checks print host lists too and probes import nothing above
them. The folding itself is python-hostlist's ``collect_hostlist``, the inverse of the
expansion every host expression goes through. A name it cannot represent (one holding ``[``,
``]`` or ``,``) must not take a report down: the list then falls back to its sorted names,
comma-separated.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import hostlist

from .model import Finding


def fold_hosts(names: Iterable[str], empty: str = "") -> str:
    """``gpu[001-031],login1`` for *names* (any order, duplicates dropped); *empty* for none."""
    names = list(names)
    if not names:
        return empty
    try:
        return str(hostlist.collect_hostlist(names))
    except hostlist.BadHostlist:
        return ",".join(sorted(set(names)))


def fold_counted(names: Iterable[str], empty: str = "-") -> str:
    """``gpu[001-031] (31)``: the folded list and how many hosts, as ``clush -b`` heads a
    group; *empty* for none."""
    names = list(names)
    return f"{fold_hosts(names)} ({len(names)})" if names else empty


FoldKey = tuple[str, str, str, str]  # (code, severity, probe, message without its hosts)


def fold_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Findings that say the same thing about different hosts, as one finding per code and
    message: ``nccl-socket-transport`` on 64 hosts is one line naming ``gpu[001-064] (64)``.

    Messages name their host ("... although gpu003 has RDMA HCAs"); the name is taken out
    before comparing and the folded host list put in its place. Each host's evidence is kept
    under ``per_host`` (a finding that stands alone keeps its evidence as it is). Order: first
    appearance."""
    return [folded for _, folded in fold_groups((fold_key(f), f) for f in findings)]


def fold_key(finding: Finding) -> FoldKey:
    """What two findings must share to fold into one: code, severity, probe, and the message
    with its host names taken out."""
    template = finding.message
    for host in finding.hosts:
        if host in template:  # most messages name no host: no pattern needed
            template = _host_word(host).sub("\0", template)
    return (finding.code, finding.severity, finding.probe, template)


def fold_groups(keyed: Iterable[tuple[FoldKey, Finding]]) -> list[tuple[FoldKey, Finding]]:
    """``fold_findings`` for findings whose ``fold_key`` is already known (a view that keeps
    them as they arrive), each folded finding with its key: the key stays the same as more
    hosts join the group, so a selection can follow it."""
    groups: dict[FoldKey, list[Finding]] = {}
    for key, finding in keyed:
        groups.setdefault(key, []).append(finding)
    out = []
    for key, members in groups.items():
        if len(members) == 1:
            out.append((key, members[0]))
            continue
        code, severity, probe, template = key
        hosts = tuple(dict.fromkeys(h for f in members for h in f.hosts))
        per_host = {h: f.evidence for f in members for h in (f.hosts or ("",))}
        out.append((key, Finding(code, severity, hosts,
                                 template.replace("\0", fold_hosts(hosts)), probe,
                                 {"per_host": per_host})))
    return out


@functools.lru_cache(maxsize=4096)
def _host_word(host: str) -> re.Pattern[str]:
    """*host* as a whole word: gpu1 inside gpu10 or gpu1.example is not gpu1. Kept per host:
    ``re``'s own cache holds 512 patterns, so a report over a larger fleet recompiled every
    host's pattern per finding, and pushed the probes' parsing patterns out of it too."""
    return re.compile(rf"(?<![\w.-]){re.escape(host)}(?![\w-]|\.\w)")
