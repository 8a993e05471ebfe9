"""A real Slurm cluster on this one machine, for tests and benchmarks of diag's Slurm support.

Mocking srun and sinfo would test our assumptions about Slurm, not Slurm. Instead this starts
the real daemons (Debian's ``slurmctld``, ``slurmd``, ``munge``) under a private temp directory:
munged with its own socket and key, one slurmctld, and one slurmd per node (``slurmd -N
gpu00N`` on its own port; Debian's build allows several on one host), each node with 8 fake
GPUs: character devices made with ``mknod`` (Slurm refuses plain files, and count-only GRES
make nodes INVAL). Nothing system-wide is touched: ``SLURM_CONF`` points at our own config
and every client call here passes it in its environment.

What the setup has to respect, measured on this kind of machine (Debian 12, Slurm 22.05):

- munged refuses group-writable or munge-owned directories: the temp dir is root-owned 0755.
- Start order: munged, slurmctld (wait until ``scontrol ping`` says UP), then the slurmds;
  ready when ``sinfo -N`` shows every node idle. The first job waits a scheduling pass
  (~3 s): callers poll for RUNNING, never sleep a fixed time.
- With a wrong config ``scontrol`` retries ~60 s, ``srun`` to a SIGSTOPped slurmd blocks
  forever: every call here has a timeout.
- Daemons run in the foreground (``-D``/``-F``) as our children with ``PR_SET_PDEATHSIG``, so
  a killed test run does not leave them behind, and are stopped by their pid (checked against
  ``/proc/PID/cmdline`` first, pids wrap fast). Jobs are cancelled before the daemons stop.

Requirements: root, and the Debian packages ``slurmctld slurmd slurm-client munge``.
:func:`unavailable_reason` says why a cluster cannot start, for pytest.skip.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("munged", "munge", "slurmctld", "slurmd", "sinfo", "squeue", "scontrol", "sbatch",
            "srun", "scancel")
PACKAGES = "slurmctld slurmd slurm-client munge"
PORT_RANGE = (33000, 36000)  # clear of the SSH fleet's range and of Linux's ephemeral ports

_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _child_setup() -> None:  # runs in the forked child, before exec
    os.setsid()
    # a slurmstepd torn down with its slurmd may abort: no core files from test daemons
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if _libc is not None:
        _libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: die with the test process


def unavailable_reason() -> str | None:
    """Why a cluster cannot start here, or None when it can."""
    if not sys.platform.startswith("linux"):
        return "a local Slurm cluster needs Linux"
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root (munged, slurmd and mknod'd GPU devices)"
    missing = [b for b in BINARIES if shutil.which(b) is None
               and not os.path.exists(f"/usr/sbin/{b}")]
    if missing:
        return (f"{', '.join(missing)} not found: install Slurm "
                f"(apt-get install --no-install-recommends {PACKAGES})")
    return None


def skip_or_fail(reason: str) -> None:
    """Skip where Slurm cannot run — but CI sets DIAG_REQUIRE_SLURM, and there a skip is a
    failure: the Slurm tests must really run somewhere."""
    import pytest

    if os.environ.get("DIAG_REQUIRE_SLURM"):
        pytest.fail(f"DIAG_REQUIRE_SLURM is set but a Slurm cluster cannot start: {reason}")
    pytest.skip(reason)


def _which(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> int:
    """The first of *count* consecutive free TCP ports (slurmctld, then one per slurmd)."""
    for _ in range(200):
        base = random.randrange(*PORT_RANGE)
        if all(_port_free(base + i) for i in range(count)):
            return base
    raise RuntimeError("no run of free ports for Slurm")


@dataclass
class SlurmCluster:
    """munged + slurmctld + one slurmd per node, all under one temp dir.

    *nodes*: node count (names ``{prefix}001``...), *gpus* fake GPUs per node of *gpu_type*.
    A second partition *small* (the first two nodes, MaxNodes=1) gives jobs a partition limit
    to hit. Use as a context manager, or start()/stop().
    """

    nodes: int = 4
    gpus: int = 8
    gpu_type: str = "h100"
    cpus: int = 8
    prefix: str = "gpu"
    keep: bool = field(default_factory=lambda: bool(os.environ.get("DIAG_KEEP_SLURM")))

    def __post_init__(self) -> None:
        self.names = [f"{self.prefix}{i:03d}" for i in range(1, self.nodes + 1)]
        self.dir = Path()
        self.conf = Path()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.base_port = 0

    # --------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> SlurmCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def env(self) -> dict[str, str]:
        """The environment every Slurm client call (and diag) needs to reach this cluster."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    @property
    def nodelist(self) -> str:
        return f"{self.prefix}[001-{self.nodes:03d}]"

    def start(self, ready_timeout: float = 30.0) -> None:
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        self.dir = Path(tempfile.mkdtemp(prefix="diag-slurm-"))
        self.dir.chmod(0o755)  # munged refuses a group-writable path
        try:
            self._start(ready_timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, ready_timeout: float) -> None:
        deadline = time.monotonic() + ready_timeout
        for sub in ("munge", "state", "log", "run", "out"):
            (self.dir / sub).mkdir(mode=0o755)
        key = self.dir / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.socket = self.dir / "munge" / "munge.sock"
        self._spawn("munged", [_which("munged"), "-F", "-f", f"--socket={self.socket}",
                               f"--key-file={key}", f"--pid-file={self.dir}/munge/munged.pid",
                               f"--log-file={self.dir}/log/munged.log",
                               f"--seed-file={self.dir}/munge/munged.seed"])
        self._wait(lambda: self.socket.exists(), deadline, "munged socket")
        self.base_port = _free_ports(self.nodes + 1)
        self._write_config()
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-c", "-f", str(self.conf)])
        self._wait(lambda: "is UP" in self.run(["scontrol", "ping"], timeout=5).stdout,
                   deadline, "slurmctld (scontrol ping)")
        for name in self.names:
            self._spawn(f"slurmd-{name}", [_which("slurmd"), "-D", "-N", name,
                                           "-f", str(self.conf)])
        self._wait(self._all_idle, deadline, "every node idle in sinfo")

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        log = open(self.dir / "log" / f"{name}.stderr", "wb")  # noqa: SIM115 - child owns it
        try:
            self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=log, env=self.env, cwd=self.dir,
                                                preexec_fn=_child_setup)
        finally:
            log.close()

    def _wait(self, ready: object, deadline: float, what: str) -> None:
        assert callable(ready)
        while True:
            dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
            if dead:
                raise RuntimeError(f"Slurm daemon(s) exited while waiting for {what}: {dead}; "
                                   f"logs in {self.dir / 'log'}")
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                if ready():
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}; logs in {self.dir / 'log'}")
            time.sleep(0.05)

    def _all_idle(self) -> bool:
        out = self.run(["sinfo", "-N", "-h", "-o", "%N %T"], timeout=5).stdout.split()
        states = dict(zip(out[::2], out[1::2], strict=False))
        return all(states.get(n) == "idle" for n in self.names)

    def _write_config(self) -> None:
        d, last = self.dir, self.base_port + self.nodes
        devices = d / "dev"
        gres_lines = ["AutoDetect=off"]
        for name in self.names:
            (devices / name).mkdir(parents=True)
            (d / "state" / name).mkdir()
            for i in range(self.gpus):
                os.mknod(devices / name / f"nvidia{i}", 0o666 | 0o020000, os.makedev(1, 3))
            gres_lines.append(f"NodeName={name} Name=gpu Type={self.gpu_type} "
                              f"File={devices / name}/nvidia[0-{self.gpus - 1}]")
        (d / "gres.conf").write_text("\n".join(gres_lines) + "\n")
        small = ",".join(self.names[:2])
        lines = [
            "ClusterName=diagtest",
            f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
            f"SlurmctldPort={self.base_port}",
            f"SlurmdPort={self.base_port + 1}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.socket}",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/state/%n",
            f"SlurmctldPidFile={d}/run/slurmctld.pid", f"SlurmdPidFile={d}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "SlurmdParameters=config_overrides", "ReturnToService=2", "MailProg=/bin/true",
            "GresTypes=gpu", "MpiDefault=none", "SchedulerType=sched/backfill",
            "SchedulerParameters=batch_sched_delay=0",  # else every job waits ~3 s to start
            "MessageTimeout=5", "SlurmdTimeout=300", "InactiveLimit=0", "KillWait=2",
            f"NodeName={self.nodelist} NodeHostname={self.nodelist} NodeAddr=127.0.0.1 "
            f"Port=[{self.base_port + 1}-{last}] CPUs={self.cpus} "
            f"Gres=gpu:{self.gpu_type}:{self.gpus} State=UNKNOWN",
            f"PartitionName=gpu Nodes={self.nodelist} Default=YES MaxTime=INFINITE State=UP",
            f"PartitionName=small Nodes={small} MaxNodes=1 MaxTime=60 State=UP",
        ]
        self.conf = d / "slurm.conf"
        self.conf.write_text("\n".join(lines) + "\n")
        self.conf.chmod(0o644)

    def stop(self) -> None:
        """Cancel every job, stop the daemons by pid, remove the directory (unless *keep*).

        Jobs go first and are waited for (bounded): a slurmd whose batch job is still being
        torn down waits for a controller that is no longer there. Each daemon gets SIGTERM and
        a short grace, then SIGKILL to its process group: teardown never takes long.
        """
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            with contextlib.suppress(Exception):
                os.kill(ctld.pid, signal.SIGCONT)  # a test may have stopped it
                self.run(["scancel", "--full", "-u", "root"], timeout=5)
                deadline = time.monotonic() + 3
                while (self.run(["squeue", "-h", "-o", "%i"], timeout=5).stdout.strip()
                       and time.monotonic() < deadline):
                    time.sleep(0.1)
        order = [n for n in self.procs if n.startswith("slurmd-")] + ["slurmctld", "munged"]
        for group in (order[:-2], ["slurmctld"], ["munged"]):
            procs = [self.procs[n] for n in group if n in self.procs]
            for proc in procs:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGCONT)
                        proc.terminate()
            deadline = time.monotonic() + 3
            for proc in procs:
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(5)
        self._kill_strays()
        self.procs.clear()
        if self.dir != Path() and not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _kill_strays(self) -> None:
        """slurmstepd processes of this cluster outlive their slurmd: find them by pid via
        /proc, checking the command line names our spool directory."""
        marker = str(self.dir).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"slurmstepd" in cmdline and marker in environ:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry.name), signal.SIGKILL)

    # ------------------------------------------------------------------------------ clients

    def run(self, argv: Sequence[str], timeout: float = 10.0,
            check: bool = False) -> subprocess.CompletedProcess[str]:
        """A Slurm client command against this cluster, bounded in time."""
        result = subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                                timeout=timeout, cwd=self.dir / "out")
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: rc {result.returncode}: {result.stderr}")
        return result

    def sbatch(self, *args: str, wrap: str = "sleep 300") -> str:
        """Submit a batch job; returns its id."""
        result = self.run(["sbatch", "--parsable", "-o", "/dev/null", *args, "--wrap", wrap],
                          check=True)
        return result.stdout.strip().split(";")[0]

    def job_state(self, job: str) -> str:
        return self.run(["squeue", "-h", "-j", job, "-o", "%T"]).stdout.strip()

    def wait_state(self, job: str, state: str = "RUNNING", timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while (current := self.job_state(job)) != state:
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {job} is {current or 'gone'}, not {state}, "
                                   f"after {timeout}s")
            time.sleep(0.1)

    def wait_all(self, jobs: Sequence[str], state: str = "RUNNING",
                 timeout: float = 30.0) -> None:
        """Wait for several jobs at once (submitted together they start in one pass)."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.run(["squeue", "-h", "-j", ",".join(jobs), "-o", "%i %T"]).stdout.split()
            states = dict(zip(out[::2], out[1::2], strict=False))
            if all(states.get(j) == state for j in jobs):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"jobs not all {state} after {timeout}s: {states}")
            time.sleep(0.1)

    def wait_pending_reason(self, job: str, timeout: float = 30.0) -> str:
        """Wait for the scheduler to give a pending job a real reason (not None)."""
        deadline = time.monotonic() + timeout
        while True:
            state, _, reason = self.run(["squeue", "-h", "-j", job, "-o", "%T|%r"]
                                        ).stdout.strip().partition("|")
            if state != "PENDING":
                raise RuntimeError(f"job {job} is {state or 'gone'}, not pending")
            if reason and reason != "None":
                return reason
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {job} has no pending reason after {timeout}s")
            time.sleep(0.1)

    def scontrol(self, *args: str) -> str:
        return self.run(["scontrol", *args], check=True).stdout

    def slurmd_pid(self, node: str) -> int:
        return self.procs[f"slurmd-{node}"].pid

    def reset(self, timeout: float = 45.0) -> None:
        """Back to a clean cluster: no jobs, no reservations, every node resumed and idle.

        A node the backfill scheduler had planned for a pending job stays PLANNED after the job
        is cancelled until its next cycle (bf_interval, 30 s by default): under the suite's load
        20 s was not enough (nodes still "plnd" after reset), so the wait covers a cycle."""
        self.run(["scancel", "--full", "-u", "root"])
        for line in self.run(["scontrol", "show", "reservation", "-o"]).stdout.splitlines():
            if line.startswith("ReservationName="):
                name = line.split()[0].split("=", 1)[1]
                self.run(["scontrol", "delete", f"ReservationName={name}"])
        self.run(["scontrol", "update", f"NodeName={self.nodelist}", "State=RESUME"])
        deadline = time.monotonic() + timeout
        while not self._all_idle():
            if time.monotonic() > deadline:
                raise RuntimeError(f"nodes not idle after reset: "
                                   f"{self.run(['sinfo', '-N']).stdout}")
            self.run(["scontrol", "update", f"NodeName={self.nodelist}", "State=RESUME"])
            time.sleep(0.1)


def diag_env(cluster: SlurmCluster, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a ``diag`` subprocess reaching *cluster*."""
    return {**cluster.env, **(extra or {})}
