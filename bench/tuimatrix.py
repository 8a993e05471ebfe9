"""Benchmark: the acceptance matrix as 10,000 nodes' figures stream in (issue 28 item 4).

A new cluster's bring-up runs the acceptance walk on every node; the walk screen feeds its
matrix one host's figures at a time as they arrive. Here the app runs headless with the
matrix alone, figures for ``--tests`` tests arrive for every node in bursts of ``--burst``
hosts every 20 ms (a fan-out's batch; 2 % of the nodes fail a test, 1 % cannot run one),
and a 10 ms timer records the longest gap between its ticks: minus 10 ms, the longest the
screen could not have answered a key (target: under 100 ms). Then the matrix's paint alone:
a new test column with every node in (the rebuild the folded view bounds).

Not a test: run it by hand::

    .venv/bin/python bench/tuimatrix.py                   # 10,000 nodes, 3 tests
    .venv/bin/python bench/tuimatrix.py --hosts 2000 --tests 5
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TICK_S = 0.010
STALL_TARGET_S = 0.100
TESTS = ("dcgm-diag", "gpu-burn", "nccl-allreduce", "nvbandwidth", "ib-write-bw")


def verdict(i: int, t: int) -> str:
    return "fail" if (i * 7 + t) % 50 == 0 else "not-run" if (i * 3 + t) % 100 == 1 else "pass"


async def measure(hosts: int, tests: int, burst: int) -> dict[str, Any]:
    from textual.app import App, ComposeResult

    from assistant.tui.widgets.accept_matrix import AcceptMatrix

    names = [f"node{i:05d}" for i in range(1, hosts + 1)]

    class Matrix(App[None]):
        def compose(self) -> ComposeResult:
            yield AcceptMatrix(names, id="matrix")

    app = Matrix()
    ticks: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        matrix = app.query_one(AcceptMatrix)
        app.set_interval(TICK_S, lambda: ticks.append(time.perf_counter()))
        started = time.perf_counter()
        for t, test in enumerate(TESTS[:tests]):
            for first in range(0, hosts, burst):
                for i in range(first, min(first + burst, hosts)):
                    matrix.add(names[i], [{"test": test, "level": 1, "metric": "busbw",
                                           "value": 180.0 + i % 7, "unit": "GB/s",
                                           "verdict": verdict(i, t)}])
                await asyncio.sleep(0.020)
        await pilot.pause(0.3)
        walk_s = time.perf_counter() - started
        rows = app.query_one("#matrix-table").row_count  # type: ignore[attr-defined]
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    return {"walk_s": walk_s, "ticks": len(ticks), "rows": rows,
            "stall_ms": max(0.0, max(gaps, default=0.0) - TICK_S) * 1000,
            "worst_ms": sorted((round(g * 1000) for g in gaps), reverse=True)[:6]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--tests", type=int, default=3, choices=range(1, len(TESTS) + 1))
    parser.add_argument("--burst", type=int, default=256)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.hosts, args.tests, args.burst))
    ok = result["stall_ms"] < STALL_TARGET_S * 1000
    print(f"acceptance matrix, {args.hosts} nodes x {args.tests} tests in bursts of "
          f"{args.burst}: {result['walk_s']:.1f} s, {result['rows']} table rows, "
          f"{result['ticks']} ticks, longest stall {result['stall_ms']:.0f} ms (worst gaps "
          f"{result['worst_ms']} ms); target < {STALL_TARGET_S * 1000:.0f} ms "
          f"{'OK' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
