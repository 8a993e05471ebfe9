"""Hang forensics over the loopback SSH fleet: real py-spy dumps of real blocked processes.

Three "nodes" run two real Python ranks each (RANK set, as torchrun sets it), all blocked in a
function named ``all_reduce_wait`` except rank 3, deliberately stuck in ``load_next_batch``.
The stacks probe runs over SSH as the fleet's unprivileged user, py-spy dumps every rank, and
the outlier must come back with its rank and its node. Two more nodes show the refusals: one
without py-spy, one whose only rank belongs to root (ptrace refused). The ranks probe then
reads a generated 64-rank log set from "shared storage" over the same SSH fleet.

All fleet hosts share this machine's process table, so each host gets a ``pgrep`` that keeps
its own ranks only (their command line carries ``--node=HOST``) and a ``py-spy`` that execs
the real binary. Needs root (the fleet does) and py-spy (``pip install py-spy``); skipped where
ptrace between processes of one user is not permitted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.runbook.provider import FleetProvider
from probes.model import ProbeOutcome
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import HEALTHY

pytestmark = pytest.mark.ssh

ROOT = Path(__file__).resolve().parents[2]
NODES = HEALTHY[-5:-2]  # two ranks each
NO_PYSPY, DENIED = HEALTHY[-2], HEALTHY[-1]
OUTLIER_RANK = 3

RANKPROC = '''
import ctypes, os, sys

def allow_ptrace():
    # kernel.yama.ptrace_scope=1 lets only ancestors trace a process; a rank that wants to be
    # inspectable says so (PR_SET_PTRACER, PR_SET_PTRACER_ANY). EINVAL without yama: harmless.
    try:
        ctypes.CDLL(None).prctl(0x59616D61, ctypes.c_ulong(2**64 - 1), 0, 0, 0)
    except Exception:
        pass

def all_reduce_wait():
    sys.stdin.buffer.read(1)

def load_next_batch():
    sys.stdin.buffer.read(1)

def train_step(step):
    if os.environ.get("OUTLIER") == "1":
        load_next_batch()
    else:
        all_reduce_wait()

def main():
    allow_ptrace()
    print("ready", flush=True)
    train_step(1580)

main()
'''

# Keeps this host's ranks among what the real pgrep finds.
PGREP = ('for p in $({real} "$@"); do tr "\\0" " " < /proc/$p/cmdline 2>/dev/null '
         '| grep -q -- "--node=$DIAG_FLEET_HOST " && echo "$p"; done; true')


def _python_for(user: str) -> str | None:
    """An interpreter *user* can run (the venv's may live under root's home)."""
    candidates = [sys.executable, os.path.realpath(sys.executable), "/usr/bin/python3",
                  "/usr/local/bin/python3", shutil.which("python3") or ""]
    for python in dict.fromkeys(c for c in candidates if c):
        try:
            ok = subprocess.run([python, "-c", "import ctypes"], user=user, group=user,
                                extra_groups=[], timeout=30, capture_output=True).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return python
    return None


def _pyspy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return found if os.access(found, os.X_OK) else None


class Ranks:
    """The blocked rank processes of the test, killed by pid at the end."""

    def __init__(self, directory: Path, python: str) -> None:
        self.script = directory / "rankproc.py"
        self.script.write_text(RANKPROC)
        self.script.chmod(0o644)
        self.python = python
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pids: dict[int, int] = {}  # rank -> pid

    def start(self, rank: int, node: str, user: str | None, outlier: bool = False) -> None:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "RANK": str(rank), "WORLD_SIZE": "8"}
        if outlier:
            env["OUTLIER"] = "1"
        # the user's own group too: ptrace compares gids as well as uids
        ids = {"user": user, "group": user, "extra_groups": []} if user else {}
        proc = subprocess.Popen([self.python, str(self.script), f"--node={node}"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                cwd=self.script.parent, **ids)
        self.procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        self.pids[rank] = proc.pid

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


@pytest.fixture()
def ranks(fleet: sshfleet.SSHFleet) -> Iterator[Ranks]:
    pyspy = _pyspy()
    if pyspy is None:
        pytest.skip("py-spy is not installed (pip install py-spy)")
    python = _python_for(fleet.user)
    if python is None:
        pytest.skip(f"no Python interpreter the {fleet.user} user can run")
    pgrep = shutil.which("pgrep")
    if pgrep is None:
        pytest.skip("pgrep (procps) is not installed")
    directory = Path(tempfile.mkdtemp(prefix="diag-pyspy-"))
    directory.chmod(0o755)
    procs = Ranks(directory, python)
    tools = {host: {"pgrep": PGREP.format(real=pgrep)} for host in [*NODES, NO_PYSPY, DENIED]}
    for host in [*NODES, DENIED]:
        tools[host]["py-spy"] = f'exec {pyspy} "$@"'
    try:
        for host, scripts in tools.items():
            for tool, body in scripts.items():
                fleet.set_tool(host, tool, body)
        for i, node in enumerate(NODES):
            for rank in (2 * i, 2 * i + 1):
                procs.start(rank, node, fleet.user, outlier=rank == OUTLIER_RANK)
        procs.start(6, NO_PYSPY, fleet.user)
        procs.start(7, DENIED, None)  # root's process: the fleet user may not ptrace it
        yield procs
    finally:
        procs.stop()
        for host, scripts in tools.items():
            for tool in scripts:
                member = fleet.members[host]
                assert member.dir is not None
                (member.dir / "bin" / tool).unlink(missing_ok=True)
        shutil.rmtree(directory, ignore_errors=True)


def run_probe(fleet: sshfleet.SSHFleet, name: str, hosts: list[str],
              params: dict) -> ProbeOutcome:
    with fleet.transport(connect_timeout=5.0) as transport:
        provider = FleetProvider(transport, concurrency=8)
        return provider.run_probe(name, hosts, params, lambda event: None)


def test_pyspy_over_ssh_finds_the_outlier_rank(fleet: sshfleet.SSHFleet, ranks: Ranks) -> None:
    with fleet.transport() as transport:  # can the fleet user ptrace its own processes here?
        probe = transport.run(NODES[0], f"py-spy dump --pid {ranks.pids[0]}", timeout=30)
    if "all_reduce_wait" not in probe.stdout:
        pytest.skip(f"py-spy cannot attach here: {(probe.stdout + probe.stderr).strip()[:200]}")

    outcome = run_probe(fleet, "stacks", [*NODES, NO_PYSPY, DENIED],
                        {"process_pattern": "rankproc.py"})
    assert {h: r.state for h, r in outcome.hosts.items()} == dict.fromkeys(
        [*NODES, NO_PYSPY, DENIED], "ok")
    for i, node in enumerate(NODES):
        facts = outcome.hosts[node].facts
        assert sorted(s["rank"] for s in facts["stacks"]) == [2 * i, 2 * i + 1]
        assert facts["groups"] == (2 if node == NODES[1] else 1)
        assert facts["uid"] != 0  # dumped by the unprivileged fleet user

    outliers = [f for f in outcome.findings if f.code == "outlier-stack"]
    assert len(outliers) == 1, outcome.findings
    outlier = outliers[0]
    assert outlier.hosts == (NODES[1],)
    assert outlier.evidence["ranks"] == [
        {"rank": OUTLIER_RANK, "host": NODES[1], "pid": ranks.pids[OUTLIER_RANK]}]
    assert outlier.evidence["frames"][0].startswith("load_next_batch (")
    assert outlier.evidence["frames"][1].startswith("train_step (")
    assert outlier.evidence["majority_frames"][0].startswith("all_reduce_wait (")
    assert (outlier.evidence["majority_count"], outlier.evidence["ranks_compared"]) == (5, 6)
    assert f"rank {OUTLIER_RANK} on {NODES[1]} is in load_next_batch" in outlier.message

    refused = {f.hosts[0]: f.message for f in outcome.findings if f.code == "not-measured"}
    assert set(refused) == {NO_PYSPY, DENIED}
    assert "py-spy is not installed" in refused[NO_PYSPY]
    assert "ptrace not permitted" in refused[DENIED]


def _bench_generator():
    from bench import ranks

    return ranks


def test_ranks_probe_over_ssh_names_the_straggler_node(fleet: sshfleet.SSHFleet) -> None:
    # 64 ranks on node001-node008 logging to shared storage; rank 37 never issued work 1580
    gen = _bench_generator()
    directory = Path(tempfile.mkdtemp(prefix="diag-ranklogs-"))
    try:
        directory.chmod(0o755)
        gen.write_job(directory, gen.job(64, {37: gen.RankSpec("quiet")}, noise_lines=50,
                                         host_fmt="node{:03d}"))
        hosts = HEALTHY[:8]
        outcome = run_probe(fleet, "ranks", hosts, {"logs": f"{directory}/rank*.log"})
        assert {r.state for r in outcome.hosts.values()} == {"ok"}
        assert outcome.hosts[hosts[0]].facts["log_files_total"] == 64
        assert [(f.code, f.hosts) for f in outcome.findings] == [("straggler-rank", ("node005",))]
        assert outcome.findings[0].evidence["ranks"][0]["rank"] == 37
    finally:
        shutil.rmtree(directory, ignore_errors=True)
