"""The transport interface: run one command on one host, get output or a classified failure.

Every I/O backend sits behind this small interface — ``ssh`` (paramiko), ``local``
(subprocess), ``replay`` (scenario files, used by drills and ``--demo``) and later ``slurm`` —
so fan-out, probes and the engine never know which one they talk to.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from assistant.fleet.lagclock import CLIENT_BEHIND

# A command's host ends in exactly one of these (parse-error is decided later, by the parser).
TRANSPORT_STATES = ("ok", "unreachable", "auth-failed", "host-key-refused", "timeout",
                    "cancelled")
# Where a command that did not end ok stopped. "connect": TCP, SSH banner, key exchange, host key
# or login — the host did not let diag in, which may mean it is down. "command": diag got in and
# the command itself hung or was cut — evidence about what the command touched on that host
# (nvidia-smi, a mount), not about whether the host is up. "": not known (e.g. the fan-out's
# deadline ended a host wherever it was).
PHASES = ("connect", "command", "")


@dataclass
class CommandResult:
    host: str
    state: str  # one of TRANSPORT_STATES; "ok" means the command ran, whatever its exit status
    stdout: str = ""
    stderr: str = ""
    exit_status: int | None = None
    duration_s: float = 0.0
    reason: str = ""  # why, when state is not ok: "connection refused", "no banner in 5s", ...
    phase: str = ""  # one of PHASES, when state is not ok
    # A command diag's time-out ended: its processes on the host as ps printed them just before
    # ("PID STAT ELAPSED WCHAN COMM", probes/hangstate.py); empty when they could not be read.
    processes: tuple[str, ...] = ()

    @property
    def connect_failed(self) -> bool:
        """The host could not be reached at all (:func:`let_nobody_in`)."""
        return let_nobody_in(self.state, self.phase, self.reason)


def let_nobody_in(state: str, phase: str, reason: str) -> bool:
    """Whether a result (a command's, or a host's as a probe kept it) says the host could not
    be reached at all (no connection, no banner, no login), as opposed to a command that failed
    on a live connection. A walk skips such a host in its later probes instead of paying a
    connect timeout per probe (FleetProvider, a sharded walk's ShardedProvider). A login that
    ran out of time while diag's own client was behind says nothing about the host
    (assistant.fleet.lagclock): not a connect failure, tried again later."""
    return phase == "connect" and state != "cancelled" and CLIENT_BEHIND not in reason


class HostFailure(Exception):
    """A classified host failure (a state of TRANSPORT_STATES and why) raised inside a
    transport and turned into that host's CommandResult before ``run`` returns: deep in a
    connection set-up an exception is the simplest way out, but no caller ever sees one."""

    def __init__(self, state: str, reason: str) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason


class Transport(Protocol):
    name: str

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        """Run *command* on *host*. Never raises for host trouble: it is a state.

        *label* names what is being run (a probe name); the replay transport answers by it.
        *cancel*, when set, ends the command early with state ``cancelled``.
        """
        ...

    def close(self) -> None:
        """Close every connection this transport opened (they are reused until then)."""
        ...
