"""Benchmark: a walk's resident memory per host, with no SSH in the process (issue 28 item 2).

A whole ``hang`` walk (the evidence sweep and the runbook's five probe steps until its first
question or conclusion) runs in this process over ``bench/recording.py``'s in-memory transport,
every host answering with the recorded healthy outputs of ``fixtures/scenarios/_baseline``, each
host's output distinct (its name and a counter appended: nothing can be shared between hosts).
What is left is what the walk itself holds per host: outputs, parsed facts, findings, events,
and (``--record``) the store's recording. The target: 10,000 hosts in at most 1.5 GB resident
(0.15 MB per host), the walk's SSH connections living in fan-out workers, not here.

Printed per fleet size: resident memory before and after the walk (``/proc/self/status``
VmRSS, after a garbage collection), the peak (``ru_maxrss``), both per host over the start,
the raw outputs as kept (compressed) and as text, and the CPU per host-probe run (rusage).

Not a test: run it by hand (10,000 hosts takes ~4-5 minutes of one core here)::

    .venv/bin/python bench/walkmem.py                       # 1,000 hosts
    .venv/bin/python bench/walkmem.py --hosts 10000
    .venv/bin/python bench/walkmem.py --hosts 2000 --record # recorded into a fresh store
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.runbook.engine import Walk  # noqa: E402
from assistant.runbook.library import get_runbook  # noqa: E402
from assistant.runbook.provider import FleetProvider  # noqa: E402
from assistant.store import Recorder, Store  # noqa: E402
from bench.recording import MemoryTransport, cpu_s, resident_mb  # noqa: E402

TARGET_MB_PER_HOST = 0.15  # issue 28: 10,000 hosts in 1.5 GB


def sharded(hosts: list[str], workers: int) -> Any:
    """A ``ShardedProvider`` over *workers* processes, each answering from the in-memory
    transport (bench/tuimem.py's worker main): the walk's process holds no connection,
    output text or parse of its own, only what comes back."""
    import threading

    from assistant.probeworker import ProbeWorker
    from assistant.probeworker.shards import ShardedProvider
    from bench.tuimem import serve_memory
    from probes.base import load_thresholds

    pool = []
    for _ in range(workers):
        worker = ProbeWorker({"hosts": ",".join(hosts)}, {
            "thresholds": None, "params": {}, "concurrency": max(1, 64 // workers),
            "timeout": 30, "deadline": 24 * 3600})
        worker.entry = serve_memory  # type: ignore[assignment]
        worker.start()
        pool.append(worker)
    return ShardedProvider(pool, threading.Event(), load_thresholds(), {}, {})


def measure(n: int, record: bool, workers: int = 1) -> str:
    hosts = [f"node{i:05d}" for i in range(1, n + 1)]
    warm = Walk(get_runbook("hang"), hosts[:8],
                FleetProvider(MemoryTransport(True), concurrency=64, deadline=600))
    warm.run()  # imports, catalogues and caches loaded before the start is read
    del warm
    gc.collect()
    start = resident_mb()
    began, cpu = time.perf_counter(), cpu_s()
    provider: Any = sharded(hosts, workers) if workers > 1 else \
        FleetProvider(MemoryTransport(True), concurrency=64, deadline=24 * 3600)
    walk = Walk(get_runbook("hang"), hosts, provider)
    tmp = None
    if record:
        tmp = tempfile.TemporaryDirectory()
        store = Store(Path(tmp.name) / "bench.duckdb")
        session = store.open_session("hang", hosts, {h: {"rack": f"r{i // 32:03d}"}
                                                     for i, h in enumerate(hosts)})
        recorder = Recorder(store, session, raw=provider.raw,
                            prepared=getattr(provider, "prepared", None))
        recorder.follow(walk)
    walk.run()
    if record:
        recorder.flush()
    wall, used = time.perf_counter() - began, cpu_s() - cpu
    runs = sum(len(o.hosts) for s in walk.steps for o in s.outcomes)
    gc.collect()
    after = resident_mb()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    packed = provider.raw.packed_bytes() / 1e6
    text = sum(len(t) for t in provider.raw.values()) / 1e6
    per_host = (after - start) / n
    verdict = "ok" if per_host <= TARGET_MB_PER_HOST else "MISSED"
    line = (f"{n} hosts{' recorded' if record else ''}: {runs} host-probe runs "
            f"({len(walk.steps)} steps), resident {start:.0f} -> {after:.0f} MB "
            f"({per_host:.3f} MB/host; target {TARGET_MB_PER_HOST} {verdict}), peak {peak:.0f} MB "
            f"({(peak - start) / n:.3f} MB/host); raw outputs {packed:.1f} MB kept "
            f"({text:.1f} MB as text); {used / runs * 1e3:.2f} ms CPU per host-probe run, "
            f"{wall:.0f} s wall")
    if tmp is not None:
        tmp.cleanup()
    if workers > 1:
        provider.close()
        line += f"; {workers} workers (the walk's process alone measured)"
    return line


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--record", action="store_true",
                        help="record the walk into a fresh store, as diag run does")
    parser.add_argument("--workers", type=int, default=1,
                        help="shard the hosts over N worker processes (--workers)")
    args = parser.parse_args(argv)
    print(measure(args.hosts, args.record, args.workers), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
