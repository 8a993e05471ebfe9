"""Benchmark: diag's fan-out vs clush vs pdsh over N loopback sshd hosts.

Three workloads, each on the same fleet, key, known_hosts and concurrency:

1. ``uname -r``: the bare SSH layer;
2. ``diag probe versions``: the whole probe (script, parse, checks) beside clush/pdsh running
   the very same script;
3. a whole runbook: ``diag run hang`` (every probe step, connections reused across steps)
   beside clush running each of the scripts that walk ran, one after the other.

Not a test: run it by hand (as root, with openssh-server installed) to see where the SSH layer
stands against the tools operators already use::

    .venv/bin/python bench/fanout.py            # 32 128 512 hosts
    .venv/bin/python bench/fanout.py 32 128     # chosen sizes

Each size gets a fresh fleet of real sshd (tests/fleet/sshfleet.py). Every tool uses the same
client key and known_hosts, and a concurrency of 64 (diag's default; clush and pdsh via -f).
clush and pdsh reach each host's own port through a generated ssh_config (HostName/Port per
host), which is what they would use on a real fleet too. Timed:

- diag cold: fan_out over a new SSHTransport: TCP connect, key exchange, auth, command;
- diag warm: a second command over the same transport (connections reused: the common case
  inside one runbook session, where several probes hit the same nodes);
- clush -b and pdsh -R ssh: one ssh process per host, as they always do.

Loopback has no network latency, so this measures per-connection CPU cost (key exchange and
process spawning on a 2-core box), not WAN behaviour; on a real network the reuse gap grows.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.fleet.fanout import fan_out  # noqa: E402
from assistant.runbook.engine import Walk  # noqa: E402
from assistant.runbook.library import get_runbook  # noqa: E402
from assistant.runbook.provider import FleetProvider  # noqa: E402
from probes.base import get_probe  # noqa: E402
from tests.fleet import sshfleet  # noqa: E402

COMMAND = "uname -r"
EXPECTED = "5.15.0-105-generic"
CONCURRENCY = 64


def raise_fd_limit() -> int:
    """512 hosts mean ~1500 file descriptors in this process alone (sockets, channel pipes)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def time_diag(fleet: sshfleet.SSHFleet) -> tuple[float, float, int, int]:
    """(cold seconds, warm seconds, ok hosts cold, ok hosts warm)."""
    with fleet.transport(connect_timeout=30.0) as transport:
        start = time.monotonic()
        cold = fan_out(transport, fleet.names, COMMAND, concurrency=CONCURRENCY, timeout=60,
                       deadline=600)
        cold_s = time.monotonic() - start
        start = time.monotonic()
        warm = fan_out(transport, fleet.names, COMMAND, concurrency=CONCURRENCY, timeout=60,
                       deadline=600)
        warm_s = time.monotonic() - start

    def good(results: dict) -> int:
        return sum(r.state == "ok" and r.stdout.strip() == EXPECTED for r in results.values())

    return cold_s, warm_s, good(cold), good(warm)


def probe_script(name: str) -> str:
    """The script diag sends for a probe, exactly as the provider sends it."""
    return f"# diag probe: {name} (read-only)\n{get_probe(name).command({})}"


def time_diag_probe(fleet: sshfleet.SSHFleet, name: str) -> tuple[float, int]:
    """``diag probe NAME``: fan-out, parse and checks, cold connections."""
    with fleet.transport(connect_timeout=30.0) as transport:
        provider = FleetProvider(transport, concurrency=CONCURRENCY, deadline=600)
        start = time.monotonic()
        outcome = provider.run_probe(name, fleet.names, {}, lambda event: None)
        elapsed = time.monotonic() - start
    return elapsed, sum(r.state == "ok" for r in outcome.hosts.values())


def time_diag_runbook(fleet: sshfleet.SSHFleet, runbook: str) -> tuple[float, list[str], int]:
    """A whole walk until its first question or conclusion; returns the probes it ran."""
    with fleet.transport(connect_timeout=30.0) as transport:
        provider = FleetProvider(transport, concurrency=CONCURRENCY, deadline=600)
        walk = Walk(get_runbook(runbook), fleet.names, provider)
        start = time.monotonic()
        walk.run()
        elapsed = time.monotonic() - start
        opened = transport.connections_opened
    probes = [o.probe for s in walk.steps for o in s.outcomes
              if get_probe_or_none(o.probe) is not None]
    return elapsed, probes, opened


def get_probe_or_none(name: str) -> object | None:
    try:
        return get_probe(name)
    except KeyError:
        return None


def time_clush(fleet: sshfleet.SSHFleet, command: str = COMMAND) -> tuple[float, int] | str:
    if shutil.which("clush") is None:
        return "missing (apt-get install clustershell)"
    nodes = ",".join(fleet.names)
    start = time.monotonic()
    out = subprocess.run(["clush", "-w", nodes, "-b", "-f", str(CONCURRENCY), "-l", fleet.user,
                          "-o", f"-F {fleet.ssh_config}", "-t", "30", command],
                         capture_output=True, text=True)
    elapsed = time.monotonic() - start
    # -b folds identical output: "node[001-512] (512)" heads the one group we expect
    ok = 0
    lines = out.stdout.splitlines()
    for i, line in enumerate(lines):
        if i + 2 < len(lines) and lines[i + 2].strip() == EXPECTED and line.endswith(")"):
            ok += int(line.rsplit("(", 1)[1].rstrip(")"))
    return elapsed, ok


def time_pdsh(fleet: sshfleet.SSHFleet, command: str = COMMAND) -> tuple[float, int] | str:
    if shutil.which("pdsh") is None:
        return "missing (apt-get install pdsh)"
    env = dict(os.environ, PDSH_SSH_ARGS_APPEND=f"-F {fleet.ssh_config}")
    start = time.monotonic()
    out = subprocess.run(["pdsh", "-R", "ssh", "-f", str(CONCURRENCY), "-l", fleet.user,
                          "-w", ",".join(fleet.names), command],
                         capture_output=True, text=True, env=env)
    elapsed = time.monotonic() - start
    ok = sum(line.split(": ", 1)[-1] == EXPECTED for line in out.stdout.splitlines())
    return elapsed, ok


def bench(n: int) -> list[str]:
    per_address = 1 if n <= 200 else 64  # large fleets: distinct ports on fewer addresses
    start = time.monotonic()
    with sshfleet.SSHFleet(n, hosts_per_address=per_address, log_level="INFO",
                           keep=False) as fleet:
        setup_s = time.monotonic() - start
        cold_s, warm_s, cold_ok, warm_ok = time_diag(fleet)
        rows = [("diag fan_out cold (connect + run)", cold_s, cold_ok),
                ("diag fan_out warm (reused connections)", warm_s, warm_ok)]
        for name, outcome in (("clush -b", time_clush(fleet)), ("pdsh -R ssh", time_pdsh(fleet))):
            if isinstance(outcome, str):
                rows.append((f"{name}: {outcome}", float("nan"), 0))
            else:
                rows.append((name, outcome[0], outcome[1]))
        probe_rows = extra_workloads(fleet)
    lines = [f"{n} hosts (fleet started in {setup_s:.1f}s, concurrency {CONCURRENCY})",
             f"  {'tool':42} {'seconds':>8} {'ok':>5} {'x diag cold':>12} {'x diag warm':>12}"]
    for name, seconds, ok in rows:
        lines.append(f"  {name:42} {seconds:8.2f} {ok:5d} {seconds / cold_s:12.2f} "
                     f"{seconds / warm_s:12.2f}")
    return lines + probe_rows


def seconds_of(outcome: tuple[float, int] | str) -> float:
    return float("nan") if isinstance(outcome, str) else outcome[0]


def extra_workloads(fleet: sshfleet.SSHFleet) -> list[str]:
    """``diag probe versions`` and a whole ``diag run hang`` beside clush/pdsh."""
    n = len(fleet.names)
    script = probe_script("versions")
    probe_s, probe_ok = time_diag_probe(fleet, "versions")
    clush_s, pdsh_s = seconds_of(time_clush(fleet, script)), seconds_of(time_pdsh(fleet, script))
    lines = [f"  probe versions: diag {probe_s:.2f}s ({probe_ok}/{n} ok)  clush {clush_s:.2f}s "
             f"(x{clush_s / probe_s:.2f})  pdsh {pdsh_s:.2f}s (x{pdsh_s / probe_s:.2f})"]
    walk_s, probes, opened = time_diag_runbook(fleet, "hang")
    clush_total = sum(seconds_of(time_clush(fleet, probe_script(p))) for p in probes)
    lines.append(f"  runbook hang ({len(probes)} probe steps: {', '.join(probes)}): diag "
                 f"{walk_s:.2f}s with {opened} connections for {n} hosts; clush, one run per "
                 f"step: {clush_total:.2f}s (x{clush_total / walk_s:.2f})")
    return lines


def main(argv: list[str]) -> int:
    reason = sshfleet.unavailable_reason()
    if reason:
        print(f"cannot run the benchmark: {reason}", file=sys.stderr)
        return 2
    sizes = [int(a) for a in argv] or [32, 128, 512]
    print(f"file descriptor limit: {raise_fd_limit()}")
    for tool in ("clush", "pdsh"):
        if shutil.which(tool) is None:
            print(f"note: {tool} is not installed; its rows will say so "
                  f"(apt-get install {'clustershell' if tool == 'clush' else tool})")
    for n in sizes:
        print("\n".join(bench(n)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
