"""connectivity: can every host resolve its peers and reach the rendezvous master over TCP?

A job that hangs at init ("store->get('0') got error: Socket Timeout", RendezvousTimeoutError)
is very often one host whose DNS or /etc/hosts disagrees with the others, or a firewall between
a host and MASTER_ADDR:MASTER_PORT. Each host resolves a bounded set of the job's host names
with ``getent ahosts`` and opens one TCP connection to the master.

diag's own limits are never a host's fault. Name lookups go to a service every host shares
(the site's DNS), so the load is bounded for the fleet as a whole, not per host: a host
resolves MASTER_ADDR, itself and its neighbours in the sorted host list (``NEIGHBOURS``), so
every name is looked up by about ``NEIGHBOURS + 1`` hosts and the fleet's lookups grow
linearly; and the fleet keeps about ``LOOKUP_BUDGET`` lookups in flight (each host runs
``max(1, LOOKUP_BUDGET // hosts)`` at once; the fan-out's host concurrency bounds the rest). A
lookup that timed out or failed for another reason than "not found" is *slow, not measured*,
never "does not resolve", and which host is at fault is decided across hosts
(probes/connectivity_fleet.py): a result is a host's only when it differs from what the other
hosts got under the same conditions.

MASTER_ADDR/MASTER_PORT come from params, else from the environment of the running training
processes (found like the nccl probe finds them).
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Mapping
from typing import Any

from probes.base import Context, Probe, guard_parse, not_measured, script, split_sections
from probes.connectivity_fleet import TCP_RESULTS, check_fleet
from probes.model import Finding
from probes.nccl import training_pids_sh
from probes.parsers import ParseError

NAME = "connectivity"

MAX_PEERS = 4096
# Fleet-wide name lookups in flight (diag policy). A site resolver pair serves every node of the
# cluster besides diag; 16 lookups at once on each of 8 hosts (64) already made /etc/hosts
# lookups time out on a healthy loopback fleet, and 512 hosts x 16 would put 8,192 queries on
# the site's DNS at once. 32 keeps diag's burst below what one resolver answers in a few
# milliseconds; each host runs max(1, LOOKUP_BUDGET // hosts) lookups at once.
LOOKUP_BUDGET = 32
# Names of the sorted host list each host resolves besides MASTER_ADDR and itself: the
# NEIGHBOURS // 2 before it and after it (wrapping), so every name is looked up by itself and
# NEIGHBOURS other hosts, enough for a majority to say which host is off (diag policy).
NEIGHBOURS = 4
LOOKUP_TIMEOUT_S = 3  # per getent; glibc's resolver waits 5 s per server (resolv.conf(5))
TCP_TIMEOUT_S = 5
_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _valid(names: Any) -> list[str]:
    if isinstance(names, str):
        names = names.replace(",", " ").split()
    return [n for n in dict.fromkeys(str(p) for p in names or []) if _NAME_OK.match(n)]


def lookup_plan(params: Mapping[str, Any]) -> tuple[list[str], int, int]:
    """The names this host resolves, how many at once, and the fleet size it was planned for.

    MASTER_ADDR first, then the host itself, then its neighbours in the sorted host list. An
    address needs no lookup. Without ``params["host"]`` (a caller that does not build one
    script per host) the first names of the sorted list stand in for the neighbours.
    """
    peers = sorted(_valid(params.get("peers")))[:MAX_PEERS]
    hosts = max(1, len(peers))
    names: list[str] = []
    master = _valid([params.get("master_addr") or ""])
    names += master
    host = str(params.get("host") or "")
    if host in peers:
        i = peers.index(host)
        names.append(host)
        for step in range(1, NEIGHBOURS // 2 + 1):
            names += [peers[(i + step) % len(peers)], peers[(i - step) % len(peers)]]
    else:
        names += peers[:NEIGHBOURS + 1]
    names = [n for n in dict.fromkeys(names) if not _is_address(n)]
    return names, max(1, LOOKUP_BUDGET // hosts), hosts


def _master_sh(params: Mapping[str, Any]) -> str:
    addr = shlex.quote(str(params.get("master_addr") or ""))
    port = shlex.quote(str(params.get("master_port") or ""))
    pids = training_pids_sh(params.get("process_pattern"))
    # A connection that got no answer in TCP_TIMEOUT_S is tried once more before it counts:
    # one slow moment on the host running diag's script is not the host's path to the master.
    connect = (
        "if command -v bash >/dev/null 2>&1; then m='bash /dev/tcp'; "
        f"timeout {TCP_TIMEOUT_S} bash -c 'exec 3<>\"/dev/tcp/$1/$2\"' _ \"$ma\" \"$mp\" 2>&1; "
        "r=$?; "
        "elif command -v nc >/dev/null 2>&1; then m='nc -z'; "
        f"timeout {TCP_TIMEOUT_S} nc -v -z -w 3 \"$ma\" \"$mp\" 2>&1; r=$?; "
        "else m=none; r=; fi; echo \"method $m\"; echo \"tcp_rc $r\"")
    return (
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
        f"{connect}; if [ \"$r\" = 124 ]; then {connect}; fi; fi")


def _resolve_sh(names: list[str], parallel: int, hosts: int) -> str:
    # One lookup: subshell, timeout, getent (no awk/sort per lookup: 16 pipelines at once
    # starved the loopback fleet). ``getent ahosts`` resolves as the job does (getaddrinfo,
    # AF_UNSPEC: c10d and NCCL's bootstrap use getaddrinfo). ``getent hosts`` calls
    # gethostbyname2(AF_INET6) first (glibc nss/getent.c, hosts_keys), so a name /etc/hosts
    # maps to an IPv4 address only still sends an AAAA query to the site's DNS, on every
    # lookup: measured here, that query is what timed out under load; ahosts answers such a
    # name from /etc/hosts alone. getent exits 2 for "not found" and, since glibc sets
    # result = 2 whenever getaddrinfo fails, also for a temporary resolver failure
    # (EAI_AGAIN): a 2 is tried once more a second later before it counts. The answer's words
    # are printed as getent gave them; the parser keeps the addresses.
    quoted = " ".join(shlex.quote(n) for n in names)
    lookup = f"r=$(timeout {LOOKUP_TIMEOUT_S} getent ahosts \"$1\"); rc=$?"
    return (
        f"diag_lookup() {{ {lookup}; t=1; "
        f"if [ $rc -eq 2 ]; then sleep 1; {lookup}; t=2; fi; "
        "n=$1; set -- $r; echo \"name $n rc=$rc tries=$t $*\"; }; "
        f"set -f; set -- {quoted}; "
        "case \"$diag_ma\" in ''|*:*|[0-9]*.[0-9]*.[0-9]*.[0-9]*|*[!A-Za-z0-9._-]*) ;; "
        "*) case \" $* \" in *\" $diag_ma \"*) ;; *) set -- \"$diag_ma\" \"$@\";; esac;; esac; "
        f"echo \"lookups hosts={hosts} names=$# parallel={parallel} "
        f"timeout={LOOKUP_TIMEOUT_S}\"; "
        "i=0; for n in \"$@\"; do diag_lookup \"$n\" & i=$((i+1)); "
        f"if [ $((i % {parallel})) -eq 0 ]; then wait; fi; done; wait")


def command(params: Mapping[str, Any]) -> str:
    names, parallel, hosts = lookup_plan(params)
    # the master section leaves MASTER_ADDR in diag_ma for the resolve section (same shell)
    master = _master_sh(params) + "; diag_ma=$ma"
    return script([("master", master), ("resolve", _resolve_sh(names, parallel, hosts))],
                  {"master": "timeout", "resolve": "getent"})


# --- parse ---------------------------------------------------------------------------------------

_KV = re.compile(r"^(source|master_addr|master_port|method|tcp_rc)(?: (.*))?$")
_NAME = re.compile(r"^name (\S+) rc=(\d+)(?: tries=(\d+))?\s*(.*)$")
_PLAN = re.compile(r"^lookups hosts=(\d+) names=(\d+) parallel=(\d+)")
# What a failed connection printed (bash's redirection error is strerror(errno); nc -v and
# ncat print the same strerror text; gai_strerror for a name bash could not resolve).
_TCP_ERRORS = (
    ("refused", re.compile(r"Connection refused", re.I)),
    ("unreachable", re.compile(r"No route to host|Network is unreachable|Host is unreachable",
                               re.I)),
    ("timeout", re.compile(r"Connection timed out|Operation timed out", re.I)),
    ("name-slow", re.compile(r"Temporary failure in name resolution", re.I)),
    ("name-unresolved", re.compile(r"Name or service not known|No address associated|"
                                   r"host unknown|nodename nor servname", re.I)),
)


def _addresses(words: str) -> list[str]:
    """The addresses among getent's words (address, canonical name, aliases), in order."""
    found = []
    for word in words.split():
        try:
            found.append(str(ipaddress.ip_address(word)))
        except ValueError:
            continue
    return sorted(set(found))


def _lookup_failure(rc: int) -> str:
    if rc == 124:
        return f"no answer within {LOOKUP_TIMEOUT_S} s (timeout)"
    if rc in (126, 127):
        return f"getent could not run (exit status {rc})"
    if rc > 128:
        return f"getent was killed (exit status {rc})"
    return f"getent exit status {rc} (not 2, 'not found')"


def _master(text: str, facts: dict[str, Any]) -> None:
    values: dict[str, str] = {}
    rcs: list[str] = []
    for line in text.splitlines():
        if m := _KV.match(line.strip()):
            if m.group(1) == "tcp_rc":
                rcs.append((m.group(2) or "").strip())
            else:
                values[m.group(1)] = (m.group(2) or "").strip()
    facts["master_source"] = values.get("source") if values.get("source") != "none" else None
    facts["master_addr"] = values.get("master_addr") or None
    port = values.get("master_port") or ""
    facts["master_port"] = int(port) if port.isdecimal() else None
    method = values.get("method")
    facts["method"] = method if method and method != "none" else None
    rc = rcs[-1] if rcs else ""
    facts["tcp_rc"] = int(rc) if rc.lstrip("-").isdecimal() else None
    facts["tcp_tries"] = len(rcs) or None
    if not facts["method"] or facts["tcp_rc"] is None:
        return
    if facts["tcp_rc"] == 0:
        result = "connected"
    elif facts["tcp_rc"] == 124:
        result = "timeout"
    else:
        result = next((kind for kind, pattern in _TCP_ERRORS if pattern.search(text)), "failed")
    facts["master_result"] = result
    facts["master_reachable"] = (result == "connected") if result in TCP_RESULTS else None


def _resolve(text: str, facts: dict[str, Any]) -> None:
    resolved: dict[str, str | None] = {}
    unmeasured: dict[str, str] = {}
    retried: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if m := _PLAN.match(line):
            facts["lookups"] = {"hosts": int(m.group(1)), "names": int(m.group(2)),
                                "parallel": int(m.group(3))}
            continue
        if not (m := _NAME.match(line)):
            continue
        name, rc = m.group(1), int(m.group(2))
        if m.group(3) and int(m.group(3)) > 1:
            retried.append(name)
        addrs = _addresses(m.group(4))
        if rc == 0 and addrs:
            resolved[name] = ",".join(addrs)
        elif rc == 2:  # getent(1): "one or more supplied key could not be found"
            resolved[name] = None
        else:
            unmeasured[name] = _lookup_failure(rc) if rc else "getent printed no address"
    facts["resolved"] = dict(sorted(resolved.items()))
    facts["unresolved_peers"] = sorted(n for n, a in resolved.items() if a is None)
    facts["unmeasured_names"] = dict(sorted(unmeasured.items()))
    facts["retried_names"] = sorted(retried)


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "master" not in sections or "resolve" not in sections:
        raise ParseError("connectivity: no master/resolve section (not this probe's output)")
    facts: dict[str, Any] = {
        "master_addr": None, "master_port": None, "master_reachable": None,
        "master_result": None, "unresolved_peers": None, "resolved": None,
        "unmeasured_names": None, "retried_names": None, "lookups": None,
        "master_source": None, "method": None, "tcp_rc": None, "tcp_tries": None,
        "missing": []}
    if sections["master"].missing:
        facts["missing"].append("timeout")
    else:
        _master(sections["master"].text, facts)
    if sections["resolve"].missing:
        facts["missing"].append("getent")
    else:
        _resolve(sections["resolve"].text, facts)
    return facts


parse = guard_parse(NAME, _parse)


# --- per-host checks: only what could not be measured (verdicts are the fleet's) -----------------

def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    if facts.get("unresolved_peers") is None:
        findings.append(not_measured(NAME, host, "peer name resolution",
                                     "getent is missing"))
    addr, port = facts.get("master_addr"), facts.get("master_port")
    result = facts.get("master_result")
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
    elif result in ("name-unresolved", "name-slow"):
        findings.append(not_measured(
            NAME, host, "MASTER_ADDR reachability",
            f"{addr} did not resolve on {host}"
            + (" (temporary failure in name resolution)" if result == "name-slow" else "")
            + ", so no TCP connection was tried (the name lookups say whose fault that is)"))
    return findings


PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=60.0, per_host=True)
