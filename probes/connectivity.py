"""connectivity: can every host resolve its peers and reach the rendezvous master over TCP?

A job that hangs at init ("store->get('0') got error: Socket Timeout", RendezvousTimeoutError)
is very often one host whose DNS or /etc/hosts disagrees with the others, or a firewall between
a host and MASTER_ADDR:MASTER_PORT. Each host resolves the job's host names (the provider passes
them as params.peers) with ``getent hosts`` and opens one TCP connection to the master.

MASTER_ADDR/MASTER_PORT come from params, else from the environment of the running training
processes (found like the nccl probe finds them).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    finding,
    fleet_minority,
    not_measured,
    script,
    split_sections,
)
from probes.model import Finding
from probes.nccl import training_pids_sh
from probes.parsers import ParseError

NAME = "connectivity"

MAX_PEERS = 256
PARALLEL = 16  # getent lookups at once: bounded DNS load, at most ~MAX_PEERS/PARALLEL*3 s
_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


def _peers(params: Mapping[str, Any]) -> list[str]:
    peers = params.get("peers") or []
    if isinstance(peers, str):
        peers = peers.replace(",", " ").split()
    names = [str(p) for p in peers]
    master = params.get("master_addr")
    if master:
        names.append(str(master))
    return [n for n in dict.fromkeys(names) if _NAME_OK.match(n)][:MAX_PEERS]


def command(params: Mapping[str, Any]) -> str:
    addr = shlex.quote(str(params.get("master_addr") or ""))
    port = shlex.quote(str(params.get("master_port") or ""))
    pids = training_pids_sh(params.get("process_pattern"))
    master = (
        f"ma={addr}; mp={port}; src=params; "
        "if [ -z \"$ma\" ] || [ -z \"$mp\" ]; then src=none; "
        f"for p in $({pids}); do "
        "[ -r /proc/$p/environ ] || continue; "
        "a=$(tr '\\0' '\\n' < /proc/$p/environ | sed -n 's/^MASTER_ADDR=//p' | head -n 1); "
        "b=$(tr '\\0' '\\n' < /proc/$p/environ | sed -n 's/^MASTER_PORT=//p' | head -n 1); "
        "if [ -n \"$a\" ] && [ -n \"$b\" ]; then ma=${ma:-$a}; mp=${mp:-$b}; src=environ; "
        "break; fi; done; fi; "
        "echo \"source $src\"; echo \"master_addr $ma\"; echo \"master_port $mp\"; "
        "case \"$mp\" in ''|*[!0-9]*) mp=;; esac; "
        "if [ -n \"$ma\" ] && [ -n \"$mp\" ]; then "
        "if command -v bash >/dev/null 2>&1; then m='bash /dev/tcp'; "
        "timeout 5 bash -c 'exec 3<>\"/dev/tcp/$1/$2\"' _ \"$ma\" \"$mp\" 2>&1; r=$?; "
        "elif command -v nc >/dev/null 2>&1; then m='nc -z'; "
        "timeout 5 nc -z -w 3 \"$ma\" \"$mp\" 2>&1; r=$?; "
        "else m=none; r=; fi; echo \"method $m\"; echo \"tcp_rc $r\"; fi"
    )
    names = " ".join(shlex.quote(n) for n in _peers(params))
    resolve = (
        f"i=0; for n in {names}; do "
        "( r=$(timeout 3 getent hosts \"$n\"); rc=$?; "
        "echo \"name $n rc=$rc $(echo \"$r\" | awk '{print $1}' | sort -u | tr '\\n' ' ')\" ) & "
        f"i=$((i+1)); if [ $((i % {PARALLEL})) -eq 0 ]; then wait; fi; done; wait"
    ) if names else "echo 'no peers'"
    return script([("master", master), ("resolve", resolve)],
                  {"master": "timeout", "resolve": "getent"})


_KV = re.compile(r"^(source|master_addr|master_port|method|tcp_rc)(?: (.*))?$")
_NAME = re.compile(r"^name (\S+) rc=(\d+)\s*(.*)$")


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "master" not in sections or "resolve" not in sections:
        raise ParseError("connectivity: no master/resolve section (not this probe's output)")
    facts: dict[str, Any] = {
        "master_addr": None, "master_port": None, "master_reachable": None,
        "unresolved_peers": None, "resolved": None, "master_source": None, "method": None,
        "tcp_rc": None, "missing": []}
    master = sections["master"]
    if master.missing:
        facts["missing"].append("timeout")
    else:
        values = {}
        for line in master.text.splitlines():
            if m := _KV.match(line.strip()):
                values[m.group(1)] = (m.group(2) or "").strip()
        facts["master_source"] = values.get("source") if values.get("source") != "none" else None
        facts["master_addr"] = values.get("master_addr") or None
        port = values.get("master_port") or ""
        facts["master_port"] = int(port) if port.isdecimal() else None
        method = values.get("method")
        facts["method"] = method if method and method != "none" else None
        rc = values.get("tcp_rc") or ""
        facts["tcp_rc"] = int(rc) if rc.lstrip("-").isdecimal() else None
        if facts["method"] and facts["tcp_rc"] is not None:
            facts["master_reachable"] = facts["tcp_rc"] == 0
    resolve = sections["resolve"]
    if resolve.missing:
        facts["missing"].append("getent")
    else:
        resolved: dict[str, str | None] = {}
        for line in resolve.text.splitlines():
            if m := _NAME.match(line.strip()):
                addrs = sorted(m.group(3).split())
                resolved[m.group(1)] = ",".join(addrs) if m.group(2) == "0" and addrs else None
        facts["resolved"] = dict(sorted(resolved.items()))
        facts["unresolved_peers"] = sorted(n for n, a in resolved.items() if a is None)
    return facts


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    if facts.get("unresolved_peers") is None:
        findings.append(not_measured(NAME, host, "peer name resolution",
                                     "getent is missing"))
    elif facts["unresolved_peers"]:
        names = facts["unresolved_peers"]
        findings.append(finding(
            "name-resolution-failed", [host],
            f"{len(names)} peer name(s) do not resolve on {host}: {', '.join(names[:8])}",
            NAME, names=names[:20]))
    addr, port = facts.get("master_addr"), facts.get("master_port")
    if "timeout" in (facts.get("missing") or []):
        findings.append(not_measured(NAME, host, "MASTER_ADDR reachability",
                                     "the timeout command is missing"))
    elif not addr or port is None:
        findings.append(not_measured(
            NAME, host, "MASTER_ADDR reachability",
            "MASTER_ADDR/MASTER_PORT neither given (params master_addr, master_port) nor found "
            "in a training process's environment"))
    elif facts.get("method") is None:
        findings.append(not_measured(NAME, host, "MASTER_ADDR reachability",
                                     "neither bash nor nc is available to open a TCP connection"))
    elif facts.get("master_reachable") is False:
        findings.append(finding(
            "master-unreachable", [host],
            f"{addr}:{port} is not reachable over TCP from {host} "
            f"({facts['method']} exit status {facts.get('tcp_rc')}"
            f"{', 124 = no answer within 5 s' if facts.get('tcp_rc') == 124 else ''})",
            NAME, master_addr=addr, master_port=port, method=facts["method"],
            rc=facts.get("tcp_rc")))
    return findings


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    """One finding per set of hosts that resolve some names differently from the majority."""
    by_odd: dict[tuple[str, ...], dict[str, Any]] = {}
    names = sorted({n for f in facts_by_host.values() for n in (f.get("resolved") or {})})
    for name in names:
        values = {h: f["resolved"][name] for h, f in facts_by_host.items()
                  if (f.get("resolved") or {}).get(name)}
        minority = fleet_minority(values)
        if not minority:
            continue
        odd = tuple(sorted(minority.hosts))
        entry = by_odd.setdefault(odd, {"names": {}, "hosts": odd})
        entry["names"][name] = {"majority": minority.majority,
                                "odd": {h: values[h] for h in odd[:10]}}
    findings = []
    for odd, entry in by_odd.items():
        names_ = list(entry["names"])
        first = entry["names"][names_[0]]
        findings.append(finding(
            "name-resolution-inconsistent", odd,
            f"{len(names_)} name(s) resolve differently on {len(odd)} host(s) than on the rest "
            f"(e.g. {names_[0]} -> {next(iter(first['odd'].values()))} instead of "
            f"{first['majority']})",
            NAME, names=dict(list(entry["names"].items())[:5]), names_count=len(names_)))
    return findings


PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=60.0)
