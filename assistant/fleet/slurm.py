"""Slurm: a job id to the job's nodes, and a transport that runs probes inside the job with srun.

Most GPU clusters diag serves are scheduled by Slurm, the operator's first fact in an incident
is a job id, and many sites do not allow SSH to compute nodes. So:

- :func:`lookup_job` turns ``--job ID`` into the job's nodes and context (state, partition,
  start time, GRES, node list) with ``scontrol show job -o``, expanded with python-hostlist
  like every other host expression. **Every Slurm call is bounded**: with a wrong
  ``SLURM_CONF`` or a dead controller ``scontrol`` retries for about a minute before failing,
  and an operator at 3 a.m. must get one clear line within seconds instead.
- :class:`SlurmTransport` runs a probe's command on a node of a live allocation with
  ``srun --jobid=ID --overlap`` (``--overlap`` so the step never queues behind the job's own
  steps). It honours the transport contract of the SSH transport: per-host states, the
  per-command timeout, the cancel event, bounded output, and never an exception for host
  trouble. On timeout or cancel the srun is interrupted (twice, which makes srun cancel its
  step on the nodes) and its whole process group killed shortly after — an srun talking to a
  SIGSTOPped slurmd ignores everything else.
- Two ways to fan out, both kept because the choice is a measured trade-off (bench/slurm.py):
  ``node`` runs one ``srun -N1 -w NODE`` per host: byte-exact output, one bad node never
  touches the others. ``step`` gathers the hosts of one fan-out into a single
  ``srun -N K --ntasks-per-node=1 --label`` step: one srun process and one step creation for
  the whole job instead of one per node. srun labels each output line with a task id and cuts
  lines at 1024 bytes, so each task prints ``SLURMD_NODENAME`` (task -> node) and its output
  base64-encoded (line cuts cannot corrupt it). If the step dies before a node reported (a
  node that cannot launch aborts the whole step after ~3x MessageTimeout, killing the other
  tasks), the hosts without a result are retried one by one in ``node`` mode within their
  remaining time. :data:`DEFAULT_MODE` is the one the benchmark found faster.
- :class:`ClientSideTransport` runs probes that read the *scheduler* (``runs_on="client"``
  in the probe's ``Probe``, e.g. ``scheduler``) once, on this machine, where the Slurm client is —
  whichever transport reaches the nodes.
- :class:`RoutingTransport` sends each host to its own transport: SSH for the hosts the
  inventory knows, srun for the rest (the default with ``--job``).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import select
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from assistant.fleet.local import MAX_OUTPUT, BoundedBuffer, LocalTransport, read_process
from assistant.fleet.transport import CommandResult, Transport

if TYPE_CHECKING:
    from probes.base import Probe

DEFAULT_LOOKUP_TIMEOUT = 5.0  # seconds for scontrol/sinfo when resolving --job
DEFAULT_MODE = "step"  # see bench/slurm.py: one step for all nodes beat one srun per node
MODES = ("step", "node")
_POLL_S = 0.05
# Environment variables a client keeps. Inside an allocation (an salloc shell) the job's
# SLURM_JOB_ID, SLURM_NTASKS, ... would make srun join *that* job or inherit its task layout.
_KEEP_ENV = ("SLURM_CONF", "SLURM_CLUSTERS")
_JOB_ID = re.compile(r"^\d+(?:_\d+)?$")
_TASK = "=== diag:slurm-task"
_EXIT = "=== diag:slurm-exit"
_NO_B64 = "=== diag:slurm-nobase64"
_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
_EXITED = re.compile(r"^srun: error: \S+: task \d+: Exited with exit code \d+\n?", re.M)

# Runs on each node in step mode: name the node, then the command's output (stderr merged)
# base64-encoded, then its exit status. POSIX sh; fds 3/4 carry the status and the real stdout
# and are closed for the command so a background child cannot hold the step open.
_STEP_WRAPPER = (
    'n=${SLURMD_NODENAME:-?}; echo "' + _TASK + ' $n"; '
    'command -v base64 >/dev/null 2>&1 || { echo "' + _NO_B64 + ' $n"; exit 0; }; '
    'exec 4>&1; '
    'rc=$( { { "$0" -c "$1" 2>&1 3>&- 4>&- </dev/null; echo $? >&3; } | base64 >&4; } 3>&1 ); '
    'echo "' + _EXIT + ' $n $rc"'
)
# Runs on the node in node mode: name it (the mark proves the command started), then exec.
_NODE_WRAPPER = 'printf "%s %s\\n" "' + _TASK + '" "${SLURMD_NODENAME:-?}"; exec "$0" -c "$1"'


class SlurmError(Exception):
    """Slurm could not answer, or the job cannot be used: one line for the operator."""


def slurm_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """*env* (default: ours) without the SLURM_* variables of any enclosing job."""
    base = dict(os.environ if env is None else env)
    return {k: v for k, v in base.items() if not k.startswith("SLURM_") or k in _KEEP_ENV}


def run_command(argv: Sequence[str], timeout: float,
                env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """Run a Slurm client command; (exit status, stdout, stderr). SlurmError if it is not
    installed or does not answer within *timeout* (its process group is killed)."""
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=slurm_env(env),
                                start_new_session=True)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found: the Slurm client is not installed on this "
                         "machine (or not on PATH)") from None
    except OSError as exc:
        raise SlurmError(f"cannot run {argv[0]}: {exc.strerror}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        conf = os.environ.get("SLURM_CONF") if env is None else env.get("SLURM_CONF")
        raise SlurmError(f"Slurm did not answer `{' '.join(argv)}` within {timeout:g}s: is "
                         f"slurmctld up and SLURM_CONF right ({conf or 'default config'})?"
                         ) from None
    return proc.returncode, out, err


# --- the job ---------------------------------------------------------------------------------

@dataclass
class JobInfo:
    """What Slurm says about a job: the hosts to probe and the incident's context."""

    id: str
    state: str
    nodes: list[str]
    nodelist: str | None = None
    partition: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    submit_time: str | None = None
    gres: str | None = None
    num_nodes: int | None = None
    user: str | None = None
    name: str | None = None
    reason: str | None = None
    time_limit: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        """Whether steps can run in it (srun --jobid needs a live allocation)."""
        return self.state in ("RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING",
                              "SIGNALING", "STAGE_OUT", "RESIZING")

    def context(self) -> dict[str, Any]:
        """The incident context recorded with the session (JSON-able)."""
        return {"id": self.id, "state": self.state, "partition": self.partition,
                "start_time": self.start_time, "submit_time": self.submit_time,
                "gres": self.gres, "nodelist": self.nodelist, "num_nodes": self.num_nodes,
                "user": self.user, "name": self.name, "reason": self.reason,
                "time_limit": self.time_limit}


def _expand(expr: str) -> list[str]:
    from assistant.fleet.hostexpr import InventoryError, expand_hosts

    try:
        return expand_hosts(expr)
    except InventoryError as exc:
        raise SlurmError(f"Slurm gave a node list diag cannot read ({expr}): {exc}") from None


def lookup_job(job_id: str, *, timeout: float = DEFAULT_LOOKUP_TIMEOUT,
               env: Mapping[str, str] | None = None) -> JobInfo:
    """The job's nodes and context; SlurmError (one line) if it does not exist, has ended,
    or Slurm does not answer within *timeout*.

    A running job's hosts are its allocation. A pending job has none yet: its hosts are the
    nodes it asked for (ReqNodeList), else its partition's nodes — the ones it waits for, which
    is what the queue-idle runbook looks at.
    """
    from probes.parsers import ParseError, parse

    job_id = str(job_id).strip()
    if not _JOB_ID.match(job_id):
        raise SlurmError(f"--job takes a Slurm job id such as 1234 or 1234_7, not '{job_id}'")
    rc, out, err = run_command(["scontrol", "show", "job", "-o", job_id], timeout, env)
    if rc != 0:
        message = (err.strip() or out.strip()).splitlines()
        first = message[0] if message else f"exit status {rc}"
        if "invalid job id" in first.lower():
            raise SlurmError(f"job {job_id} does not exist (or ended long enough ago that "
                             "Slurm no longer lists it)")
        raise SlurmError(f"`scontrol show job {job_id}` failed: {first}")
    try:
        jobs = parse("scontrol-job", out)["jobs"]
    except ParseError as exc:
        raise SlurmError(f"cannot read `scontrol show job {job_id}`: {exc}") from None
    exact = [j for j in jobs if j["job_id"] == job_id] or jobs
    live = [j for j in exact if not j["ended"]]
    if not live:
        job = exact[0]
        when = f" at {job['end_time']}" if job.get("end_time") else ""
        nodes = f" ({job['nodelist']})" if job.get("nodelist") else ""
        raise SlurmError(f"job {job_id} has ended ({job['state']}{when}); its nodes{nodes} may "
                         "run other jobs now: give --hosts to probe them")
    job = live[0]
    nodes: list[str] = []
    for j in live:  # an array job id can stand for several running tasks
        if j.get("nodelist"):
            nodes += [n for n in _expand(j["nodelist"]) if n not in nodes]
    info = JobInfo(id=job_id, state=job["state"], nodes=nodes, nodelist=job.get("nodelist"),
                   partition=job.get("partition"), start_time=job.get("start_time"),
                   end_time=job.get("end_time"), submit_time=job.get("submit_time"),
                   gres=job.get("gres") or job.get("tres_per_job"),
                   num_nodes=job.get("num_nodes"), user=job.get("user"), name=job.get("name"),
                   reason=job.get("reason"), time_limit=job.get("time_limit"),
                   fields=dict(job.get("fields") or {}))
    if not info.nodes:
        requested = (job.get("fields") or {}).get("ReqNodeList", "")
        if requested and requested != "(null)":
            info.nodes = _expand(requested)
        elif info.partition:
            info.nodes = partition_nodes(info.partition.split(","), timeout=timeout, env=env)
    if not info.nodes:
        raise SlurmError(f"job {job_id} is {info.state} and Slurm names no node for it")
    return info


def partition_nodes(partitions: Sequence[str], *, timeout: float = DEFAULT_LOOKUP_TIMEOUT,
                    env: Mapping[str, str] | None = None) -> list[str]:
    """Every node of the given partitions (``sinfo -h -p P -o %N``), in Slurm's order."""
    rc, out, err = run_command(["sinfo", "-h", "-p", ",".join(partitions), "-o", "%N"],
                               timeout, env)
    if rc != 0:
        raise SlurmError(f"`sinfo -p {','.join(partitions)}` failed: "
                         f"{(err.strip() or out.strip() or f'exit status {rc}').splitlines()[0]}")
    nodes: list[str] = []
    for line in out.split():
        nodes += [n for n in _expand(line) if n not in nodes]
    return nodes


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


def _srun_state(reason: str) -> str:
    """``auth-failed`` when Slurm refused the step (diag may not run there), else
    ``unreachable`` (the node or its slurmd did not answer)."""
    return "auth-failed" if _REFUSED.search(reason) else "unreachable"


def _srun_error(stderr: str, rc: int | None) -> str:
    """The line of srun's stderr that says why, e.g. 'Unable to create step for job 12: ...'."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("srun: error:", "srun: fatal:"))]
    pick = (errors or lines or [f"srun exited with status {rc}"])[0]
    return re.sub(r"^srun: (?:error|fatal): ", "", pick)[:300]


# --- the transport ------------------------------------------------------------------------------

@dataclass
class _Waiter:
    host: str
    event: threading.Event = field(default_factory=threading.Event)
    result: CommandResult | None = None
    retry: bool = False  # the step ended without this host's result: run it alone
    abandoned: bool = False  # the caller gave up (timeout/cancel)


@dataclass
class _Batch:
    command: str
    label: str | None
    timeout: float
    cancel: threading.Event
    created: float = field(default_factory=time.monotonic)
    waiters: dict[str, _Waiter] = field(default_factory=dict)
    closed: bool = False
    joined: threading.Event = field(default_factory=threading.Event)


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
        self._batches: dict[tuple[str, int], _Batch] = {}
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
        if not first.startswith(_TASK):
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
                batch = _Batch(command, label, timeout, cancel)
                self._batches[key] = batch
            assert batch is not None
            waiter = batch.waiters.setdefault(host, _Waiter(host))
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

    def _run_batch(self, key: tuple[str, int], batch: _Batch) -> None:
        batch.joined.wait(self.gather_s)
        with self._lock:
            batch.closed = True
            if self._batches.get(key) is batch:
                del self._batches[key]
            waiters = dict(batch.waiters)
        hosts = list(waiters)
        argv = [*self._srun_argv(hosts, batch.label, batch.timeout, labelled=True),
                "sh", "-c", _STEP_WRAPPER, self.shell, batch.command]
        try:
            proc = self._spawn(argv)
        except OSError:
            for waiter in waiters.values():  # node mode reports the error per host
                waiter.retry = True
                waiter.event.set()
            return
        try:
            self._read_step(proc, batch, waiters)
        finally:
            for waiter in waiters.values():
                if not waiter.event.is_set():
                    waiter.retry = True
                    waiter.event.set()
            self._forget(proc)

    def _read_step(self, proc: subprocess.Popen[bytes], batch: _Batch,
                   waiters: dict[str, _Waiter]) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        err_fd = proc.stderr.fileno()
        task_node: dict[int, str] = {}
        encoded: dict[int, list[bytes]] = {}
        sizes: dict[int, int] = {}
        errors: dict[int, list[str]] = {}
        partial = {proc.stdout.fileno(): b"", proc.stderr.fileno(): b""}
        poller = select.poll()
        for fd in partial:
            poller.register(fd, select.POLLIN)
        open_fds = set(partial)
        deadline = batch.created + batch.timeout + 0.5

        def finish(task: int, rc_text: str) -> None:
            node = task_node.get(task)
            waiter = waiters.get(node or "")
            if waiter is None or waiter.event.is_set():
                return
            raw = b"".join(encoded.get(task, []))
            try:  # a cut-off stream (bounded above) decodes up to its last whole group
                data = base64.b64decode(raw[: len(raw) - len(raw) % 4], validate=False)
            except (binascii.Error, ValueError):
                waiter.retry = True
                waiter.event.set()
                return
            buffer = BoundedBuffer(self.max_output)
            buffer.add(data)
            waiter.result = CommandResult(host=node or "", state="ok",
                                          stdout=buffer.text("stdout"),
                                          stderr="\n".join(errors.get(task, [])),
                                          exit_status=int(rc_text) if rc_text.isdigit()
                                          else None)
            waiter.event.set()

        def line(fd: int, raw: bytes) -> None:
            text = raw.decode("utf-8", errors="replace")
            match = _LABEL.match(text)
            if not match:
                return  # srun's own messages: only needed if a host gets no result
            task, body = int(match.group(1)), match.group(2)
            if fd == err_fd:
                errors.setdefault(task, []).append(body)
            elif body.startswith(_TASK + " "):
                task_node[task] = body[len(_TASK) + 1:].strip()
            elif body.startswith(_EXIT + " "):
                finish(task, body.rsplit(" ", 1)[-1].strip())
            elif body.startswith(_NO_B64):
                node = task_node.get(task, "")
                if node in waiters:
                    waiters[node].retry = True
                    waiters[node].event.set()
            elif sizes.get(task, 0) <= self.max_output * 2:  # base64 of a bounded output
                chunk = body.strip().encode()
                encoded.setdefault(task, []).append(chunk)
                sizes[task] = sizes.get(task, 0) + len(chunk)

        interrupted = False
        while open_fds:
            pending = [w for w in waiters.values() if not w.event.is_set()]
            if not pending:
                break  # every host answered: srun ends on its own in a moment
            if (all(w.abandoned for w in pending) or batch.cancel.is_set()
                    or time.monotonic() > deadline):
                interrupted = True
                break
            for fd, _ in poller.poll(_POLL_S * 1000):
                data = os.read(fd, 65536)
                if not data:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    if partial[fd]:
                        line(fd, partial[fd])
                        partial[fd] = b""
                    continue
                chunks = (partial[fd] + data).split(b"\n")
                partial[fd] = chunks.pop()
                for chunk in chunks:
                    line(fd, chunk)
        if not interrupted:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(1.0)
        _terminate(proc)  # no-op when srun has exited
        proc.stdout.close()
        proc.stderr.close()


# --- client-side probes and per-host routing ------------------------------------------------------

def client_probe(label: str | None) -> Probe | None:
    """The probe named *label* when it reads something cluster-wide once, here
    (``runs_on="client"``, e.g. ``scheduler``); None for every other command."""
    from probes.base import get_probe

    if not label:
        return None
    try:
        probe = get_probe(label)
    except (KeyError, ImportError):
        return None
    return probe if probe.runs_on == "client" else None


@dataclass
class _Reading:
    reader: str
    done: threading.Event = field(default_factory=threading.Event)
    result: CommandResult | None = None


class ClientSideTransport:
    """Wraps the transport that reaches the nodes; client-side probes run here, once.

    For a probe whose ``Probe`` says ``runs_on="client"`` the first host of a fan-out that asks
    gets the command run on this machine (the local transport, so the same timeout and cancel
    rules), every other host of that fan-out the probe's ``shared_output(reader)`` naming the
    reader. A fan-out is recognised by the cancel event ``fan_out`` gives every worker; a call
    without one runs the command itself. If the reading fails, every host gets its state.
    """

    def __init__(self, inner: Transport, local: Transport | None = None) -> None:
        self.inner = inner
        self.local = local or LocalTransport()
        self.name = inner.name
        self._lock = threading.Lock()
        self._readings: dict[tuple[str, int], tuple[threading.Event, _Reading]] = {}

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        probe = client_probe(label)
        if probe is None:
            return self.inner.run(host, command, timeout=timeout, label=label, cancel=cancel)
        if cancel is None:
            return self._read(host, command, timeout, label, cancel)
        key = (command, id(cancel))
        with self._lock:
            for stale in [k for k, (ev, _) in self._readings.items() if ev.is_set()]:
                del self._readings[stale]  # fan-outs that returned (their event is set)
            entry = self._readings.get(key)
            first = entry is None
            if first:
                entry = (cancel, _Reading(host))
                self._readings[key] = entry
        assert entry is not None
        reading = entry[1]
        if first:
            try:
                reading.result = self._read(host, command, timeout, label, cancel)
            finally:
                reading.done.set()
            return reading.result
        start = time.monotonic()
        while not reading.done.wait(_POLL_S):
            if cancel.is_set():
                return CommandResult(host, "cancelled", reason="cancelled",
                                     duration_s=time.monotonic() - start)
        source = reading.result
        assert source is not None
        if source.state != "ok":
            return CommandResult(host, source.state, reason=source.reason,
                                 duration_s=time.monotonic() - start)
        assert probe.shared_output is not None  # Probe requires it of a client-side probe
        return CommandResult(host, "ok", stdout=probe.shared_output(reading.reader),
                             exit_status=0, duration_s=time.monotonic() - start)

    def _read(self, host: str, command: str, timeout: float, label: str | None,
              cancel: threading.Event | None) -> CommandResult:
        result = self.local.run(host, command, timeout=timeout, label=label, cancel=cancel)
        result.host = host
        return result

    def close(self) -> None:
        self.inner.close()
        self.local.close()


class RoutingTransport:
    """Each host to its own transport (e.g. SSH for inventory hosts, srun for the others)."""

    def __init__(self, routes: Mapping[str, Transport], default: Transport) -> None:
        self.routes = dict(routes)
        self.default = default
        kinds = {t.name for t in [*self.routes.values(), default]}
        self.name = "+".join(sorted(kinds)) if len(kinds) > 1 else default.name

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        transport = self.routes.get(host, self.default)
        return transport.run(host, command, timeout=timeout, label=label, cancel=cancel)

    def close(self) -> None:
        seen: set[int] = set()
        for transport in [*self.routes.values(), self.default]:
            if id(transport) not in seen:
                seen.add(id(transport))
                transport.close()
