"""The slurm transport: probes run inside a Slurm job with ``srun``.

Many sites do not allow SSH to compute nodes, but a live job can always start a step.
:class:`SlurmTransport` runs a probe's command on a node of a live allocation with
``srun --jobid=ID --overlap`` (``--overlap`` so the step never queues behind the job's own
steps). It honours the transport contract of the SSH transport: per-host states, the
per-command timeout, the cancel event, bounded output, and never an exception for host
trouble. On timeout or cancel the srun is interrupted (twice, which makes srun cancel its step
on the nodes) and its whole process group killed shortly after — an srun talking to a
SIGSTOPped slurmd ignores everything else.

Two ways to fan out, both kept because the choice is a measured trade-off (bench/slurm.py):
``node`` runs one ``srun -N1 -w NODE`` per host: byte-exact output, one bad node never touches
the others. ``step`` gathers the hosts of one fan-out into a single
``srun -N K --ntasks-per-node=1 --label`` step: one srun process and one step creation for the
whole job instead of one per node (its wire format is ``assistant.fleet.srunstep``). If the
step dies before a node reported (a node that cannot launch aborts the whole step after ~3x
MessageTimeout, killing the other tasks), the hosts without a result are retried one by one in
``node`` mode within their remaining time. :data:`DEFAULT_MODE` is the one the benchmark found
faster.

Finding the job's nodes is ``assistant.fleet.slurmjob``; running scheduler-reading probes once
on this machine, and mixing SSH and srun hosts, is ``assistant.fleet.routing``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from assistant.fleet.local import MAX_OUTPUT, BoundedBuffer, read_process
from assistant.fleet.slurmjob import slurm_env
from assistant.fleet.srunstep import STEP_WRAPPER, TASK_MARK, Batch, Waiter, read_step
from assistant.fleet.transport import CommandResult

DEFAULT_MODE = "step"  # see bench/slurm.py: one step for all nodes beat one srun per node
MODES = ("step", "node")
_POLL_S = 0.05
# The line srun adds to stderr when a task exits non-zero.
_EXITED = re.compile(r"^srun: error: \S+: task \d+: Exited with exit code \d+\n?", re.M)
# Runs on the node in node mode: name it (the mark proves the command started), then exec.
_NODE_WRAPPER = 'printf "%s %s\\n" "' + TASK_MARK + '" "${SLURMD_NODENAME:-?}"; exec "$0" -c "$1"'


# --- running a process with the transport contract ------------------------------------------------

def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """Stop an srun without blocking the caller: two SIGINTs (srun then cancels its step on the
    nodes), and SIGKILL to the whole group shortly after (an srun waiting on a stopped slurmd
    heeds nothing else). Reaped in the background so no zombie is left."""
    def reap() -> None:
        for _ in range(2):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.05)
        try:
            proc.wait(0.5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)

    if proc.poll() is None:
        threading.Thread(target=reap, name="srun-reaper", daemon=True).start()


# srun refusals that say diag may not run there (like an SSH login refused), not that the
# node is down: the job ended or is not ours, the node is not in the allocation, ...
_REFUSED = re.compile(r"invalid job id|permission denied|access denied|not authorized|"
                      r"already completing or completed|requested node configuration is not "
                      r"available|invalid node name|not in the job's allocation|"
                      r"job is not running|user not found|has expired|already finished",
                      re.IGNORECASE)


# srun failing to talk to slurmctld (step creation, job lookup): the controller or the path to
# it, the same for every node, never the node's fault (slurm_errno.c: SLURM_PROTOCOL_SOCKET_
# IMPL_TIMEOUT "Socket timed out on send/recv operation", "Zero Bytes were transmitted or
# received", "Unable to contact slurm controller (connect failure)"; "Slurm backup controller
# in standby mode"). A launch that fails on one node names it ("Task launch for StepId=... failed
# on node gpu003: ...", src/api/step_launch.c): that is the node's slurmd, unreachable.
_CONTROLLER = re.compile(r"unable to contact slurm controller|socket timed out on send/recv|"
                         r"zero bytes were transmitted or received|backup controller in standby|"
                         r"slurmctld", re.IGNORECASE)
_ON_NODE = re.compile(r"\bfailed on node\b|\bon node \S+:", re.IGNORECASE)


def _srun_state(reason: str) -> str:
    """``auth-failed`` when Slurm refused the step or srun could not reach slurmctld (diag may
    not run there; the controller's trouble is not the node's), else ``unreachable`` (the node
    or its slurmd did not answer)."""
    if _ON_NODE.search(reason):
        return "unreachable"
    return "auth-failed" if _REFUSED.search(reason) or _CONTROLLER.search(reason) \
        else "unreachable"


def _srun_error(stderr: str, rc: int | None) -> str:
    """The line of srun's stderr that says why, e.g. 'Unable to create step for job 12: ...'."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("srun: error:", "srun: fatal:"))]
    pick = (errors or lines or [f"srun exited with status {rc}"])[0]
    return re.sub(r"^srun: (?:error|fatal): ", "", pick)[:300]


# --- the transport ------------------------------------------------------------------------------

class SlurmTransport:
    """Run commands on the nodes of Slurm job *job* through srun (see the module doc).

    *nodes*: the job's allocation; a host outside it is refused at once (an srun naming it
    would fail for every host of a step). *unavailable*: why no step can run (a pending job has
    no allocation), given as every host's reason. Refusals are ``auth-failed`` (diag may not
    run there), not ``unreachable`` (the node did not answer). *mode*: ``step`` or
    ``node``. *gather_s*: how long a step waits for more hosts of the same fan-out when fewer
    than the whole allocation have asked.

    Thread-safe: ``run`` is called concurrently by the fan-out's workers.
    """

    name = "slurm"

    def __init__(self, job: str, nodes: Sequence[str] | None = None, *,
                 mode: str = DEFAULT_MODE, env: Mapping[str, str] | None = None,
                 shell: str = "bash", srun: str = "srun", max_output: int = MAX_OUTPUT,
                 gather_s: float = 0.05, unavailable: str | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.job = str(job)
        self.nodes = list(nodes) if nodes is not None else None
        self.mode = mode
        self.env = slurm_env(env)
        self.shell = shell
        self.srun = srun
        self.max_output = max_output
        self.gather_s = gather_s
        self.unavailable = unavailable
        self.steps_started = 0  # srun processes started (the benchmark and tests count them)
        self._lock = threading.Lock()
        self._batches: dict[tuple[str, int], Batch] = {}
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._closed = False

    # ---------------------------------------------------------------------------- public

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        """Run *command* on node *host* of the job; never raises for host trouble."""
        start = time.monotonic()
        if cancel is not None and cancel.is_set():
            return self._result(host, start, "cancelled", "cancelled")
        if self._closed:
            return self._result(host, start, "cancelled", "transport closed")
        # Refusals are "auth-failed" (the runbooks' host-access-failed: diag may not run
        # there), never "unreachable", which would say the node itself may be down.
        if self.unavailable:
            return self._result(host, start, "auth-failed", self.unavailable)
        if self.nodes is not None and host not in self.nodes:
            return self._result(host, start, "auth-failed",
                                f"{host} is not a node of job {self.job}: srun can only run "
                                "inside the job's allocation")
        if self.mode == "node" or cancel is None:
            return self._run_node(host, command, timeout, label, cancel, start)
        return self._run_in_step(host, command, timeout, label, cancel, start)

    def close(self) -> None:
        """Stop every srun still running; later calls answer ``cancelled``."""
        self._closed = True
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            _terminate(proc)

    # ------------------------------------------------------------------------- helpers

    @staticmethod
    def _result(host: str, start: float, state: str, reason: str = "",
                **kw: Any) -> CommandResult:
        return CommandResult(host=host, state=state, reason=reason,
                             duration_s=time.monotonic() - start, **kw)

    def _srun_argv(self, hosts: Sequence[str], label: str | None, timeout: float,
                   labelled: bool) -> list[str]:
        minutes = int(timeout // 60) + 2  # Slurm ends the step even if we vanish
        argv = [self.srun, f"--jobid={self.job}", "--overlap", f"--nodes={len(hosts)}",
                f"--ntasks={len(hosts)}", "--ntasks-per-node=1", f"--nodelist={','.join(hosts)}",
                "--quiet", f"--job-name=diag:{label or 'cmd'}", f"--time={minutes}"]
        return [*argv, "--label"] if labelled else argv

    def _spawn(self, argv: list[str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.env, start_new_session=True)
        with self._lock:
            self._procs.add(proc)
            self.steps_started += 1
        return proc

    def _forget(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    # ------------------------------------------------------------------- one srun per node

    def _run_node(self, host: str, command: str, timeout: float, label: str | None,
                  cancel: threading.Event | None, start: float) -> CommandResult:
        deadline = start + timeout
        if cancel is not None and cancel.is_set():  # never start an srun only to stop it
            return self._result(host, start, "cancelled", "cancelled")
        argv = [*self._srun_argv([host], label, timeout, labelled=False),
                self.shell, "-c", _NODE_WRAPPER, self.shell, command]
        try:
            proc = self._spawn(argv)
        except FileNotFoundError:
            return self._result(host, start, "unreachable", f"{self.srun} not found: the slurm "
                                "transport needs the Slurm client on this machine")
        except OSError as exc:
            return self._result(host, start, "unreachable",
                                f"cannot start {self.srun}: {exc.strerror}")
        assert proc.stdout is not None and proc.stderr is not None
        out, err = BoundedBuffer(self.max_output), BoundedBuffer(self.max_output)
        state, reason = "ok", ""
        try:
            # until_exit: srun's exit status decides the host's state, so wait for it too.
            state, reason = read_process(proc, out, err, deadline, timeout, cancel,
                                         until_exit=True)
        finally:
            if state != "ok":
                _terminate(proc)
            proc.stdout.close()
            proc.stderr.close()
            self._forget(proc)
        if state != "ok":
            return self._result(host, start, state, reason)
        stdout, stderr = out.text("stdout"), err.text("stderr")
        first, _, rest = stdout.partition("\n")
        if not first.startswith(TASK_MARK):
            reason = _srun_error(stderr, proc.returncode)
            return self._result(host, start, _srun_state(reason), reason, stderr=stderr)
        # srun repeats a non-zero exit as an error line; the exit status already says it
        stderr = _EXITED.sub("", stderr)
        return self._result(host, start, "ok", stdout=rest, stderr=stderr,
                            exit_status=proc.returncode)

    # -------------------------------------------------------------- one step for many nodes

    def _run_in_step(self, host: str, command: str, timeout: float, label: str | None,
                     cancel: threading.Event, start: float) -> CommandResult:
        key = (command, id(cancel))
        with self._lock:
            batch = self._batches.get(key)
            leader = batch is None or batch.closed
            if leader:
                batch = Batch(command, label, timeout, cancel)
                self._batches[key] = batch
            assert batch is not None
            waiter = batch.waiters.setdefault(host, Waiter(host))
            if self.nodes is not None and len(batch.waiters) >= len(self.nodes):
                batch.joined.set()
        if leader:
            threading.Thread(target=self._run_batch, args=(key, batch), daemon=True,
                             name=f"srun-step-{label or 'cmd'}").start()
        deadline = start + timeout
        while not waiter.event.wait(min(_POLL_S, max(deadline - time.monotonic(), 0))):
            if cancel.is_set():
                waiter.abandoned = True
                return self._result(host, start, "cancelled", "cancelled")
            if time.monotonic() >= deadline:
                waiter.abandoned = True
                return self._result(host, start, "timeout",
                                    f"command did not finish in {timeout:g}s")
        if cancel.is_set():
            # The step's reader may see the cancel before this waiter does: it ends the step
            # and marks its hosts retry. Retrying then would start an srun only to interrupt
            # it while it starts, and Slurm keeps such a step until its --time.
            waiter.abandoned = True
            return self._result(host, start, "cancelled", "cancelled")
        if waiter.retry:  # the step ended without this host: try it on its own
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._result(host, start, "timeout",
                                    f"command did not finish in {timeout:g}s")
            result = self._run_node(host, command, remaining, label, cancel, time.monotonic())
            result.duration_s = time.monotonic() - start
            return result
        assert waiter.result is not None
        waiter.result.duration_s = time.monotonic() - start
        return waiter.result

    def _run_batch(self, key: tuple[str, int], batch: Batch) -> None:
        batch.joined.wait(self.gather_s)
        with self._lock:
            batch.closed = True
            if self._batches.get(key) is batch:
                del self._batches[key]
            waiters = dict(batch.waiters)
        hosts = list(waiters)
        argv = [*self._srun_argv(hosts, batch.label, batch.timeout, labelled=True),
                "sh", "-c", STEP_WRAPPER, self.shell, batch.command]
        try:
            proc = self._spawn(argv)
        except OSError:
            for waiter in waiters.values():  # node mode reports the error per host
                waiter.retry = True
                waiter.event.set()
            return
        try:
            interrupted = read_step(proc, batch, waiters, self.max_output)
            if not interrupted:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(1.0)
            _terminate(proc)  # no-op when srun has exited
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()
        finally:
            for waiter in waiters.values():
                if not waiter.event.is_set():
                    waiter.retry = True
                    waiter.event.set()
            self._forget(proc)
