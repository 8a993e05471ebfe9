"""Benchmark: ``uname -r`` over N loopback sshd hosts — diag's fan-out vs clush vs pdsh.

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
sys.path.insert(0, str(ROOT / "tests" / "fleet"))

import sshfleet  # noqa: E402

from assistant.fleet.fanout import fan_out  # noqa: E402

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


def time_clush(fleet: sshfleet.SSHFleet) -> tuple[float, int] | str:
    if shutil.which("clush") is None:
        return "missing (apt-get install clustershell)"
    nodes = ",".join(fleet.names)
    start = time.monotonic()
    out = subprocess.run(["clush", "-w", nodes, "-b", "-f", str(CONCURRENCY), "-l", fleet.user,
                          "-o", f"-F {fleet.ssh_config}", "-t", "30", COMMAND],
                         capture_output=True, text=True)
    elapsed = time.monotonic() - start
    # -b folds identical output: "node[001-512] (512)" heads the one group we expect
    ok = 0
    lines = out.stdout.splitlines()
    for i, line in enumerate(lines):
        if i + 2 < len(lines) and lines[i + 2].strip() == EXPECTED and line.endswith(")"):
            ok += int(line.rsplit("(", 1)[1].rstrip(")"))
    return elapsed, ok


def time_pdsh(fleet: sshfleet.SSHFleet) -> tuple[float, int] | str:
    if shutil.which("pdsh") is None:
        return "missing (apt-get install pdsh)"
    env = dict(os.environ, PDSH_SSH_ARGS_APPEND=f"-F {fleet.ssh_config}")
    start = time.monotonic()
    out = subprocess.run(["pdsh", "-R", "ssh", "-f", str(CONCURRENCY), "-l", fleet.user,
                          "-w", ",".join(fleet.names), COMMAND],
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
    lines = [f"{n} hosts (fleet started in {setup_s:.1f}s, concurrency {CONCURRENCY})",
             f"  {'tool':42} {'seconds':>8} {'ok':>5} {'x diag cold':>12} {'x diag warm':>12}"]
    for name, seconds, ok in rows:
        lines.append(f"  {name:42} {seconds:8.2f} {ok:5d} {seconds / cold_s:12.2f} "
                     f"{seconds / warm_s:12.2f}")
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
