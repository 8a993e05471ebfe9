"""Benchmark: the incident store at fleet scale — ingest a year, then time every question.

Generates a realistic history (bench/synth.py: by default 1,000,000 findings over
10,000 hosts — 32 per rack, 4 racks per leaf switch, 8 rails — across a year: ~5,900
incidents, ~8,300 sessions, ~500,000 host-sessions, ~1.3 M probe runs with the versions
probe's facts, a weighted mix of the catalog's finding codes with a leaf switch, an NCCL
version and a few bad hosts planted) into a fresh DuckDB file, then times:

- ingest: generation and bulk insert inside DuckDB, commit and close (checkpoint) included;
- each ``diag correlate`` query, on a fresh read-only connection as the command opens one,
  over the default 90-day window and over the whole year;
- ``diag correlate`` as a whole, ``diag history``, ``diag history --host X``,
  ``diag report latest``;
- a Recorder step (a 64-host probe step with findings) appended to the big file: the write
  latency a walk sees with a year of history behind it.

Not a test: run it by hand and read the figures::

    .venv/bin/python bench/store.py                   # 1 M findings, 10,000 hosts
    .venv/bin/python bench/store.py --findings 200000 --hosts 4000 --repeat 5
    .venv/bin/python bench/store.py --db /tmp/year.duckdb --keep

Targets (2-core machine): ingest < 10 s, every correlation query < 1 s. Each timing is
repeated (--repeat, default 3) and the median and worst are shown.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402

from assistant.store import Recorder, Store  # noqa: E402
from assistant.store import correlate as corr  # noqa: E402
from assistant.store import history as hist  # noqa: E402
from assistant.store.reports import incident_report  # noqa: E402
from bench import synth  # noqa: E402

INGEST_TARGET_S, QUERY_TARGET_S = 10.0, 1.0


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(median seconds, worst seconds, last result) of *repeat* runs."""
    times, result = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times), max(times), result


def fresh_read(path: Path, fn: Callable[[duckdb.DuckDBPyConnection], Any]) -> Callable[[], Any]:
    """What a command does: open the file read-only, ask, close."""
    def run() -> Any:
        con = duckdb.connect(str(path), read_only=True)
        try:
            return fn(con)
        finally:
            con.close()
    return run


def _at(fn: Callable[[Any, Any], Any], start: Any, con: duckdb.DuckDBPyConnection) -> Any:
    return fn(con, start)


def _correlate(since: timedelta | None, con: duckdb.DuckDBPyConnection) -> Any:
    return corr.correlate(con, since=since)


def append_walk_step(store: Store, hosts: list[str]) -> float:
    """Seconds for the Recorder to write one 64-host probe step into the big store."""
    from assistant.runbook import events as ev
    from probes.model import Finding, HostResult, ProbeOutcome

    session = store.open_session("hang", hosts, {h: {"rack": "r000", "leaf": "leaf-00",
                                                     "rail": "0"} for h in hosts},
                                 symptom="bench: one more hang")
    outcome = ProbeOutcome("versions", {h: HostResult(h, "ok", {
        "driver_version": "550.54.15", "nccl_version": "2.19.3", "kernel": "5.15.0"})
        for h in hosts}, [Finding("version-drift", "error", tuple(hosts[:3]), "drift",
                                  "versions", {"key": "driver_version"})])
    step = {"node": "check-versions", "kind": "probe", "started": time.time(),
            "ended": time.time(), "outcomes": [outcome.to_dict()], "answer": None,
            "goto": "next", "because": "bench", "action": None}
    state = {"runbook": "hang", "hosts": hosts, "current": "next", "status": "ready",
             "pending_answers": {}, "steps": [step]}
    recorder = Recorder(store, session,
                        raw={("versions", h): "=== diag:section kernel\n5.15.0\n" for h in hosts})
    began = time.perf_counter()
    recorder(ev.StepFinished("check-versions", 0, step, state))
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--findings", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--db", help="store file to create (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the generated store")
    args = parser.parse_args()

    tmp = None
    if args.db:
        path = Path(args.db)
        if path.exists():
            sys.exit(f"{path} exists; give a new path (the benchmark creates the store)")
    else:
        tmp = Path(tempfile.mkdtemp(prefix="diag-bench-store-"))
        path = tmp / "diag.duckdb"
    store = Store(path)
    store.write(lambda con: None)  # an empty store with the schema: not part of ingest

    rows: list[tuple[str, float, float, float | None]] = []
    began = time.perf_counter()
    result = store.write(lambda con: synth.generate(con, hosts=args.hosts,
                                                    findings=args.findings, days=args.days))
    ingest = time.perf_counter() - began
    rows.append(("ingest (generate + insert + commit)", ingest, ingest, INGEST_TARGET_S))
    size_mb = path.stat().st_size / 1e6
    print(f"store {path} ({size_mb:.0f} MB)")
    print("rows: " + ", ".join(f"{k} {v:,}" for k, v in result.counts.items()))
    print(f"planted: leaf {result.planted_leaf}, nccl {result.planted_nccl}, "
          f"bad hosts {', '.join(result.bad_hosts)}")
    print()

    parts: list[tuple[str, Callable[[Any, Any], Any]]] = [
        ("recurring hosts", lambda con, s: corr.recurring_hosts(con, s)),
        ("leaf/rack/rail concentration", lambda con, s: corr.placement_concentration(con, s)),
        ("version cohorts", lambda con, s: corr.version_cohorts(con, s)),
        ("XID repeat offenders", lambda con, s: corr.xid_repeat_offenders(con, s)),
        ("time to conclusion", lambda con, s: corr.time_to_conclusion(con, s)),
    ]
    found: dict[str, Any] = {}
    for label, since in (("90d", timedelta(days=90)), ("1y", None)):
        start = hist.cutoff(since)
        for name, fn in parts:
            med, worst, out = timed(fresh_read(path, partial(_at, fn, start)), args.repeat)
            rows.append((f"correlate {label}: {name}", med, worst, QUERY_TARGET_S))
            found[f"{label} {name}"] = out
        med, worst, _ = timed(fresh_read(path, partial(_correlate, since)), args.repeat)
        rows.append((f"correlate {label}: all five (diag correlate)", med, worst, None))

    host = result.bad_hosts[0] if result.bad_hosts else "gpu00000"
    questions: list[tuple[str, Callable[[duckdb.DuckDBPyConnection], Any]]] = [
        (f"history --host {host}", lambda con: hist.history(con, host=host)),
        ("history (no filter, 50 newest)", lambda con: hist.history(con)),
        ("history --since 30d --code xid-drain",
         lambda con: hist.history(con, since=timedelta(days=30), code="xid-drain")),
        ("report latest", lambda con: incident_report(con, "latest"))]
    for name, ask in questions:
        med, worst, _ = timed(fresh_read(path, ask), args.repeat)
        rows.append((name, med, worst, None))
    step_times = [append_walk_step(store, [f"gpu{i:05d}" for i in range(64)])
                  for _ in range(args.repeat)]
    rows.append(("Recorder: one 64-host probe step written", statistics.median(step_times),
                 max(step_times), None))

    width = max(len(r[0]) for r in rows)
    print(f"{'timing':<{width}}  {'median':>8}  {'worst':>8}  target")
    failed = 0
    for name, med, worst, target in rows:
        verdict = ""
        if target is not None:
            ok = worst < target
            failed += not ok
            verdict = f"< {target:g} s {'ok' if ok else 'MISSED'}"
        print(f"{name:<{width}}  {med:>7.3f}s  {worst:>7.3f}s  {verdict}")

    print()
    placement = found["1y leaf/rack/rail concentration"]
    versions = found["1y version cohorts"]
    print("found (whole year): " + "; ".join(
        [f"{p['code']} on {p['dimension']} {p['value']} (lift {p['lift']:.1f})"
         for p in placement] +
        [f"{v['code']} with {v['dimension']} {v['value']} (lift {v['lift']:.1f})"
         for v in versions]))
    if tmp is not None and not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    elif args.keep or args.db:
        print(f"kept {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
