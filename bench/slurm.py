"""Benchmark: probing a 4-node job over srun (both fan-out modes) beside SSH, same machine.

Brings up the real local Slurm of tests/slurm/slurmcluster.py (munged, slurmctld, N slurmd)
and N loopback sshd of tests/fleet/sshfleet.py, submits an N-node job, and times:

1. a bare command (``true``) on every node: the transport's own cost;
2. the whole ``versions`` probe (script, parse, checks) through diag's FleetProvider, as
   ``diag probe versions --job ID`` runs it;

for:

- ``srun node``: one ``srun --jobid --overlap -N1 -w NODE`` per host, in parallel;
- ``srun step``: one ``srun -N N --ntasks-per-node=1 --label`` step for all hosts;
- ``ssh cold``: a new SSHTransport each round (TCP, key exchange, auth, command);
- ``ssh warm``: one SSHTransport, connections reused (the case inside a runbook session).

Each figure is the median of ROUNDS rounds (and the min/max). Not a test: run it by hand, as
root with the Slurm and OpenSSH packages installed::

    .venv/bin/python bench/slurm.py            # 4 nodes
    .venv/bin/python bench/slurm.py 4 8        # 4 and 8 nodes

All "nodes" are this machine, so this measures per-step/per-connection overhead on a 2-core box
(srun talks to slurmctld for every step; SSH does a key exchange per new connection), not
network latency. srun hands the caller's environment to the step (Slurm's default
``--export=ALL``) while sshd gives the login's: the benchmark runs with the system PATH so the
probe script runs the same tools both ways (a pyenv shim on PATH alone made ``python3`` ten
times slower under srun and swamped the transport's cost).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.fleet.fanout import fan_out  # noqa: E402
from assistant.fleet.slurm import SlurmTransport  # noqa: E402
from assistant.fleet.transport import Transport  # noqa: E402
from assistant.runbook.provider import FleetProvider  # noqa: E402
from tests.fleet import sshfleet  # noqa: E402
from tests.slurm import slurmcluster  # noqa: E402

ROUNDS = 15
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"


def timed(rounds: int, fn: Callable[[], bool]) -> tuple[float, float, float, int]:
    """(median, min, max) seconds of *fn* over *rounds*, and how many rounds were all-ok."""
    times, good = [], 0
    for _ in range(rounds):
        start = time.monotonic()
        good += bool(fn())
        times.append(time.monotonic() - start)
    return statistics.median(times), min(times), max(times), good


def bare(transport_of: Callable[[], Transport], hosts: list[str]) -> Callable[[], bool]:
    def run() -> bool:
        transport = transport_of()
        results = fan_out(transport, hosts, "true", label="bench", timeout=30)
        return all(r.state == "ok" for r in results.values())
    return run


def probe(transport_of: Callable[[], Transport], hosts: list[str]) -> Callable[[], bool]:
    def run() -> bool:
        outcome = FleetProvider(transport_of()).run_probe("versions", hosts, {},
                                                          lambda event: None)
        return all(r.state == "ok" for r in outcome.hosts.values())
    return run


def bench(nodes: int) -> None:
    with slurmcluster.SlurmCluster(nodes=nodes) as cluster, \
            sshfleet.SSHFleet(nodes, prefix="gpu") as fleet:
        os.environ["SLURM_CONF"] = str(cluster.conf)
        os.environ["PATH"] = SYSTEM_PATH
        job = cluster.sbatch("-N", str(nodes))
        cluster.wait_state(job)
        names = cluster.names
        warm_ssh = fleet.transport(connect_timeout=10)
        fan_out(warm_ssh, fleet.names, "true", timeout=30)  # connect once
        runs: dict[str, Callable[[], Transport]] = {
            "srun node": lambda: SlurmTransport(job, names, mode="node"),
            "srun step": lambda: SlurmTransport(job, names, mode="step"),
            "ssh cold": lambda: fleet.transport(connect_timeout=10),
            "ssh warm": lambda: warm_ssh,
        }
        print(f"\n{nodes} nodes, median of {ROUNDS} rounds (min-max), seconds")
        print(f"{'transport':<10} {'bare command':>24} {'versions probe':>24}")
        for name, transport_of in runs.items():
            hosts = fleet.names if name.startswith("ssh") else names
            cmd = timed(ROUNDS, bare(transport_of, hosts))
            prb = timed(ROUNDS, probe(transport_of, hosts))
            print(f"{name:<10} {cmd[0]:>8.3f} ({cmd[1]:.3f}-{cmd[2]:.3f}) {cmd[3]:>2}ok "
                  f"{prb[0]:>8.3f} ({prb[1]:.3f}-{prb[2]:.3f}) {prb[3]:>2}ok")
        warm_ssh.close()


def main() -> None:
    reason = slurmcluster.unavailable_reason() or sshfleet.unavailable_reason()
    if reason:
        sys.exit(f"cannot run: {reason}")
    for nodes in [int(a) for a in sys.argv[1:]] or [4]:
        bench(nodes)


if __name__ == "__main__":
    main()
