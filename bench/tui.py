"""Benchmark: the TUI's first paint, and how calm its event loop stays during a big fan-out.

Not a test: run it by hand (the fan-out part needs root and openssh-server, like
``bench/fanout.py``)::

    .venv/bin/python bench/tui.py              # first paint x5, then 128 hosts
    .venv/bin/python bench/tui.py --hosts 32   # a smaller fleet
    .venv/bin/python bench/tui.py --paint-only

First paint: a fresh interpreter runs the demo app (``run_app(demo=True)``'s app, headless) and
prints the wall-clock time when the home screen has been composed, laid out and rendered once
(after the ``Ready`` event, on the next refresh); the figure is that minus the wall-clock time
just before the parent spawned the process, so Python's start-up and every import count. Then
the match list: when the ranking of the demo's symptom (a worker thread) has been shown and
rendered, the time since the first paint (target < 0.3 s), with the process's CPU seconds.

Event-loop stall: the app runs headless over a loopback sshd fleet (tests/tui/tui_sshfleet.py:
real sshd replaying recorded probe outputs) and walks the hang runbook, which fans five probes
out over every host before it asks its first question. A 10 ms interval timer inside the app
records the largest gap between its ticks while the walk runs: that gap, minus 10 ms, is the
longest time the UI could not have answered a key. Targets: first paint < 1 s, no stall > 100 ms
at 512 hosts and the default 64-way fan-out (``--hosts 512``).

The walk runs twice on the same fleet: first with the fleet's sshd (and every session and probe
script they fork) in an idle cgroup, so the hosts' own work takes only CPU the client leaves
idle, as on a real cluster where it runs on the hosts; then sharing the CPU with the client,
loopback's worst case (each probe script is its own scheduling group, as heavy as the TUI's
whole process tree). ``--hosts-cpu idle`` or ``shared`` runs one; bench/hostcpu.py says why.

The walk is recorded, as the TUI records every walk, in a fresh store in a temporary directory
(``--db PATH`` to choose one): a shared store another process holds, or one an older diag
cannot open, would send every step to the journal instead and measure that path. Beside the
stall it prints the UI process's own CPU during the walk (rusage) and how much of it the
recorder took on the walk's thread (that thread's CPU time inside the recorder), figures a
loaded machine does not inflate the way it inflates wall-clock gaps.

Over SSH the TUI runs its probes in a worker process (assistant.probeworker); ``--in-process``
measures the old way (every fan-out thread in the UI's process) for comparison. The load
average is printed with each figure: on loopback the "hosts" (sshd and the probe scripts)
share this machine's cores with the UI, so a loaded machine delays the event loop whatever
diag does.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.tui.context import TUI_CONCURRENCY  # noqa: E402
from bench import hostcpu  # noqa: E402
from bench.recording import resident_mb  # noqa: E402

PAINT_TARGET_S = 1.0
LIST_TARGET_S = 0.3  # the home screen's match list, after the first paint
STALL_TARGET_S = 0.100
TICK_S = 0.010
HOSTS_CPU = {"idle": "idle CPU only (an idle cgroup: remote hosts, as deployed)",
             "shared": "the client's CPU (loopback's worst case: every probe script a "
                       "scheduling group as heavy as the TUI)"}

CHILD = r"""
import sys, time
from assistant.tui.app import DiagApp
from assistant.tui.context import DiagContext
from assistant.tui.screens.home import HomeScreen

class Timed(DiagApp):
    def on_ready(self) -> None:
        self._check()

    def _check(self) -> None:
        if isinstance(self.screen, HomeScreen) and self.screen.is_mounted:
            self.call_after_refresh(self._painted)
        else:
            self.call_after_refresh(self._check)

    def _painted(self) -> None:
        print(f"PAINTED {time.time():.6f}", flush=True)

    def on_matches_updated(self, message) -> None:
        # Bubbled up from the home screen once it has shown the ranking of the demo symptom.
        if message.results:
            self.call_after_refresh(self._listed)

    def _listed(self) -> None:
        print(f"LISTED {time.time():.6f}", flush=True)
        self.exit()

Timed(DiagContext(demo=True)).run(headless=True, size=(80, 24))
"""


def first_paint() -> tuple[float, float, float]:
    """(first paint, match list on screen, the child's CPU seconds): seconds from just before
    the process is spawned; the list is the demo symptom's ranking, rendered."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    marks = {}
    for line in out.stdout.splitlines():
        if line.startswith(("PAINTED ", "LISTED ")):
            what, when = line.split()
            marks[what] = float(when) - started
    if len(marks) != 2:
        raise RuntimeError(f"the app did not report a paint and a list: {out.stdout}\n"
                           f"{out.stderr}")
    return marks["PAINTED"], marks["LISTED"], cpu


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 16
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


async def walk_with_stall_meter(inventory: Path, hosts: int, concurrency: int,
                                in_process: bool = False,
                                limit_s: float = 600.0, workers: int | None = 1
                                ) -> dict[str, Any]:
    from assistant.tui.context import DiagContext, FleetOptions

    ctx = DiagContext(FleetOptions(inventory=str(inventory), timeout=30, deadline=120,
                                   connect_timeout=30, concurrency=concurrency,
                                   workers=workers),
                      probe_worker=not in_process)
    assert ctx.target is not None, ctx.target_error
    return {"hosts": hosts, "concurrency": concurrency, "workers": len(ctx._pool) or 1,
            **await stall_meter(ctx, limit_s)}


async def stall_meter(ctx: Any, limit_s: float = 600.0) -> dict[str, Any]:
    """Walk the hang runbook in the app over *ctx*, ticking a 10 ms timer: the event loop's
    gaps, the UI process's CPU and where its threads spent it (see the module doc)."""
    from textual.worker import Worker, WorkerState

    from assistant.tui import messages as m
    from assistant.tui.app import DiagApp

    recording = meter_recorder()
    app = DiagApp(ctx, still=True)
    ticks: list[tuple[float, float]] = []  # (when, the event loop's runqueue wait so far)
    state: dict[str, Any] = {"measuring": False, "probe_messages": 0, "probe_events": 0,
                             "idle": None, "prewarmed": False}

    def hook(message: Any) -> None:
        if isinstance(message, Worker.StateChanged) and message.worker.group == "prewarm" \
                and message.state in (WorkerState.SUCCESS, WorkerState.ERROR):
            state["prewarmed"] = True
        elif isinstance(message, m.WalkBusy):
            state["measuring"] = True
        elif isinstance(message, m.ProbeEvents):
            state["probe_events"] += len(message.events)
            state["probe_messages"] += 1
        elif isinstance(message, m.WalkIdle):
            state["measuring"] = False
            state["idle"] = message

    def tick() -> None:
        if state["measuring"]:
            ticks.append((time.perf_counter(), runqueue_wait()))

    async with app.run_test(size=(80, 24), message_hook=hook) as pilot:
        # An operator reads the home screen before choosing: its after-paint work (the
        # prewarm imports, the incident list) is done by then, not part of the walk.
        waited = time.perf_counter()
        while not state["prewarmed"] and time.perf_counter() - waited < 60:
            await pilot.pause(0.05)
        await app.workers.wait_for_complete()
        app.set_interval(TICK_S, tick)
        load_before = os.getloadavg()
        rss_before = resident_mb()
        cpu_before, threads_before = process_cpu(), thread_cpu()
        started = time.perf_counter()
        app.post_message(m.RunbookChosen("hang", "training hangs"))
        while state["idle"] is None:
            await asyncio.sleep(0.05)
            if time.perf_counter() - started > limit_s:
                break  # the stalls measured so far still count (an overloaded machine)
        elapsed = time.perf_counter() - started
        cpu = process_cpu() - cpu_before
        recording["undo"]()
        close_schedstat()
        threads = {name: used - threads_before.get(name, 0.0)
                   for name, used in thread_cpu().items()}
        idle = state["idle"] or m.WalkIdle(f"unfinished after {limit_s:g} s", {})
        walk = app.screen.driver.walk  # type: ignore[attr-defined]
        states = {r.state for s in walk.steps for o in s.outcomes for r in o.hosts.values()}
        worker = ctx.worker()
        where = f"worker process {worker.pid}" if worker is not None else "the UI's process"
        await pilot.pause()
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(ticks)]
    # The part of each gap the thread spent runnable but not running (the machine's other
    # processes had the cores): what remains is what diag's process itself held it up.
    own = [(b[0] - a[0]) - (b[1] - a[1]) for a, b in itertools.pairwise(ticks)]
    return {"walk_s": elapsed, "where": where, "rss_before_mb": rss_before,
            "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "worst_gaps_ms": sorted((round(g * 1000) for g in gaps), reverse=True)[:8],
            "load": (load_before, os.getloadavg()), "ui_cpu_s": cpu, "threads": threads,
            "record_cpu_s": recording["cpu_s"], "record_steps": recording["steps"],
            "status": idle.status, "path": walk.path(),
            "host_states": sorted(states), "probe_messages": state["probe_messages"],
            "probe_events": state["probe_events"],
            "ticks": len(ticks), "max_gap_s": max(gaps, default=0.0),
            "max_own_gap_s": max(own, default=0.0),
            "p99_gap_s": statistics.quantiles(gaps, n=100)[98] if len(gaps) > 100 else 0.0}


def process_cpu() -> float:
    """This process's CPU time so far (user + system, every thread): the UI's process."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def thread_cpu() -> dict[str, float]:
    """CPU seconds so far of each live thread of this process, by thread name (Linux
    /proc; empty elsewhere): which thread of the UI's process did the work."""
    out: dict[str, float] = {}
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        name = names.get(int(tid)) or stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[f"{name}[{tid}]"] = (int(fields[11]) + int(fields[12])) / tick
    return out


def meter_recorder() -> dict[str, Any]:
    """Count the CPU the recorder's steps take on the walk's thread (``time.thread_time``
    around each ``StepFinished`` it writes): the recording share of the UI process's work."""
    from assistant.runbook import events as ev
    from assistant.store.recorder import Recorder

    meter: dict[str, Any] = {"cpu_s": 0.0, "steps": 0}
    plain = Recorder.__call__
    lock = threading.Lock()

    def metered(self: Recorder, event: ev.Event) -> None:
        if not isinstance(event, ev.StepFinished):
            plain(self, event)
            return
        before = time.thread_time()
        try:
            plain(self, event)
        finally:
            with lock:
                meter["cpu_s"] += time.thread_time() - before
                meter["steps"] += 1

    Recorder.__call__ = metered  # type: ignore[method-assign]
    meter["undo"] = lambda: setattr(Recorder, "__call__", plain)
    return meter


def runqueue_wait() -> float:
    """Seconds the event loop's thread has waited for a CPU while runnable (Linux schedstat;
    0 where it is not available). Called by the 10 ms tick, so it keeps the file open and
    re-reads it with ``pread``: opening /proc 100 times a second cost the meter ~20 ms of the
    event loop's CPU per second on a loaded machine, which counted against the UI."""
    global _schedstat
    try:
        if _schedstat is None:
            _schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        return int(os.pread(_schedstat, 128, 0).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


_schedstat: int | None = None  # the tick's thread's schedstat, opened on its first call


def close_schedstat() -> None:
    global _schedstat
    if _schedstat is not None:
        os.close(_schedstat)
        _schedstat = None


def fan_out_bench(hosts: int, concurrencies: list[int], in_process: bool = False,
                  db: str | None = None,
                  hosts_cpu: tuple[str, ...] = ("idle", "shared"), workers: int | None = 1
                  ) -> list[dict[str, Any]] | str:
    """One walk per fan-out width and per way the fleet gets CPU: "idle" (the fleet's sshd
    in an idle cgroup, as remote hosts: only the client's own work competes with the event
    loop) and "shared" (loopback's worst case: 64 probe scripts in their own scheduling
    groups against the TUI); see bench/hostcpu.py."""
    from tests.tui import tui_sshfleet

    reason = tui_sshfleet.unavailable_reason()
    if reason:
        return reason
    raise_fd_limit()
    scratch = tempfile.TemporaryDirectory(prefix="diag-bench-tui-")
    os.environ["DIAG_DB"] = db or str(Path(scratch.name) / "diag.duckdb")
    per_address = 1 if hosts <= 200 else 64
    started = time.monotonic()
    group = hostcpu.IdleGroup()
    results: list[dict[str, Any]] = []
    with tui_sshfleet.replay_fleet(hosts, hosts_per_address=per_address,
                                   log_level="INFO") as fleet:
        setup = time.monotonic() - started
        pids = hostcpu.fleet_pids(fleet)
        for mode in hosts_cpu:
            why = group.confine(pids) if mode == "idle" else group.release(pids)
            if why:
                results.append({"hosts_cpu": mode, "skipped": why})
                continue
            for c in concurrencies:
                result = asyncio.run(walk_with_stall_meter(fleet.inventory, hosts, c,
                                                           in_process, workers=workers))
                results.append({**result, "hosts_cpu": mode, "fleet_setup_s": setup})
        group.release(pids)
    group.remove()
    scratch.cleanup()
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=128)
    parser.add_argument("--runs", type=int, default=5, help="first-paint runs (median kept)")
    parser.add_argument("--paint-only", action="store_true")
    parser.add_argument("--concurrency", type=int, action="append",
                        help=f"fan-out width(s) to measure (default: the TUI's, "
                             f"{TUI_CONCURRENCY})")
    parser.add_argument("--in-process", action="store_true",
                        help="run the probes in the UI's process (the old way), not in the "
                             "probe worker")
    parser.add_argument("--hosts-cpu", action="append", choices=list(HOSTS_CPU),
                        help="how the loopback fleet gets CPU: 'idle' (an idle cgroup, as "
                             "remote hosts: they do not compete with the client) or 'shared' "
                             "(loopback's worst case); default: both, idle first")
    parser.add_argument("--workers", default="1", help="the session's pool of probe "
                        "workers: N, or auto (the TUI's default: one per core at 64+ hosts "
                        "each); 1: one worker, as before sharding")
    parser.add_argument("--db", help="the store the walk is recorded in (default: a fresh "
                                     "one in a temporary directory)")
    args = parser.parse_args(argv)

    load = os.getloadavg()[0]
    runs = [first_paint() for _ in range(args.runs)]
    paints = [paint for paint, _, _ in runs]
    median = statistics.median(paints)
    print(f"first paint (demo, 80x24, process start -> home rendered): median {median:.3f} s "
          f"(runs: {', '.join(f'{p:.3f}' for p in paints)}) target < {PAINT_TARGET_S:.1f} s "
          f"{'OK' if median < PAINT_TARGET_S else 'MISSED'}", flush=True)
    lists = [listed - paint for paint, listed, _ in runs]
    after = statistics.median(lists)
    print(f"match list (the demo symptom's ranking rendered) after the first paint: median "
          f"{after:.3f} s (runs: {', '.join(f'{p:.3f}' for p in lists)}) target < "
          f"{LIST_TARGET_S:.1f} s {'OK' if after < LIST_TARGET_S else 'MISSED'}; process CPU "
          f"to the list: median {statistics.median(cpu for _, _, cpu in runs):.3f} s; load "
          f"average {load:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores)",
          flush=True)
    if args.paint_only:
        return 0
    results = fan_out_bench(args.hosts, args.concurrency or [TUI_CONCURRENCY],
                            args.in_process, args.db, tuple(args.hosts_cpu or HOSTS_CPU),
                            None if args.workers == "auto" else int(args.workers))
    if isinstance(results, str):
        print(f"fan-out stall: not measured: {results}")
        return 2
    for result in results:
        if "skipped" in result:
            print(f"fleet on {result['hosts_cpu']} CPU: not measured: {result['skipped']}")
            continue
        print(f"fleet on {HOSTS_CPU[result['hosts_cpu']]}:")
        stall = max(0.0, result["max_gap_s"] - TICK_S)
        print(f"fan-out over {result['hosts']} loopback sshd hosts, concurrency "
              f"{result['concurrency']} (fleet up in {result['fleet_setup_s']:.1f} s): walk "
              f"{result['walk_s']:.2f} s to '{result['status']}' via "
              f"{' > '.join(result['path'])}; host states {', '.join(result['host_states'])}; "
              f"{result['probe_events']} probe events in {result['probe_messages']} "
              f"messages; probes ran in {result['where']} ({result['workers']} worker(s)); "
              f"load average {result['load'][0][0]:.1f} before, {result['load'][1][0]:.1f} "
              f"after ({os.cpu_count()} cores)")
        print(f"  event loop: {result['ticks']} ticks of {TICK_S * 1000:.0f} ms, longest gap "
              f"{result['max_gap_s'] * 1000:.1f} ms (stall {stall * 1000:.1f} ms), p99 gap "
              f"{result['p99_gap_s'] * 1000:.1f} ms; target: no stall > "
              f"{STALL_TARGET_S * 1000:.0f} ms {'OK' if stall <= STALL_TARGET_S else 'MISSED'}")
        own = max(0.0, result["max_own_gap_s"] - TICK_S)
        print(f"  without the time the event loop waited for a CPU (the machine's load): "
              f"longest stall {own * 1000:.1f} ms "
              f"{'OK' if own <= STALL_TARGET_S else 'MISSED'}")
        print(f"  the UI's process used {result['ui_cpu_s']:.2f} s of CPU during the walk; "
              f"recording took {result['record_cpu_s'] * 1000:.0f} ms of it on the walk's "
              f"thread over {result['record_steps']} steps (load average "
              f"{result['load'][1][0]:.1f})")
        busiest = sorted(result["threads"].items(), key=lambda kv: -kv[1])[:4]
        print("  by thread: " + ", ".join(f"{name} {used:.2f} s" for name, used in busiest))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
