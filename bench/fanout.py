"""Benchmark: diag's fan-out vs clush vs pdsh over N loopback sshd hosts.

Three workloads, each on the same fleet, key, known_hosts and concurrency:

1. ``uname -r``: the bare SSH layer;
2. ``diag probe versions``: the whole probe (script, parse, checks) beside clush/pdsh running
   the very same script;
3. a whole runbook: ``diag run hang`` (every probe step, connections reused across steps)
   beside clush running each of the scripts that walk ran, one after the other.

Not a test: run it by hand (as root, with openssh-server installed) to see where the SSH layer
stands against the tools operators already use::

    .venv/bin/python bench/fanout.py            # 32 128 512 hosts
    .venv/bin/python bench/fanout.py 32 128     # chosen sizes

Each size gets a fresh fleet of real sshd (tests/fleet/sshfleet.py). Every tool uses the same
client key and known_hosts, and a concurrency of 64 (diag's default; clush and pdsh via -f).
clush and pdsh reach each host's own port through a generated ssh_config (HostName/Port per
host), which is what they would use on a real fleet too. Timed:

- diag cold: fan_out over a new SSHTransport: TCP connect, key exchange, auth, command;
- diag warm: a second command over the same transport (connections reused: the common case
  inside one runbook session, where several probes hit the same nodes);
- clush -b and pdsh -R ssh: one ssh process per host, as they always do.

Loopback has no network latency, so this measures per-connection CPU cost (key exchange and
process spawning on a 2-core box), not WAN behaviour; on a real network the reuse gap grows.

Client CPU, apart from the remote side. On loopback every "host" shares this machine's cores, so
wall time mostly measures the remote scripts (the nccl probe scans the whole machine's /proc
once per simulated host). Beside each wall time the bench prints the *client's* CPU per
host-probe run: for diag, this process's own rusage (user + system, every thread; the sshd
servers and the scripts they run are other processes); for clush and pdsh, the rusage of the
tool and the ssh clients it spawned (RUSAGE_CHILDREN around the run). Connection set-up is
included (every workload starts with cold connections); diag's one-time start (imports, the
catalog, the runbook: what a `diag run` pays once whatever the fleet's size) is measured by a
two-host walk first and printed apart. The load average is printed with each
size: other jobs on the machine slow the wall times, and to a lesser degree the CPU figures.

Dead hosts (``--dead N``): the five-probe walk (versions, gpu, network, host, storage) over
all-healthy hosts, then over the same count with N of them replaced by servers that accept TCP
and never send an SSH banner (each costs a full connect timeout): a walk marks them after their
first failure and skips them in later probes, so the second walk should take at most about one
connect timeout longer. Printed with and without ``diag run``'s one retry at the end::

    .venv/bin/python bench/fanout.py --dead 50 128
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.fleet.fanout import fan_out  # noqa: E402
from assistant.runbook.engine import Walk  # noqa: E402
from assistant.runbook.library import get_runbook  # noqa: E402
from assistant.runbook.provider import FleetProvider  # noqa: E402
from assistant.store import Recorder, Store  # noqa: E402
from probes.base import get_probe  # noqa: E402
from tests.fleet import sshfleet  # noqa: E402

COMMAND = "uname -r"
EXPECTED = "5.15.0-105-generic"
CONCURRENCY = 64


def raise_fd_limit() -> int:
    """512 hosts mean ~1500 file descriptors in this process alone (sockets, channel pipes)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def time_diag(fleet: sshfleet.SSHFleet) -> tuple[float, float, int, int]:
    """(cold seconds, warm seconds, ok hosts cold, ok hosts warm)."""
    with fleet.transport(connect_timeout=30.0) as transport:
        start = time.monotonic()
        cold = fan_out(transport, fleet.names, COMMAND, concurrency=CONCURRENCY, timeout=60,
                       deadline=600)
        cold_s = time.monotonic() - start
        start = time.monotonic()
        warm = fan_out(transport, fleet.names, COMMAND, concurrency=CONCURRENCY, timeout=60,
                       deadline=600)
        warm_s = time.monotonic() - start

    def good(results: dict) -> int:
        return sum(r.state == "ok" and r.stdout.strip() == EXPECTED for r in results.values())

    return cold_s, warm_s, good(cold), good(warm)


def probe_script(name: str) -> str:
    """The script diag sends for a probe, exactly as the provider sends it."""
    return f"# diag probe: {name} (read-only)\n{get_probe(name).command({})}"


def cpu_self() -> float:
    """This process's CPU seconds so far (user + system, all threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_children() -> float:
    """CPU seconds of the waited-for children so far (a tool and the ssh clients it ran)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_diag_probe(fleet: sshfleet.SSHFleet, name: str) -> tuple[float, int, float]:
    """``diag probe NAME``: fan-out, parse and checks, cold connections: (seconds, ok hosts,
    client CPU seconds)."""
    with fleet.transport(connect_timeout=30.0) as transport:
        provider = FleetProvider(transport, concurrency=CONCURRENCY, deadline=600)
        began, start = cpu_self(), time.monotonic()
        outcome = provider.run_probe(name, fleet.names, {}, lambda event: None)
        elapsed, cpu = time.monotonic() - start, cpu_self() - began
    return elapsed, sum(r.state == "ok" for r in outcome.hosts.values()), cpu


def time_diag_runbook(fleet: sshfleet.SSHFleet, runbook: str,
                      store: Store | None = None) -> tuple[float, list[str], int, float, int]:
    """A whole walk until its first question or conclusion, cold connections: (seconds, the
    probes it ran, connections opened, client CPU seconds, host-probe runs). With *store*, every
    step is recorded into it as ``diag run`` records (session opened, Recorder following)."""
    with fleet.transport(connect_timeout=30.0) as transport:
        provider = FleetProvider(transport, concurrency=CONCURRENCY, deadline=600)
        walk = Walk(get_runbook(runbook), fleet.names, provider)
        began, start = cpu_self(), time.monotonic()
        if store is not None:
            session = store.open_session(runbook, fleet.names, {})
            Recorder(store, session, raw=provider.raw).follow(walk)
        walk.run()
        elapsed, cpu = time.monotonic() - start, cpu_self() - began
        opened = transport.connections_opened
        RESOURCES["fds"] = len(os.listdir("/proc/self/fd"))  # connections still open
        RESOURCES["threads"] = threading.active_count()
    RESOURCES["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    probes = [o.probe for s in walk.steps for o in s.outcomes
              if get_probe_or_none(o.probe) is not None]
    runs = sum(len(o.hosts) for s in walk.steps for o in s.outcomes)
    return elapsed, probes, opened, cpu, runs


# What the last walk held at its end, connections open: for docs/scaling.md.
RESOURCES: dict[str, float] = {}


def get_probe_or_none(name: str) -> object | None:
    try:
        return get_probe(name)
    except KeyError:
        return None


def time_diag_process(fleet: sshfleet.SSHFleet, hosts: list[str],
                      db: Path) -> tuple[float, float]:
    """``diag run hang --auto`` as an operator runs it, in its own process over *hosts*
    (recorded into *db*): (seconds, that process's CPU seconds: start-up, SSH, parsing,
    checks and recording, everything)."""
    env = dict(os.environ, DIAG_DB=str(db), XDG_CACHE_HOME=str(db.parent / "cache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed diag starts from compiled bytecode
    began, start = cpu_children(), time.monotonic()
    done = subprocess.run([str(Path(sys.executable).parent / "diag"), "run", "hang",
                           "--inventory", str(fleet.inventory), "--hosts", ",".join(hosts),
                           "--auto", "--json", "--concurrency", str(CONCURRENCY)],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    elapsed, cpu = time.monotonic() - start, cpu_children() - began
    # 1 findings, 3 hosts not probed (this fleet has no GPUs: the gpu probe's output does not
    # parse), 4 stopped at a question: each is a whole walk; anything else is not
    if done.returncode not in (0, 1, 3, 4) or '"steps"' not in done.stdout:
        raise RuntimeError(f"diag run failed ({done.returncode}): {done.stderr[-500:]}")
    return elapsed, cpu


def time_clush(fleet: sshfleet.SSHFleet,
               command: str = COMMAND) -> tuple[float, int, float] | str:
    """(seconds, ok hosts, client CPU seconds: clush and its ssh processes)."""
    if shutil.which("clush") is None:
        return "missing (apt-get install clustershell)"
    nodes = ",".join(fleet.names)
    began, start = cpu_children(), time.monotonic()
    out = subprocess.run(["clush", "-w", nodes, "-b", "-f", str(CONCURRENCY), "-l", fleet.user,
                          "-o", f"-F {fleet.ssh_config}", "-t", "30", command],
                         capture_output=True, text=True)
    elapsed, cpu = time.monotonic() - start, cpu_children() - began
    # -b folds identical output: "node[001-512] (512)" heads the one group we expect
    ok = 0
    lines = out.stdout.splitlines()
    for i, line in enumerate(lines):
        if i + 2 < len(lines) and lines[i + 2].strip() == EXPECTED and line.endswith(")"):
            ok += int(line.rsplit("(", 1)[1].rstrip(")"))
    return elapsed, ok, cpu


def time_pdsh(fleet: sshfleet.SSHFleet,
              command: str = COMMAND) -> tuple[float, int, float] | str:
    """(seconds, ok hosts, client CPU seconds: pdsh and its ssh processes)."""
    if shutil.which("pdsh") is None:
        return "missing (apt-get install pdsh)"
    env = dict(os.environ, PDSH_SSH_ARGS_APPEND=f"-F {fleet.ssh_config}")
    began, start = cpu_children(), time.monotonic()
    out = subprocess.run(["pdsh", "-R", "ssh", "-f", str(CONCURRENCY), "-l", fleet.user,
                          "-w", ",".join(fleet.names), command],
                         capture_output=True, text=True, env=env)
    elapsed, cpu = time.monotonic() - start, cpu_children() - began
    ok = sum(line.split(": ", 1)[-1] == EXPECTED for line in out.stdout.splitlines())
    return elapsed, ok, cpu


def bench(n: int, diag_only: bool = False) -> list[str]:
    per_address = 1 if n <= 200 else 64  # large fleets: distinct ports on fewer addresses
    start = time.monotonic()
    with sshfleet.SSHFleet(n, hosts_per_address=per_address, log_level="INFO",
                           keep=False) as fleet:
        setup_s = time.monotonic() - start
        cold_s, warm_s, cold_ok, warm_ok = time_diag(fleet)
        rows = [("diag fan_out cold (connect + run)", cold_s, cold_ok),
                ("diag fan_out warm (reused connections)", warm_s, warm_ok)]
        others = () if diag_only else (("clush -b", time_clush(fleet)),
                                       ("pdsh -R ssh", time_pdsh(fleet)))
        for name, outcome in others:
            if isinstance(outcome, str):
                rows.append((f"{name}: {outcome}", float("nan"), 0))
            else:
                rows.append((name, outcome[0], outcome[1]))
        probe_rows = extra_workloads(fleet, diag_only)
    lines = [f"{n} hosts (fleet started in {setup_s:.1f}s, concurrency {CONCURRENCY}, load "
             f"average {load()})",
             f"  {'tool':42} {'seconds':>8} {'ok':>5} {'x diag cold':>12} {'x diag warm':>12}"]
    for name, seconds, ok in rows:
        lines.append(f"  {name:42} {seconds:8.2f} {ok:5d} {seconds / cold_s:12.2f} "
                     f"{seconds / warm_s:12.2f}")
    return lines + probe_rows


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def figures(outcome: tuple[float, int, float] | str, runs: int) -> str:
    """'2.41 s, 9.8 ms CPU/run' for a tool's run over *runs* host-probe runs."""
    if isinstance(outcome, str):
        return outcome
    return f"{outcome[0]:.2f} s, {outcome[2] / runs * 1e3:.1f} ms CPU/run"


def warm_up(fleet: sshfleet.SSHFleet) -> float:
    """A walk over two hosts first: the probe modules imported, the catalog read and the
    runbook loaded once per process (what a `diag run` pays once, whatever the fleet's size),
    so the figures below are per host. Returns that one-time CPU."""
    began = cpu_self()
    with fleet.transport(connect_timeout=30.0) as transport:
        provider = FleetProvider(transport, concurrency=CONCURRENCY, deadline=600)
        Walk(get_runbook("hang"), fleet.names[:2], provider).run()
    return cpu_self() - began


def extra_workloads(fleet: sshfleet.SSHFleet, diag_only: bool = False) -> list[str]:
    """``diag probe versions`` and a whole ``diag run hang`` beside clush/pdsh, each with the
    client's CPU per host-probe run; the walk once more recorded into a store, as ``diag run``
    does (the figure issue 15 targets: SSH, parsing, checks and recording together)."""
    n = len(fleet.names)
    once = warm_up(fleet)
    script = probe_script("versions")
    probe_s, probe_ok, probe_cpu = time_diag_probe(fleet, "versions")
    tools = "" if diag_only else (f"; clush {figures(time_clush(fleet, script), n)}; "
                                  f"pdsh {figures(time_pdsh(fleet, script), n)}")
    lines = [f"  diag's one-time start (imports, catalog, runbook; a walk over 2 hosts): "
             f"{once:.2f} s CPU, left out of the per-run figures below",
             f"  probe versions ({n} host-probe runs): diag {probe_s:.2f} s, "
             f"{probe_cpu / n * 1e3:.1f} ms CPU/run ({probe_ok}/{n} ok){tools}"]
    with tempfile.TemporaryDirectory() as scratch:
        store = Store(Path(scratch) / "bench.duckdb")
        store.write(lambda con: None)  # the file created and migrated: not per-run work
        rec_s, _, _, rec_cpu, rec_runs = time_diag_runbook(fleet, "hang", store)
        two = fleet.names[:2]
        time_diag_process(fleet, two, Path(scratch) / "cache.duckdb")  # the start cache built
        _, few_cpu = time_diag_process(fleet, two, Path(scratch) / "few.duckdb")
        all_s, all_cpu = time_diag_process(fleet, fleet.names, Path(scratch) / "all.duckdb")
    walk_s, probes, opened, walk_cpu, runs = time_diag_runbook(fleet, "hang")
    lines.append(f"  `diag run hang --auto` as its own process (start-up included): {all_s:.2f} s, "
                 f"{all_cpu:.2f} s CPU = {all_cpu / runs * 1e3:.1f} ms CPU/run; over 2 hosts "
                 f"{few_cpu:.2f} s CPU, so {(all_cpu - few_cpu) / (runs - 2 * runs / n) * 1e3:.1f}"
                 " ms CPU per further host-probe run")
    lines.append(f"  runbook hang recorded into a store (as diag run does; {rec_runs} host-probe "
                 f"runs): diag {rec_s:.2f} s, {rec_cpu / rec_runs * 1e3:.1f} ms CPU/run")
    per_tool = []
    for tool in () if diag_only else (time_clush, time_pdsh):
        outcomes = [tool(fleet, probe_script(p)) for p in probes]
        done = [o for o in outcomes if not isinstance(o, str)]
        missing = [o for o in outcomes if isinstance(o, str)]
        per_tool.append(missing[0] if missing else figures(
            (sum(o[0] for o in done), 0, sum(o[2] for o in done)), runs))
    lines.append(f"  runbook hang ({len(probes)} probe steps: {', '.join(probes)}; {runs} "
                 f"host-probe runs): diag {walk_s:.2f} s, {walk_cpu / runs * 1e3:.1f} ms "
                 f"CPU/run, {opened} connections for {n} hosts"
                 + ("" if diag_only else
                    f"; one run per step: clush {per_tool[0]}; pdsh {per_tool[1]}"))
    lines.append(f"  diag at the walk's end, connections open: {RESOURCES['fds']:.0f} file "
                 f"descriptors, {RESOURCES['threads']:.0f} threads; peak RSS "
                 f"{RESOURCES['max_rss_mb']:.0f} MB")
    return lines


DEAD_PROBES = ["versions", "gpu", "network", "host", "storage"]


def five_probe_walk(fleet: sshfleet.SSHFleet, hosts: list[str],
                    connect_timeout: float) -> tuple[float, float, FleetProvider]:
    """(walk seconds, seconds of the one retry of the dead hosts at the end, provider)."""
    with fleet.transport(connect_timeout=connect_timeout) as transport:
        provider = FleetProvider(transport, concurrency=CONCURRENCY, deadline=600)
        start = time.monotonic()
        for name in DEAD_PROBES:
            provider.run_probe(name, hosts, {}, lambda event: None)
        walk_s = time.monotonic() - start
        start = time.monotonic()
        provider.retry_dead()
        return walk_s, time.monotonic() - start, provider


def bench_dead(n: int, dead: int, connect_timeout: float) -> list[str]:
    """A five-probe walk over *n* healthy hosts, then over n - dead healthy + *dead* silent."""
    silent = {f"mute{i:03d}": "no-banner" for i in range(1, dead + 1)}
    per_address = 1 if n <= 200 else 64
    with sshfleet.SSHFleet(n, faulty=silent, hosts_per_address=per_address,
                           log_level="INFO", keep=False) as fleet:
        healthy_s, _, _ = five_probe_walk(fleet, fleet.healthy[:n], connect_timeout)
        mixed = [*fleet.healthy[:n - dead], *silent]
        mixed_s, retry_s, provider = five_probe_walk(fleet, mixed, connect_timeout)
    return [f"{n} hosts, five-probe walk ({', '.join(DEAD_PROBES)}), connect timeout "
            f"{connect_timeout:g} s, load average {load()}:",
            f"  all healthy: {healthy_s:.2f} s",
            f"  {dead} silent (no SSH banner), marked dead: {len(provider.dead)}: "
            f"{mixed_s:.2f} s (+{mixed_s - healthy_s:.2f} s); with the one retry at the end "
            f"(as diag run does): {mixed_s + retry_s:.2f} s (+{mixed_s + retry_s - healthy_s:.2f}"
            " s)"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, help="fleet sizes (default 32 128 512)")
    parser.add_argument("--diag-only", action="store_true",
                        help="leave clush and pdsh out (diag's own figures only: quicker, and "
                        "their ssh processes do not load the machine during diag's runs)")
    parser.add_argument("--dead", type=int, metavar="N",
                        help="instead: the five-probe walk with N silent hosts vs none")
    parser.add_argument("--connect-timeout", type=float, default=5.0, metavar="S",
                        help="with --dead: the connect timeout (default 5, diag's own)")
    args = parser.parse_args(argv)
    reason = sshfleet.unavailable_reason()
    if reason:
        print(f"cannot run the benchmark: {reason}", file=sys.stderr)
        return 2
    sizes = args.sizes or [32, 128, 512]
    print(f"file descriptor limit: {raise_fd_limit()}")
    if args.dead is not None:
        for n in sizes:
            print("\n".join(bench_dead(n, args.dead, args.connect_timeout)), flush=True)
        return 0
    for tool in ("clush", "pdsh"):
        if shutil.which(tool) is None:
            print(f"note: {tool} is not installed; its rows will say so "
                  f"(apt-get install {'clustershell' if tool == 'clush' else tool})")
    for n in sizes:
        print("\n".join(bench(n, args.diag_only)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
