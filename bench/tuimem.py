"""Benchmark: the TUI at fleet scale without SSH — 10,000 hosts streaming into the walk screen.

Issue 28 item 4: host lists folded and virtualised, no stall over 100 ms while a 10,000-host
step streams in, and the walk's process at most 1.5 GB resident in all. No loopback fleet can
hold 10,000 sshd "hosts" on two cores, so the hosts here answer from ``bench/recording.py``'s
in-memory transport: every probe gets the recorded healthy outputs of
``fixtures/scenarios/_baseline``, each host's output distinct (its name and a counter appended).

The app runs headless (80x24 unless ``--size``) and walks the hang runbook (the evidence sweep,
then five probe steps over every host until its first question or conclusion), recorded in a
fresh store as the TUI records every walk. ``bench/tui.py``'s meter ticks a 10 ms timer in
the app: the longest gap between ticks, minus 10 ms, is the longest the UI could not have
answered a key; the same without the time the loop's thread waited for a CPU (the machine's
load, not diag's doing) is printed beside it.

Two layouts (``--where``):

- ``worker`` (default): the probes run in the probe worker process, as the TUI runs them over
  SSH (``assistant.probeworker``); its transport is the in-memory one. The walk's process is
  the UI's: it gets events and outcomes over the pipe, walks, records and draws.
- ``in-process``: every probe's fan-out, parsing and checks on threads of the UI's process, as
  a replayed scenario runs: the harder case for the event loop.

Not a test: run it by hand (10,000 hosts takes a few minutes of both cores)::

    .venv/bin/python bench/tuimem.py --hosts 10000
    .venv/bin/python bench/tuimem.py --hosts 1000 --where in-process
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tui import STALL_TARGET_S, TICK_S, stall_meter  # noqa: E402

MEMORY_TARGET_MB = 1500.0  # issue 28: the walk's process, 10,000 hosts x 5 probes


def memory_target(hosts: list[str]) -> Any:
    from assistant.target import Target
    from bench.recording import MemoryTransport

    return Target(hosts, {h: {"rack": f"r{i // 32:04d}"} for i, h in enumerate(hosts)},
                  MemoryTransport(True))


def serve_memory(conn: Any, target_args: dict[str, Any],
                 provider_args: dict[str, Any]) -> None:
    """The probe worker's main over the in-memory transport (top level: ``spawn`` imports
    it): the worker opens this target instead of reaching hosts over SSH."""
    import assistant.target
    from assistant.probeworker.serve import serve

    hosts = target_args["hosts"].split(",")
    assistant.target.open_target = lambda **_: memory_target(hosts)  # type: ignore[assignment]
    serve(conn, target_args, provider_args)


def context(hosts: list[str], where: str, concurrency: int) -> Any:
    from assistant.probeworker import ProbeWorker
    from assistant.tui.context import DiagContext, FleetOptions

    options = FleetOptions(hosts=",".join(hosts), timeout=30, deadline=3600,
                           concurrency=concurrency)
    target = memory_target(hosts)
    ctx = DiagContext(options, target=target, probe_worker=False)
    if where == "worker":
        worker = ProbeWorker({"hosts": options.hosts}, {
            "thresholds": None, "params": options.probe_params(target),
            "concurrency": concurrency, "timeout": 30, "deadline": 3600})
        worker.entry = serve_memory
        ctx._worker = worker  # the session's worker, as FleetOptions.worker makes over SSH
    return ctx


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--where", choices=("worker", "in-process"), default="worker")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)

    hosts = [f"node{i:05d}" for i in range(1, args.hosts + 1)]
    scratch = tempfile.TemporaryDirectory(prefix="diag-bench-tuimem-")
    os.environ["DIAG_DB"] = str(Path(scratch.name) / "diag.duckdb")
    ctx = context(hosts, args.where, args.concurrency)
    try:
        result = asyncio.run(stall_meter(ctx, limit_s=3600))
    finally:
        ctx.close()
        scratch.cleanup()
    stall = max(0.0, result["max_gap_s"] - TICK_S)
    own = max(0.0, result["max_own_gap_s"] - TICK_S)
    peak = result["rss_peak_mb"]
    print(f"{args.hosts} in-memory hosts, probes in {result['where']}, concurrency "
          f"{args.concurrency}: walk {result['walk_s']:.1f} s to '{result['status']}' via "
          f"{' > '.join(result['path'])}; host states {', '.join(result['host_states'])}; "
          f"{result['probe_events']} probe events in {result['probe_messages']} messages")
    print(f"  event loop: {result['ticks']} ticks, longest stall {stall * 1000:.0f} ms "
          f"(worst gaps {result['worst_gaps_ms']} ms), p99 gap {result['p99_gap_s'] * 1000:.0f}"
          f" ms; without waiting for a CPU {own * 1000:.0f} ms; target < "
          f"{STALL_TARGET_S * 1000:.0f} ms {'OK' if own < STALL_TARGET_S else 'MISSED'}")
    print(f"  the UI's (walk's) process: resident {result['rss_before_mb']:.0f} MB before the "
          f"walk, peak {peak:.0f} MB (target <= {MEMORY_TARGET_MB:.0f} MB "
          f"{'OK' if peak <= MEMORY_TARGET_MB else 'MISSED'}); CPU {result['ui_cpu_s']:.1f} s, "
          f"recording {result['record_cpu_s']:.1f} s of it over {result['record_steps']} steps")
    busiest = sorted(result["threads"].items(), key=lambda kv: -kv[1])[:4]
    print("  by thread: " + ", ".join(f"{name} {used:.1f} s" for name, used in busiest))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
