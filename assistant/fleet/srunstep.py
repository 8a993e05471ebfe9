"""The ``step`` fan-out's wire format: what each task of a gathered srun step prints, and
reading it back into one result per node.

srun ``--label`` prefixes every output line with its task id and cuts lines at 1024 bytes, and
task ids are not node names. So every task first names its node (``SLURMD_NODENAME``), then
prints its command's output base64-encoded (line cuts cannot corrupt it), then its exit status;
:func:`read_step` decodes that as it streams in, so a node's result is handed back the moment
its task ends. A node whose output cannot be read is marked ``retry``: the transport
(``assistant.fleet.slurm``) then runs it alone with one srun of its own.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import select
import subprocess
import threading
import time
from dataclasses import dataclass, field

from assistant.fleet.local import BoundedBuffer
from assistant.fleet.transport import CommandResult

_POLL_S = 0.05
TASK_MARK = "=== diag:slurm-task"
_EXIT = "=== diag:slurm-exit"
_NO_B64 = "=== diag:slurm-nobase64"
_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")

# Runs on each node in step mode: name the node, then the command's output (stderr merged)
# base64-encoded, then its exit status. POSIX sh; fds 3/4 carry the status and the real stdout
# and are closed for the command so a background child cannot hold the step open.
STEP_WRAPPER = (
    'n=${SLURMD_NODENAME:-?}; echo "' + TASK_MARK + ' $n"; '
    'command -v base64 >/dev/null 2>&1 || { echo "' + _NO_B64 + ' $n"; exit 0; }; '
    'exec 4>&1; '
    'rc=$( { { "$0" -c "$1" 2>&1 3>&- 4>&- </dev/null; echo $? >&3; } | base64 >&4; } 3>&1 ); '
    'echo "' + _EXIT + ' $n $rc"'
)


@dataclass
class Waiter:
    """One host of a gathered step, and how its result gets back to the caller."""

    host: str
    event: threading.Event = field(default_factory=threading.Event)
    result: CommandResult | None = None
    retry: bool = False  # the step ended without this host's result: run it alone
    abandoned: bool = False  # the caller gave up (timeout/cancel)


@dataclass
class Batch:
    """The hosts of one fan-out that share one srun step."""

    command: str
    label: str | None
    timeout: float
    cancel: threading.Event
    created: float = field(default_factory=time.monotonic)
    waiters: dict[str, Waiter] = field(default_factory=dict)
    closed: bool = False
    joined: threading.Event = field(default_factory=threading.Event)


def read_step(proc: subprocess.Popen[bytes], batch: Batch, waiters: dict[str, Waiter],
              max_output: int) -> bool:
    """Read one step's labelled output and settle each waiter as its node reports (a
    result, or ``retry`` when it cannot be read). Returns whether it stopped early:
    cancelled, given up by every caller, or past the batch's time. The caller ends srun."""
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
        buffer = BoundedBuffer(max_output)
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
        elif body.startswith(TASK_MARK + " "):
            task_node[task] = body[len(TASK_MARK) + 1:].strip()
        elif body.startswith(_EXIT + " "):
            finish(task, body.rsplit(" ", 1)[-1].strip())
        elif body.startswith(_NO_B64):
            node = task_node.get(task, "")
            if node in waiters:
                waiters[node].retry = True
                waiters[node].event.set()
        elif sizes.get(task, 0) <= max_output * 2:  # base64 of a bounded output
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
    return interrupted
