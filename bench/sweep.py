"""Benchmark: what the evidence sweep costs at 128 hosts — on each host, in diag, and per walk.

Not a test: run it by hand (needs root and openssh-server, like the fleet tests)::

    .venv/bin/python bench/sweep.py [--hosts 128] [--runs 3] [--before DIR]

The fleet is tests/fleet/healthyfleet.py: loopback sshd hosts running diag's real scripts (the
machine's own kernel, mounts, processes, storage; stand-ins print real GPU and IB recordings).
Its sshd processes go into an idle cgroup (bench/hostcpu.py) when the machine allows it, so the
client pays for its own work and not the hosts'.

1. The sweep alone, through the provider a walk uses: each host's time from the first byte sent
   to the last byte read (the remote script plus one round trip; median, p95, max), and diag's
   CPU per host (this process's rusage over the sweep: SSH, splitting, parsing, checks, the
   fault catalogue).
2. A whole ``diag run hang --auto --json`` as an operator runs it, in its own process (start-up,
   sweep, steps, recording): wall time and that process's CPU, this checkout against *--before*
   (a checkout of the code without the sweep, e.g. ``git worktree add /tmp/before 2e13ba2``;
   its package is put first on PYTHONPATH, the same venv serves both).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.runbook.provider import FleetProvider  # noqa: E402
from bench.fanout import raise_fd_limit  # noqa: E402
from bench.hostcpu import IdleGroup, fleet_pids  # noqa: E402
from probes.catalog import load_catalog, sweep_components  # noqa: E402
from tests.fleet.healthyfleet import healthy_fleet  # noqa: E402


def cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def sweep_alone(fleet: object, hosts: list[str]) -> list[str]:
    components = sweep_components(load_catalog())
    with fleet.transport(connect_timeout=30.0) as transport:  # type: ignore[attr-defined]
        provider = FleetProvider(transport, concurrency=64, deadline=600)
        began, start = cpu(resource.RUSAGE_SELF), time.monotonic()
        outcomes = provider.run_sweep(components, hosts, {}, lambda event: None)
        wall, used = time.monotonic() - start, cpu(resource.RUSAGE_SELF) - began
    whole = outcomes[0]
    durations = sorted(r.duration_s for r in whole.hosts.values())
    ok = sum(r.state == "ok" for r in whole.hosts.values())
    p95 = durations[int(0.95 * (len(durations) - 1))]
    return [f"sweep of {len(components)} components over {len(hosts)} hosts "
            f"({ok} answered): {wall:.2f} s wall",
            f"  per host, send to last byte: median {statistics.median(durations):.2f} s, "
            f"p95 {p95:.2f} s, max {durations[-1]:.2f} s",
            f"  diag's CPU: {used:.2f} s in all, {1000 * used / len(hosts):.1f} ms per host"]


def walk(fleet: object, package: Path, db: Path) -> tuple[float, float, int]:
    """``diag run hang --auto --json`` in its own process: (seconds, its CPU, exit status)."""
    env = dict(os.environ, DIAG_DB=str(db), XDG_CACHE_HOME=str(db.parent / "cache"),
               PYTHONPATH=str(package))
    began, start = cpu(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run([sys.executable, "-m", "assistant.cli", "run", "hang",
                           "--inventory", str(fleet.inventory),  # type: ignore[attr-defined]
                           "--auto", "--json"], capture_output=True, text=True, env=env,
                          cwd=package)
    elapsed, used = time.monotonic() - start, cpu(resource.RUSAGE_CHILDREN) - began
    if '"steps"' not in done.stdout:
        raise RuntimeError(f"{package}: diag run failed ({done.returncode}): "
                           f"{done.stderr[-500:]}")
    return elapsed, used, done.returncode


def walks(fleet: object, package: Path, runs: int, label: str) -> str:
    figures = []
    with tempfile.TemporaryDirectory(prefix="diag-bench-sweep-") as tmp:
        for i in range(runs):
            figures.append(walk(fleet, package, Path(tmp) / f"{label}-{i}.duckdb"))
    wall = sorted(f[0] for f in figures)
    used = sorted(f[1] for f in figures)
    return (f"  {label}: wall median {statistics.median(wall):.1f} s (min {wall[0]:.1f}, max "
            f"{wall[-1]:.1f}); process CPU median {statistics.median(used):.2f} s (min "
            f"{used[0]:.2f}, max {used[-1]:.2f}); exit {sorted({f[2] for f in figures})}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3, help="whole walks per checkout")
    parser.add_argument("--before", type=Path, help="a checkout of the code before the sweep")
    args = parser.parse_args(argv)
    raise_fd_limit()
    group = IdleGroup()
    with healthy_fleet(args.hosts, prefix="sw") as fleet:
        refused = group.confine(fleet_pids(fleet))
        print(f"{args.hosts} loopback hosts; the fleet's sshd "
              + (f"share the CPU ({refused})" if refused else "in an idle cgroup"))
        print("\n".join(sweep_alone(fleet, fleet.healthy)))
        print(f"whole hang walk, {args.runs} runs each:")
        print(walks(fleet, ROOT, args.runs, "with the sweep (this checkout)"))
        if args.before:
            print(walks(fleet, args.before.resolve(), args.runs, f"before ({args.before})"))
    group.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
