"""The SSH transport: paramiko, one reused connection per host, every failure classified.

Why it is built this way:

- **One connection per host per session.** A runbook runs several probes on the same nodes;
  the TCP + key exchange + auth round trips dominate a probe's cost, so the first command opens
  a connection and every later command opens a new channel on it (``sshconnect.Connector``).
- **Failures are states, not exceptions.** At 3 a.m. over 512 nodes the operator needs
  "gpu017: unreachable (connection refused)", not a traceback. ``run`` never raises for host
  trouble; every phase has its own bound and its own wording: TCP connect (``unreachable``:
  refused / no route / DNS / connect timeout), banner (``timeout``: nothing after TCP accept),
  key exchange after the banner (``timeout``), authentication (``auth-failed``,
  ``sshauth``), host key (``host-key-refused``, ``hostkeys``), the command itself
  (``timeout``), the cancel event (``cancelled``).
- **Host keys are checked, never auto-added silently** (``hostkeys``): an unknown key is
  refused unless the operator asked for ``accept_new_host_keys``; a changed key always is.
- **Nothing blocks forever.** The connection set-up is polled and watched; the command's output
  is read with ``poll`` and a deadline, and the channel is closed on expiry even if the remote
  never closes it. ``poll`` rather than ``select`` because a 512-host fan-out has file
  descriptors above 1024.
- **Nothing is left running on the host.** The command runs in its own process group under a
  remote time limit (``remoteproc``); on a timeout or cancel the group is killed over the same
  connection before the result is returned.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import paramiko

from assistant.fleet import remoteproc
from assistant.fleet.hostexpr import InventoryError
from assistant.fleet.hostkeys import KnownHosts
from assistant.fleet.inventory import HostSpec
from assistant.fleet.local import MAX_OUTPUT, BoundedBuffer
from assistant.fleet.sshconnect import Connector
from assistant.fleet.tcpconnect import POLL_S, is_set
from assistant.fleet.transport import CommandResult, HostFailure

# The longest a waiting command sleeps without news when its cancel event can wake it: only a
# safety net (the channel's data and the cancel both wake the poll at once).
IDLE_WAIT_S = 5.0
# After a time-out, how long diag waits for ps's view of the command's processes before it
# kills them (probes/hangstate.py), and how much of it it reads: a few rows.
STATES_WAIT_S = 3.0  # two looks of ps a second apart (hangstate.AGAIN_AFTER_S), tens of ms each
STATES_MAX_BYTES = 16 * 1024


class SSHTransport:
    """Run commands over SSH (paramiko) on hosts described by HostSpecs.

    *specs* maps host names to their resolved specs, or is the list ``inventory.resolve``
    returns; a name not in it is used as-is (address = name, port 22, local user, default
    keys). *known_hosts* is the file host keys are checked against and new ones recorded in
    (default ``~/.ssh/known_hosts``, plus the read-only ``/etc/ssh/ssh_known_hosts``).
    *banner_timeout* (TCP accepted, no SSH banner) and *auth_timeout* (a stall after the
    banner: key exchange or an authentication answer) default to *connect_timeout*.
    *use_agent* / *look_for_keys* allow ssh-agent keys and the default ``~/.ssh/id_*`` keys,
    tried after the host's identity file.

    Thread-safe: ``run`` is called concurrently by the fan-out's workers.
    """

    name = "ssh"

    def __init__(self, specs: Mapping[str, HostSpec] | Iterable[HostSpec] | None = None,
                 connect_timeout: float = 5.0,
                 accept_new_host_keys: bool = False, known_hosts: str | os.PathLike[str] | None
                 = None, *, banner_timeout: float | None = None,
                 auth_timeout: float | None = None, use_agent: bool = True,
                 look_for_keys: bool = True, max_output: int = MAX_OUTPUT) -> None:
        self.specs: dict[str, HostSpec] = (
            dict(specs) if isinstance(specs, Mapping) else {s.name: s for s in specs or ()})
        self.max_output = max_output
        self.host_keys = KnownHosts(known_hosts, accept_new=accept_new_host_keys)
        self._connector = Connector(
            self.specs, self.host_keys, connect_timeout=connect_timeout,
            banner_timeout=banner_timeout if banner_timeout is not None else connect_timeout,
            auth_timeout=auth_timeout if auth_timeout is not None else connect_timeout,
            use_agent=use_agent, look_for_keys=look_for_keys)
        self._closed = False

    @property
    def connections_opened(self) -> int:
        """How many SSH connections this transport has made (reuse keeps it at one per host)."""
        return self._connector.connections_opened

    @property
    def refused_keys(self) -> dict[str, str]:
        """host -> ``name type SHA256:...`` of a key refused, for a UI that offers to verify it."""
        return self.host_keys.refused

    # ------------------------------------------------------------------------------ public

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        """Run *command* on *host*; never raises for host trouble (see the module doc)."""
        start = time.monotonic()

        def result(state: str, reason: str = "", **kw: Any) -> CommandResult:
            return CommandResult(host=host, state=state, reason=reason,
                                 duration_s=time.monotonic() - start, **kw)

        if is_set(cancel):
            return result("cancelled", "cancelled")
        if self._closed:
            return result("cancelled", "transport closed")
        connector = self._connector
        try:
            route = connector.route(host)
            for attempt in (0, 1):
                conn, fresh = connector.connection(route, cancel)
                try:
                    channel = conn.open_session(timeout=max(connector.connect_timeout, 1.0))
                    break
                except (paramiko.SSHException, EOFError, OSError) as exc:
                    connector.drop(route, conn)
                    if fresh or attempt:  # a reused connection may have died: retry once
                        raise HostFailure("unreachable",
                                          f"cannot open a session: {exc}") from None
            return self._execute(channel, command, timeout, cancel, result)
        except HostFailure as failure:  # raised while connecting: diag never got in
            if is_set(cancel) or failure.state == "cancelled":
                return result("cancelled", "cancelled" if is_set(cancel) else failure.reason,
                              phase="connect")
            return result(failure.state, failure.reason, phase="connect")
        except InventoryError as exc:
            return result("unreachable", str(exc), phase="connect")
        except Exception as exc:  # last resort: a bug or an unforeseen paramiko error
            if is_set(cancel):
                return result("cancelled", "cancelled")
            return result("unreachable", f"unexpected {type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Close every connection (later ``run`` calls answer ``cancelled``)."""
        self._closed = True
        self._connector.close()

    def __enter__(self) -> SSHTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------- execution

    def _execute(self, channel: paramiko.Channel, command: str, timeout: float,
                 cancel: threading.Event | None,
                 result: Callable[..., CommandResult]) -> CommandResult:
        """Run on an open channel, reading both streams until exit, deadline or cancel."""
        out, err = BoundedBuffer(self.max_output), BoundedBuffer(self.max_output)
        deadline = time.monotonic() + timeout
        state, reason = "ok", ""
        processes: tuple[str, ...] = ()
        try:
            channel.exec_command(remoteproc.wrap(command, timeout))
            channel.shutdown_write()  # stdin: EOF at once, a probe never waits for input
            with self._connector.wake_on(cancel) as wake:
                state, reason = self._wait(channel, out, err, deadline, timeout, cancel, wake)
            while channel.recv_ready():
                out.add(channel.recv(65536))
            while channel.recv_stderr_ready():
                err.add(channel.recv_stderr(65536))
            transport = channel.get_transport()
            if state != "ok" and transport is not None and transport.is_active():
                self._await_mark(channel, err)
                processes = self._end_remote(transport, err.head(64), state == "timeout")
            if state == "ok" and channel.exit_status == -1 and not (transport and
                                                                 transport.is_active()):
                state, reason = "unreachable", "connection lost during the command"
        except (paramiko.SSHException, EOFError, OSError) as exc:
            state, reason = "unreachable", f"connection lost during the command: {exc}"
        finally:
            exit_status = channel.exit_status if channel.exit_status_ready() else -1
            with contextlib.suppress(Exception):
                channel.close()
        # Logged in and the command started: whatever went wrong happened on the host, so the
        # partial output (which section was running) goes back with it.
        return result(state, reason, stdout=out.text("stdout"),
                      stderr=remoteproc.strip_mark(err.text("stderr")),
                      exit_status=None if exit_status == -1 or state != "ok" else exit_status,
                      phase="" if state == "ok" else "command", processes=processes)

    @staticmethod
    def _wait(channel: paramiko.Channel, out: BoundedBuffer, err: BoundedBuffer, deadline: float,
              timeout: float, cancel: threading.Event | None,
              wake: int | None) -> tuple[str, str]:
        """Read both streams until exit, deadline or cancel: ("ok", "") or (state, reason).

        Sleeps in ``poll`` until the channel has something or *wake* (set by the cancel event)
        fires: a fan-out keeps 64 commands waiting at once, and waking each of them ten times a
        second to look cost more client CPU than reading their output."""
        poller = select.poll()
        poller.register(channel.fileno(), select.POLLIN)
        if wake is not None:
            poller.register(wake, select.POLLIN)
        while True:
            while channel.recv_ready():
                out.add(channel.recv(65536))
            while channel.recv_stderr_ready():
                err.add(channel.recv_stderr(65536))
            # exit status can precede the last output (OpenSSH sends it when the child exits,
            # then drains the pipes): finished means EOF *and* status, or closed.
            if channel.closed or (channel.eof_received and channel.exit_status_ready()):
                return "ok", ""
            if is_set(cancel):
                return "cancelled", "cancelled"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", f"command did not finish in {timeout:g}s"
            if channel.eof_received:  # the pipe stays readable after EOF: wait on the status
                channel.status_event.wait(min(POLL_S * 2, remaining))
            elif wake is None:
                poller.poll(min(POLL_S * 2, remaining) * 1000)
            else:
                poller.poll(min(IDLE_WAIT_S, remaining) * 1000)

    @staticmethod
    def _await_mark(channel: paramiko.Channel, err: BoundedBuffer, wait: float = 2.0) -> None:
        """A cancel right after the command started can come before the wrapper's first line
        (its process group): wait briefly for it, or the command would be left running."""
        deadline = time.monotonic() + wait
        while b"\n" not in err.head(64) and not channel.closed and time.monotonic() < deadline:
            if channel.recv_stderr_ready():
                err.add(channel.recv_stderr(65536))
            else:
                time.sleep(POLL_S / 5)

    @staticmethod
    def _end_remote(transport: paramiko.Transport, stderr_head: bytes,
                    ask_states: bool) -> tuple[str, ...]:
        """Kill the command's process group on the host (a timeout or cancel): closing the
        channel alone leaves it running. After a time-out, first ask what its processes were
        doing (blocked in the kernel, or only slow: probes/hangstate.py), waiting at most
        STATES_WAIT_S for the answer. Best effort, bounded: the remote time limit is the
        backstop when this cannot reach the host."""
        pgid = remoteproc.process_group(stderr_head)
        if pgid is None or not transport.is_active():
            return ()
        rows: tuple[str, ...] = ()
        try:
            killer = transport.open_session(timeout=2.0)
            try:
                if not ask_states:
                    killer.exec_command(remoteproc.kill_command(pgid))  # returns once started
                    return ()
                killer.exec_command(remoteproc.states_then_kill(pgid))
                rows = _read_states(killer)
            finally:
                killer.close()
        except (paramiko.SSHException, EOFError, OSError):
            pass
        return rows


def _read_states(channel: paramiko.Channel) -> tuple[str, ...]:
    """The ps rows a killer session printed before its end mark, within STATES_WAIT_S."""
    data = bytearray()
    deadline = time.monotonic() + STATES_WAIT_S
    channel.settimeout(POLL_S)
    end = remoteproc.STATES_END.encode()
    while end not in data and len(data) < STATES_MAX_BYTES and time.monotonic() < deadline:
        try:
            chunk = channel.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        data += chunk
    text = data.decode("utf-8", errors="replace")
    if remoteproc.STATES_END not in text:
        return ()
    return tuple(line.strip() for line in text.split(remoteproc.STATES_END)[0].splitlines()
                 if line.strip())
