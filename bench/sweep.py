"""Benchmark: what the evidence sweep costs at 128 hosts — on each host, in diag, and per walk.

Not a test: run it by hand (needs root and openssh-server, like the fleet tests)::

    .venv/bin/python bench/sweep.py [--hosts 128] [--runs 3] [--before DIR]

1. The remote side: the sweep on hosts running diag's real scripts (tests/fleet/healthyfleet.py:
   the machine's own kernel, mounts, processes, storage; stand-ins print real GPU and IB
   recordings), one host at a time, since loopback hosts run concurrently share this machine's
   two cores (at 128 at once every host's sweep hits its own time limit: that measures the
   machine, not a host).
2. diag's side: the sweep over *--hosts* loopback hosts that answer with the healthy
   baseline's recording (a ``cat``; their sshd in an idle cgroup, bench/hostcpu.py): wall
   time, each host's send-to-last-byte time, and diag's CPU per host (this process's rusage:
   SSH, splitting, parsing, checks, the fault catalogue).
3. A whole ``diag run hang --auto --json`` over the same hosts as an operator runs it, in its
   own process (start-up, sweep, steps, recording): wall time and that process's CPU, this
   checkout against *--before* (a checkout without the sweep, e.g. ``git worktree add
   /tmp/before 2e13ba2``; its package is put first on PYTHONPATH, the same venv serves both).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.fleet.scenario import load_scenario  # noqa: E402
from assistant.runbook.provider import FleetProvider  # noqa: E402
from bench.fanout import raise_fd_limit  # noqa: E402
from bench.hostcpu import IdleGroup, fleet_pids  # noqa: E402
from probes.catalog import load_catalog, sweep_components  # noqa: E402
from tests.fleet import replayfleet, sshfleet  # noqa: E402
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


def remote_alone(fleet: object, hosts: list[str]) -> str:
    """The sweep on one host at a time: what a host's own CPUs spend on it (on loopback, 128
    hosts at once share this machine's two cores, so their times measure the machine)."""
    components = sweep_components(load_catalog())
    times = []
    with fleet.transport(connect_timeout=30.0) as transport:  # type: ignore[attr-defined]
        provider = FleetProvider(transport, concurrency=1, deadline=600)
        for host in hosts:
            provider.run_sweep(components, [host], {}, lambda event: None)  # connect first
            outcome = provider.run_sweep(components, [host], {}, lambda event: None)[0]
            times.append(outcome.hosts[host].duration_s)
    return (f"  one host at a time ({len(hosts)} hosts, connection open): median "
            f"{statistics.median(times):.2f} s, max {max(times):.2f} s per host")


@contextlib.contextmanager
def replay_fleet(hosts: int) -> Iterator[tuple[object, list[str]]]:
    """*hosts* loopback sshd hosts answering every script with the healthy baseline's
    recorded output (tests/fleet/replayfleet.py): the remote side costs a ``cat``, so what is
    measured is diag's own side of a sweep whose every host answers."""
    names = [f"gpu{i:03d}" for i in range(1, hosts + 1)]
    replay = Path(tempfile.mkdtemp(prefix="diag-bench-replay-"))
    replay.chmod(0o755)
    script = replay / "replay.sh"
    script.write_text(replayfleet.REPLAY)
    script.chmod(0o755)
    scenario_dir = replay / "scenario"
    scenario_dir.mkdir()
    (scenario_dir / "scenario.yaml").write_text(
        f"title: healthy\nsymptom: bench\nrunbook: hang\nhosts: gpu[001-{hosts:03d}]\n")
    try:
        with sshfleet.SSHFleet(names, force_command={h: str(script) for h in names},
                               hosts_per_address=8, log_level="INFO") as fleet:
            inventory = replayfleet.stage(load_scenario(str(scenario_dir)), fleet, replay,
                                          replay)
            fleet.inventory = inventory
            yield fleet, names
    finally:
        shutil.rmtree(replay, ignore_errors=True)


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
    print("1. hosts running diag's real scripts (the machine's own kernel, mounts, storage)")
    with healthy_fleet(8, prefix="sw") as fleet:
        print(remote_alone(fleet, fleet.healthy))
    with replay_fleet(args.hosts) as (fleet, names):
        refused = group.confine(fleet_pids(fleet))
        print(f"2. {args.hosts} loopback hosts answering the healthy baseline's recording; "
              "their sshd " + (f"share the CPU ({refused})" if refused else
                               "in an idle cgroup"), flush=True)
        print("\n".join(sweep_alone(fleet, names)), flush=True)
        print(f"3. whole hang walk over them, {args.runs} runs each:", flush=True)
        print(walks(fleet, ROOT, args.runs, "with the sweep (this checkout)"), flush=True)
        if args.before:
            print(walks(fleet, args.before.resolve(), args.runs, f"before ({args.before})"))
    group.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
