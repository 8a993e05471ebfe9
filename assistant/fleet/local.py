"""The local transport: run the command on this machine, whatever host it is addressed to.

Used for single-node jobs, for developing probes on a workstation, and in tests of the fan-out
that need real processes without SSH. It honours the same contract as the SSH transport: a
per-command timeout enforced even if the command never exits (the whole process group is
killed), the cancel event, bounded output, and a state instead of an exception.

Like a remote command (``fleet.remoteproc``), the command also runs under ``timeout -k`` with
the same limit, so it ends by itself when diag cannot end it: a ``kill -9`` of diag, a lost
terminal. Without that a hung acceptance test (``gpu_burn`` on a wedged GPU) started by
``--transport local`` kept running, and loading the GPUs, after the diag that started it died.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

from assistant.fleet.remoteproc import GRACE_S, HOLD
from assistant.fleet.transport import CommandResult

MAX_OUTPUT = 4 * 1024 * 1024  # per stream; a probe that prints more is truncated with a marker
# All the output one fan-out holds at once, whatever the number of hosts: 64 hosts at the
# per-stream limit fill it; past it, later output is dropped with a marker saying why.
FANOUT_OUTPUT_BUDGET = 256 * 1024 * 1024
_POLL_S = 0.05


class OutputBudget:
    """Bytes of command output a whole fan-out may hold (thread-safe).

    The per-stream limit alone let 64 hosts x 2 streams x the limit pile up; this one bounds
    their sum. It is handed to the transports through :func:`budget_scope` (set by the fan-out
    on each worker thread) rather than a parameter of every transport's ``run``.
    """

    def __init__(self, limit: int = FANOUT_OUTPUT_BUDGET) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> int:
        """Grant up to *size* bytes; what is granted is held until the fan-out ends, or until
        the caller that read the output hands it back (``give_back``)."""
        with self._lock:
            granted = max(0, min(size, self.limit - self.used))
            self.used += granted
            return granted

    def give_back(self, size: int) -> None:
        """Bytes of output no longer held (read and dropped by the fan-out's caller)."""
        with self._lock:
            self.used = max(0, self.used - size)


_scope = threading.local()


@contextlib.contextmanager
def budget_scope(budget: OutputBudget | None) -> Iterator[None]:
    """Buffers made on this thread inside the block draw from *budget*."""
    previous = getattr(_scope, "budget", None)
    _scope.budget = budget
    try:
        yield
    finally:
        _scope.budget = previous


class BoundedBuffer:
    """Keeps the first *limit* bytes of a stream and counts the rest.

    A probe gone wrong (a log dumped by mistake, ``yes``) must not eat the memory of a process
    holding 512 hosts' results; the operator sees that and how much was cut. The bytes kept
    also come out of the fan-out's :class:`OutputBudget`, when one is in scope.
    """

    def __init__(self, limit: int, budget: OutputBudget | None = None) -> None:
        self.limit = limit
        self.budget = budget if budget is not None else getattr(_scope, "budget", None)
        self.parts: list[bytes] = []
        self.size = 0
        self.dropped = 0
        self.starved = False  # bytes dropped because the fan-out's budget was used up

    def add(self, data: bytes) -> None:
        wanted = max(0, min(self.limit - self.size, len(data)))
        granted = self.budget.take(wanted) if self.budget is not None and wanted else wanted
        if granted < wanted:
            self.starved = True
        if granted:
            self.parts.append(data[:granted])
            self.size += granted
        self.dropped += len(data) - granted

    def head(self, size: int) -> bytes:
        """The first *size* bytes kept."""
        return b"".join(self.parts)[:size] if self.parts else b""

    def text(self, stream: str) -> str:
        """Decoded as UTF-8 with replacement: garbage output is still shown, never a crash."""
        text = b"".join(self.parts).decode("utf-8", errors="replace")
        if self.dropped and self.starved and self.budget is not None:
            text += (f"\n[diag: {stream} truncated: {self.dropped} bytes after the first "
                     f"{self.size} dropped: the fan-out's output budget of "
                     f"{self.budget.limit} bytes for all hosts was used up]\n")
        elif self.dropped:
            text += (f"\n[diag: {stream} truncated: {self.dropped} bytes after the first "
                     f"{self.limit} dropped]\n")
        return text


def read_process(proc: subprocess.Popen[bytes], out: BoundedBuffer, err: BoundedBuffer,
                 deadline: float, timeout: float, cancel: threading.Event | None,
                 until_exit: bool = False) -> tuple[str, str]:
    """Read a child's stdout and stderr into *out* and *err* until both close (and, with
    *until_exit*, until it exits), the deadline passes, or *cancel* is set.

    Returns (state, reason): ("ok", "") or a timeout/cancel for the caller to clean up after.
    One loop for every transport that runs a local process (bash, srun), so the pipes are
    always drained without blocking and a stuck child never outlives its deadline.
    """
    assert proc.stdout is not None and proc.stderr is not None
    buffers = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    poller = select.poll()
    for fd in buffers:
        poller.register(fd, select.POLLIN)
    open_fds = set(buffers)
    while open_fds or (until_exit and proc.poll() is None):
        if cancel is not None and cancel.is_set():
            return "cancelled", "cancelled"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout", f"command did not finish in {timeout:g}s"
        if not open_fds:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(min(_POLL_S, remaining))
            continue
        for fd, _ in poller.poll(min(_POLL_S * 2, remaining) * 1000):
            data = os.read(fd, 65536)
            if data:
                buffers[fd].add(data)
            else:
                poller.unregister(fd)
                open_fds.discard(fd)
    return "ok", ""


@functools.lru_cache(maxsize=1)
def _has_timeout() -> bool:
    """Does this machine have a ``timeout`` that takes ``-k`` (coreutils, busybox)? Asked once
    per process, as ``fleet.remoteproc`` asks a host."""
    try:
        return subprocess.run(["timeout", "-k", "1", "1", "true"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=10, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def bounded_argv(shell: str, command: str, timeout: float) -> list[str]:
    """*command* under *shell*, ended by ``timeout`` a little after diag's own limit (its
    session is the process group: ``timeout`` signals the whole group, then KILLs it; ``HOLD``
    keeps ``timeout`` waiting for that KILL when a test ignores the TERM)."""
    argv = [shell, "-c", command]
    if not _has_timeout() or shutil.which(shell) is None:  # (a missing shell: said as before)
        return argv
    return ["timeout", "-k", str(GRACE_S), str(max(1, math.ceil(timeout)) + GRACE_S), "sh", "-c",
            HOLD, "diag", command, shell]


class LocalTransport:
    """Run commands with ``bash -c`` locally. ``DIAG_HOST`` is set to the host name addressed,
    so one machine can stand in for several hosts (tests, demos)."""

    name = "local"

    def __init__(self, shell: str = "bash", max_output: int = MAX_OUTPUT) -> None:
        self.shell = shell
        self.max_output = max_output

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        """Run *command*; never raises for command trouble."""
        start = time.monotonic()

        def result(state: str, reason: str = "", **kw: Any) -> CommandResult:
            return CommandResult(host=host, state=state, reason=reason,
                                 duration_s=time.monotonic() - start, **kw)

        if cancel is not None and cancel.is_set():
            return result("cancelled", "cancelled")
        env = dict(os.environ, DIAG_HOST=host)
        try:
            # A new session, so a timeout can kill the command's children too.
            proc = subprocess.Popen(bounded_argv(self.shell, command, timeout),
                                    stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                    start_new_session=True)
        except OSError as exc:
            return result("unreachable", f"cannot start {self.shell}: {exc.strerror}")
        assert proc.stdout is not None and proc.stderr is not None
        out, err = BoundedBuffer(self.max_output), BoundedBuffer(self.max_output)
        deadline = time.monotonic() + timeout
        try:
            state, reason = read_process(proc, out, err, deadline, timeout, cancel)
            if state != "ok":
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            try:  # pipes are closed; the process itself may still linger a moment
                exit_status: int | None = proc.wait(timeout=max(0.0, deadline - time.monotonic())
                                                    if state == "ok" else 5)
            except subprocess.TimeoutExpired:  # closed its output but kept running
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                state, reason = "timeout", f"command did not finish in {timeout:g}s"
        finally:
            proc.stdout.close()
            proc.stderr.close()
        if state != "ok":
            exit_status = None
        elif exit_status is not None and exit_status < 0:
            reason, exit_status = f"killed by signal {-exit_status}", None
        return result(state, reason, stdout=out.text("stdout"), stderr=err.text("stderr"),
                      exit_status=exit_status, phase="" if state == "ok" else "command")

    def close(self) -> None:
        """Nothing to close: every command is its own process."""
