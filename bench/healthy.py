"""Benchmark: a healthy fleet of N loopback hosts, machine loaded, is accused by no runbook.

Not a test (tests/fleet/test_healthy_fleet.py walks 8 hosts in CI); run it by hand,
as root with openssh-server, for the fleet sizes CI cannot afford::

    .venv/bin/python bench/healthy.py [--hosts 512] [--rounds 20] [--load 2]
                                      [--runbooks hang,launch-failure,...]
                                      [--concurrency 16] [--deadline SECONDS]

The hosts run diag's real probe scripts (tests/fleet/healthyfleet.py: the machine's own kernel,
mounts, processes and storage; stand-ins print real GPU and IB recordings; peer names resolve).
``--load N`` keeps N busy loops running beside the walks, so time-outs, name lookups and CPU
readings meet a loaded machine. Each walk is ``diag run RUNBOOK --auto --json`` in this process;
a walk that holds anything against a host (a standing fault, a conclusion naming or citing
hosts, an error or critical finding on a host) or concludes a cause is printed in full and
counted. So is a *hollow* walk: one that left a host unread (it did not answer, its sweep or a
probe ran out of diag's time there: tests/fleet/healthyfleet.unread), since accusing nobody
proves nothing about hosts nobody read. Every loopback host's scripts share this machine's two
cores (a sweep is ~1.8 s of them per host), so the walk reads at most --concurrency hosts at
once (default 16) and each step gets a deadline for all its rounds (default 60 s per round of
--concurrency hosts, plus 60 s). Prints per runbook: walks, hollow walks, accusations,
conclusions, wall time (median, max).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.cli import main as diag  # noqa: E402
from bench.fanout import raise_fd_limit  # noqa: E402
from tests.fleet.healthyfleet import (  # noqa: E402
    LOOPBACK_LIMITS,
    NO_TEST_PROCESSES,
    RUNBOOKS,
    accusations,
    healthy_fleet,
    summary,
    unread,
)


def walk(inventory: Path, runbook: str, db: Path, pace: list[str]) -> tuple[float, dict]:
    out = io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        diag(["run", runbook, "--inventory", str(inventory), "--auto", "--json",
              "--db", str(db), *LOOPBACK_LIMITS, *NO_TEST_PROCESSES, *pace])
    return time.monotonic() - start, json.loads(out.getvalue())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--load", type=int, default=2, help="busy loops beside the walks")
    parser.add_argument("--runbooks", default=",".join(RUNBOOKS))
    parser.add_argument("--db", type=Path, default=Path("/tmp/diag-bench-healthy.duckdb"))
    parser.add_argument("--concurrency", type=int, default=16, help="hosts read at once")
    parser.add_argument("--deadline", type=float, default=None,
                        help="per step (default: 60 s per round of --concurrency hosts + 60)")
    args = parser.parse_args(argv)
    rounds_per_step = -(-args.hosts // args.concurrency)
    deadline = args.deadline or 60.0 * rounds_per_step + 60
    pace = ["--concurrency", str(args.concurrency), "--deadline", f"{deadline:g}"]
    raise_fd_limit()
    runbooks = args.runbooks.split(",")
    burners = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(args.load)]
    bad = 0
    try:
        with healthy_fleet(args.hosts, prefix="hb") as fleet:
            print(f"{args.hosts} hosts, {args.rounds} round(s), {args.load} busy loop(s), "
                  f"{' '.join(pace)}", flush=True)
            for runbook in runbooks:
                times, hollow, accused, concluded = [], 0, 0, 0
                for _ in range(args.rounds):
                    seconds, doc = walk(fleet.inventory, runbook, args.db, pace)
                    times.append(seconds)
                    missed = unread(doc)
                    if missed or accusations(doc) or doc.get("conclusion"):
                        bad += 1
                        hollow += bool(missed)
                        accused += bool(accusations(doc))
                        concluded += bool(doc.get("conclusion"))
                        print("   ", summary(runbook, doc), flush=True)
                        for host, why in sorted(missed.items())[:3]:
                            print(f"      unread {host}: {'; '.join(why)[:300]}", flush=True)
                print(f"{runbook:18s} walks {len(times):3d}  hollow {hollow}  accused {accused}  "
                      f"concluded {concluded}  wall median {statistics.median(times):6.1f} s  "
                      f"max {max(times):6.1f} s", flush=True)
    finally:
        for burner in burners:
            burner.kill()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
