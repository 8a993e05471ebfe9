"""Benchmark: what a walk costs the client apart from SSH — parsing, checks and recording.

A whole ``hang`` walk (the runbook's five probe steps until its first question or conclusion)
runs in this process over an in-memory transport that answers every probe with the recorded
healthy outputs of ``fixtures/scenarios/_baseline`` — the same outputs the loopback replay
fleet serves (``tests/tui/tui_sshfleet.py``) — so no SSH, no remote script and no network take
part: what is left is diag's own work per host-probe run. Two fleets:

- ``same``: every host prints the same bytes (a homogeneous fleet's versions, topology...);
- ``distinct``: every host's output differs (its name and a counter appended), so nothing can
  be shared between hosts.

For each, the walk runs once without a store and once recorded by the ``Recorder`` into a fresh
DuckDB file; printed: the process's CPU time (rusage: user + system) per host-probe run, and
the store's size on disk per 1,000 host-probe runs after the last connection closed (DuckDB
checkpoints then), measured over ``--walks`` recorded walks, in all and as the growth after the
first walk (what each further walk adds, without the file's fixed overhead).

Not a test: run it by hand::

    .venv/bin/python bench/recording.py                 # 128 hosts, 3 walks
    .venv/bin/python bench/recording.py --hosts 512 --walks 2
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.fleet.transport import CommandResult  # noqa: E402
from assistant.runbook.engine import Walk  # noqa: E402
from assistant.runbook.library import get_runbook  # noqa: E402
from assistant.runbook.provider import FleetProvider  # noqa: E402
from assistant.store import Recorder, Store  # noqa: E402

OUTPUTS = {p.stem: p.read_text() for p in (ROOT / "fixtures" / "scenarios" / "_baseline")
           .glob("*.txt")}


class MemoryTransport:
    """Answers a probe with its recorded baseline output; *distinct* makes each host's differ."""

    name = "memory"

    def __init__(self, distinct: bool) -> None:
        self.distinct = distinct
        self.calls = 0

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: Any = None) -> CommandResult:
        self.calls += 1
        if label == "sweep":  # every component's output in one, as a host prints it
            from probes.catalog import load_catalog, sweep_components
            from probes.sweep import Part, compose

            text = compose([(name, Part(self.output(host, name), 0))
                            for name in sweep_components(load_catalog()) if name in OUTPUTS])
        else:
            text = self.output(host, label or "")
        return CommandResult(host, "ok", stdout=text, exit_status=0, duration_s=0.001)

    def output(self, host: str, probe: str) -> str:
        text = OUTPUTS.get(probe, "")
        return f"{text}\n# diag bench: {host} sample {self.calls}\n" if self.distinct else text

    def close(self) -> None:
        pass


def resident_mb() -> float:
    """This process's resident memory now (VmRSS), in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one_walk(hosts: list[str], distinct: bool, store: Store | None) -> tuple[float, int]:
    """(CPU seconds, host-probe runs) of one hang walk, recorded when *store* is given."""
    provider = FleetProvider(MemoryTransport(distinct), concurrency=64, deadline=600)
    walk = Walk(get_runbook("hang"), hosts, provider)
    began = cpu_s()
    if store is not None:
        session = store.open_session("hang", hosts, {h: {"rack": f"r{i // 32:03d}"}
                                                     for i, h in enumerate(hosts)})
        Recorder(store, session, raw=provider.raw).follow(walk)
    walk.run()
    runs = sum(len(o.hosts) for s in walk.steps for o in s.outcomes)
    return cpu_s() - began, runs


def store_bytes(path: Path) -> int:
    wal = path.with_name(path.name + ".wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def bench(n: int, walks: int) -> list[str]:
    hosts = [f"node{i:04d}" for i in range(1, n + 1)]
    lines = []
    one_walk(hosts[:8], False, None)  # imports and caches warm
    for distinct in (False, True):
        kind = "distinct" if distinct else "same"
        bare_s, bare_runs = one_walk(hosts, distinct, None)
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "bench.duckdb")
            rec_s, rec_runs, first_runs, first_size = 0.0, 0, 0, 0
            began = time.perf_counter()
            for walk_no in range(walks):
                seconds, runs = one_walk(hosts, distinct, store)
                rec_s += seconds
                rec_runs += runs
                if walk_no == 0:  # the file as the first walk left it (checkpointed)
                    first_runs, first_size = runs, store_bytes(store.path)
            wall = time.perf_counter() - began
            size = store_bytes(store.path)
        # The growth after the first walk is what each further walk costs on disk (the first
        # one also pays the file's fixed overhead: header, catalog, free blocks).
        growth = (size - first_size) / max(rec_runs - first_runs, 1) * 1000 / 1e6
        lines.append(
            f"{n} hosts, outputs {kind:8}: walk without a store {bare_s / bare_runs * 1e3:5.2f}"
            f" ms CPU per host-probe run; recorded {rec_s / rec_runs * 1e3:5.2f} ms "
            f"({walks} walks, {rec_runs} runs, {wall:.1f} s wall); store "
            f"{size / rec_runs * 1000 / 1e6:.2f} MB per 1,000 host-probe runs in all, "
            f"{growth:.2f} MB per 1,000 after the first walk")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, action="append")
    parser.add_argument("--walks", type=int, default=3)
    args = parser.parse_args(argv)
    for n in args.hosts or [128]:
        print("\n".join(bench(n, args.walks)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
