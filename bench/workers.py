"""Benchmark: a walk's hosts sharded over worker processes (``--workers``), against one process.

Not a test: run it by hand (needs root and openssh-server, like the fleet tests)::

    .venv/bin/python bench/workers.py [--hosts 512] [--runs 2] [--workers 1 2]

*--hosts* loopback sshd hosts answer every script with the healthy baseline's recording (a
``cat``, bench/sweep.py's replay fleet), their sshd in an idle cgroup (bench/hostcpu.py), so
what is measured is diag's side. Each run is ``diag run hang --auto --json --workers K`` in its
own process, as an operator runs it (start-up, the sweep, the probe steps, the recording).
Printed per K: wall time, host-probe runs per second of wall (the throughput), diag's CPU
per host-probe run summed over its processes (the walk's and its workers', which it waits for:
RUSAGE_CHILDREN of this bench around the run), and how busy the machine's cores were (/proc/stat):
on loopback the fleet's sshd and scripts share these cores, so once diag and the fleet together
fill them, more workers cannot raise the throughput here (on a real cluster the hosts' side runs
on the hosts).
"""

from __future__ import annotations

import argparse
import json
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

from bench.fanout import raise_fd_limit  # noqa: E402
from bench.hostcpu import IdleGroup, fleet_pids  # noqa: E402
from bench.sweep import replay_fleet  # noqa: E402


def machine_busy() -> float:
    """CPU seconds this machine's cores spent busy (every process: diag, the fleet's sshd and
    the scripts they run), from /proc/stat."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def host_probe_runs(db: Path) -> int:
    """Every (probe, host) run the walk recorded, the sweep's components included (the
    store holds this one walk)."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM probe_runs").fetchone()
    return int(row[0]) if row else 0


def walk(inventory: Path, workers: int, db: Path) -> tuple[float, float, int, str]:
    env = dict(os.environ, DIAG_DB=str(db), XDG_CACHE_HOME=str(db.parent / "cache"))
    began, start, busy = children_cpu(), time.monotonic(), machine_busy()
    done = subprocess.run([sys.executable, "-m", "assistant.cli", "run", "hang",
                           "--inventory", str(inventory), "--auto", "--json",
                           "--workers", str(workers), "--connect-timeout", "30",
                           "--deadline", "600"],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    elapsed, used = time.monotonic() - start, children_cpu() - began
    busy = machine_busy() - busy
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        raise RuntimeError(f"diag run failed ({done.returncode}): {done.stderr[-800:]}") from None
    states: dict[str, int] = {}
    for host in doc["hosts"].values():
        states[host["state"]] = states.get(host["state"], 0) + 1
    accused = sorted({h for f in doc.get("faults") or [] for h in f["hosts"]})
    cores = len(os.sched_getaffinity(0))
    note = (f"machine busy {busy:.0f} of {cores * elapsed:.0f} core-s (the fleet's side "
            f"~{max(0.0, busy - used):.0f}); hosts {states}"
            + (f", accused {accused[:5]}" if accused else ""))
    return elapsed, used, host_probe_runs(db), note


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=512)
    parser.add_argument("--runs", type=int, default=2, help="walks per worker count")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args(argv)
    raise_fd_limit()
    group = IdleGroup()
    with replay_fleet(args.hosts) as (fleet, _names), \
            tempfile.TemporaryDirectory(prefix="diag-bench-workers-") as tmp:
        refused = group.confine(fleet_pids(fleet))
        print(f"{args.hosts} loopback hosts answering the healthy baseline's recording; their "
              "sshd " + (f"share the CPU ({refused})" if refused else "in an idle cgroup"),
              flush=True)
        throughput: dict[int, float] = {}
        for workers in args.workers:
            figures = []
            for run in range(args.runs):
                wall, used, runs, note = walk(fleet.inventory, workers,  # type: ignore[attr-defined]
                                              Path(tmp) / f"w{workers}-{run}.duckdb")
                figures.append((wall, used, runs))
                print(f"  --workers {workers} run {run + 1}: {wall:.1f} s wall, {runs} "
                      f"host-probe runs, {runs / wall:.1f} runs/s, CPU {used:.1f} s = "
                      f"{1000 * used / max(runs, 1):.2f} ms per run; {note}", flush=True)
            throughput[workers] = statistics.median(f[2] / f[0] for f in figures)
            print(f"--workers {workers}: median {throughput[workers]:.1f} host-probe runs/s, "
                  f"CPU median {statistics.median(1000 * f[1] / max(f[2], 1) for f in figures):.2f}"
                  " ms per run", flush=True)
        base = throughput.get(1)
        if base:
            for workers, value in throughput.items():
                print(f"  --workers {workers}: {value / base:.2f}x the throughput of one process")
    group.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
