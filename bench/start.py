"""Benchmark: how fast the commands an operator runs most start and answer (issue "Fleet-scale
speed", item "Fast starts": ``diag match`` and ``diag runbooks list`` under 0.15 s).

Each command runs as a whole process, as the operator starts it (the ``diag`` console script of
this checkout's venv), first a few times uncounted (the content cache and the bytecode are then
warm, as on every start but the first after an install or an edit), then RUNS times counted.
Printed per command: median (and min-max) wall seconds, and CPU seconds (user + system, the
kernel's accounting of the finished child from ``os.wait4``), with the load average: on a
shared machine wall time mostly measures the load, CPU time much less so. Not a test: a timed
unit test would fail on a loaded machine; run it by hand::

    .venv/bin/python bench/start.py               # 15 runs of each
    .venv/bin/python bench/start.py --runs 30
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIAG = Path(sys.executable).parent / "diag"
COMMANDS = (["match", "nccl timeout"], ["runbooks", "list"], ["--help"])
TARGET_S = 0.15  # the target for match and runbooks list


def once(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``diag ARGV``, its output thrown away."""
    started = time.monotonic()
    child = subprocess.Popen([str(DIAG), *argv], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 1):
        raise RuntimeError(f"diag {' '.join(argv)} exited {child.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="counted runs of each command")
    parser.add_argument("--warmup", type=int, default=2, help="uncounted runs first")
    args = parser.parse_args(argv)
    for command in COMMANDS:
        for _ in range(args.warmup):
            once(command)
        load = os.getloadavg()[0]
        runs = [once(command) for _ in range(args.runs)]
        walls = sorted(wall for wall, _ in runs)
        cpus = sorted(cpu for _, cpu in runs)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        verdict = ("" if command[0] == "--help" else
                   f"; target < {TARGET_S} s {'OK' if wall < TARGET_S else 'MISSED'}")
        print(f"diag {' '.join(command)}: wall median {wall:.3f} s ({walls[0]:.3f}-"
              f"{walls[-1]:.3f}), CPU median {cpu:.3f} s ({cpus[0]:.3f}-{cpus[-1]:.3f}), "
              f"{args.runs} runs{verdict}; load average {load:.1f} before, "
              f"{os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
