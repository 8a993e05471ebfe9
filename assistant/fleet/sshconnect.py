"""Connecting to a host over SSH: TCP, ProxyJump tunnels, the handshake, authentication.

One :class:`Connector` per transport keeps **one connection per host per session**: a runbook
runs several probes on the same nodes and the TCP + key exchange + auth round trips dominate a
probe's cost, so the first command opens a connection and every later command opens a new
channel on it. Connections live in a cache keyed by route (jump hops + host), each behind its
own lock so two threads never connect the same host twice and one slow host never blocks
another.

**Nothing blocks forever, and every failure is classified.** The TCP connect is non-blocking and
polled (``assistant.fleet.tcpconnect``; ``unreachable``: refused / no route / DNS / connect
timeout); the handshake is started asynchronously and watched (``timeout``: no banner after
TCP accept, or a stall in the key exchange); a time-out before login is tried a second time
before it counts; the host key goes through ``assistant.fleet.hostkeys`` (``host-key-refused``) and
the login through ``assistant.fleet.sshauth`` (``auth-failed``). Each raises
``transport.HostFailure``, which the transport (``assistant.fleet.ssh``) turns into the host's
state. Names were resolved through the inventory and ssh_config beforehand
(``assistant.fleet.inventory``); a ProxyJump hop not resolved there is read here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator

import paramiko

from assistant.fleet.hostexpr import parse_hop
from assistant.fleet.hostkeys import HostKeyRefused, KnownHosts
from assistant.fleet.inventory import HostSpec
from assistant.fleet.lagclock import MAX_STRETCH, LagClock
from assistant.fleet.sshauth import Authenticator
from assistant.fleet.tcpconnect import POLL_S, is_set, tcp_connect
from assistant.fleet.transport import HostFailure

# How often each connection's paramiko thread wakes up when nothing arrives (paramiko's own
# default is 0.1 s). Each wake-up is a timed-out recv and a few checks; at 128 connections over a
# minute-long walk the default cost more client CPU than the commands themselves. Only closing
# notices it, and a closed connection's thread then lingers this long at most.
TRANSPORT_IDLE_S = 1.0

# paramiko logs a traceback at ERROR when a transport thread dies (a banner timeout, a
# connection we close on cancel). Those are states here, already reported; without a handler
# Python's last-resort handler would print them on the operator's terminal.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

Route = tuple[HostSpec, ...]  # the jump hosts to traverse, then the host
_RouteKey = tuple[tuple[str, str, int, str], ...]


class _WakePipe:
    """A pipe the watchdog writes one byte into; closed under a lock, so a late ``fire`` can
    never write into a file descriptor number the process has since given to something else."""

    def __init__(self) -> None:
        self.read_end, self._write_end = os.pipe()
        self._lock = threading.Lock()
        self._open = True

    def fire(self) -> None:
        with self._lock:
            if self._open:
                os.write(self._write_end, b"x")

    def close(self) -> None:
        with self._lock:
            self._open = False
            os.close(self.read_end)
            os.close(self._write_end)


class _Watchdog:
    """One thread per transport that closes things when their cancel event is set.

    The blocking paramiko calls (authentication waits) do not look at our cancel event; instead
    of a thread per connection attempt, registered (event, closer) pairs are checked here.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[int, tuple[threading.Event, Callable[[], None]]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def watch(self, event: threading.Event | None, closer: Callable[[], None]) -> Iterator[None]:
        if event is None:
            yield
            return
        with self._lock:
            token = self._next
            self._next += 1
            self._items[token] = (event, closer)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="ssh-watchdog",
                                                daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._items.pop(token, None)

    @contextlib.contextmanager
    def wake_on(self, event: threading.Event | None) -> Iterator[int | None]:
        """A file descriptor that becomes readable when *event* is set (None without one), for
        a ``poll`` that should sleep until data or cancel instead of waking up to look."""
        if event is None:
            yield None
            return
        wake = _WakePipe()
        try:
            with self.watch(event, wake.fire):
                yield wake.read_end
        finally:
            wake.close()

    def _loop(self) -> None:
        while True:
            time.sleep(POLL_S)
            with self._lock:
                if not self._items:
                    self._thread = None
                    return
                fired = [(t, c) for t, (e, c) in self._items.items() if e.is_set()]
                for token, _ in fired:
                    del self._items[token]
            for _, closer in fired:
                with contextlib.suppress(Exception):
                    closer()



class Connector:
    """Opens, caches and closes the SSH connections of one transport (thread-safe).

    *specs* is the transport's own dict (a name not in it is used as-is); *host_keys* the
    known_hosts policy. *banner_timeout* (TCP accepted, no SSH banner) and *auth_timeout* (a
    stall after the banner: key exchange or an authentication answer) bound the handshake;
    *use_agent* / *look_for_keys* are passed on to ``sshauth.Authenticator``.
    """

    def __init__(self, specs: dict[str, HostSpec], host_keys: KnownHosts, *,
                 connect_timeout: float, banner_timeout: float, auth_timeout: float,
                 use_agent: bool, look_for_keys: bool) -> None:
        self.specs = specs
        self.host_keys = host_keys
        self.connect_timeout = connect_timeout
        self.banner_timeout = banner_timeout
        self.auth_timeout = auth_timeout
        self.connections_opened = 0  # how many SSH connections have been made
        self._lock = threading.Lock()
        self._conns: dict[_RouteKey, paramiko.Transport] = {}
        self._route_locks: dict[_RouteKey, threading.Lock] = {}
        self._closed = False
        self._watchdog = _Watchdog()
        self.wake_on = self._watchdog.wake_on
        self._auth = Authenticator(use_agent=use_agent, look_for_keys=look_for_keys,
                                   auth_timeout=auth_timeout)

    def route(self, name: str) -> Route:
        """The hosts to traverse to reach *name*, ending with its spec."""
        return self._route(self.specs.get(name) or HostSpec(name=name, address=name))

    def close(self) -> None:
        """Close every connection (a connection still being set up is closed when done)."""
        self._closed = True
        with self._lock:
            conns = list(self._conns.values())
            self._conns.clear()
        for conn in reversed(conns):  # targets before the jump hosts they tunnel through
            with contextlib.suppress(Exception):
                conn.close()

    # ------------------------------------------------------------------------ resolution

    def _hop(self, text: str) -> HostSpec:
        parsed = parse_hop(text)
        name = parsed.pop("name")
        base = self.specs.get(name)
        spec = HostSpec(name=name, address=base.address if base else name,
                        port=base.port if base else 22, user=base.user if base else None,
                        identity_file=base.identity_file if base else None,
                        proxy_jump=base.proxy_jump if base else None,
                        jumps=base.jumps if base else ())
        for key, value in parsed.items():
            setattr(spec, key, value)
        return spec

    def _route(self, spec: HostSpec, seen: tuple[str, ...] = ()) -> Route:
        """The hosts to traverse, ending with *spec*: ProxyJump ``a,b`` gives (a, b, spec)."""
        if spec.name in seen or len(seen) > 8:
            raise HostFailure("unreachable",
                              f"ProxyJump loop: {' -> '.join((*seen, spec.name))}")
        hops = list(spec.jumps)
        if not hops and spec.proxy_jump:
            hops = [self._hop(h) for h in spec.proxy_jump.split(",") if h.strip()]
        if not hops:
            return (spec,)
        return (*self._route(hops[0], (*seen, spec.name)), *hops[1:], spec)

    # ----------------------------------------------------------------------- connections

    @staticmethod
    def _key(route: Route) -> _RouteKey:
        return tuple((h.name, h.address, h.port, h.user or "") for h in route)

    def drop(self, route: Route, conn: paramiko.Transport) -> None:
        with self._lock:
            if self._conns.get(self._key(route)) is conn:
                del self._conns[self._key(route)]
        with contextlib.suppress(Exception):
            conn.close()

    def connection(self, route: Route,
                    cancel: threading.Event | None) -> tuple[paramiko.Transport, bool]:
        """The cached live connection for *route*, or a new one. Returns (conn, fresh)."""
        key = self._key(route)
        with self._lock:
            lock = self._route_locks.setdefault(key, threading.Lock())
        while not lock.acquire(timeout=POLL_S):  # someone else is connecting this route
            if is_set(cancel):
                raise HostFailure("cancelled", "cancelled")
        try:
            with self._lock:
                conn = self._conns.get(key)
            if conn is not None and conn.is_active():
                return conn, False
            if conn is not None:
                self.drop(route, conn)
            conn = self._connect_confirmed(route, cancel)
            with self._lock:
                if self._closed:
                    conn.close()
                    raise HostFailure("cancelled", "transport closed")
                self._conns[key] = conn
                self.connections_opened += 1
            return conn, True
        finally:
            lock.release()

    def _connect_confirmed(self, route: Route,
                           cancel: threading.Event | None) -> paramiko.Transport:
        """A new connection to ``route[-1]``, tried a second time when the first ran out of
        time before login (TCP connect, banner or key exchange): a time-out is as much the
        client's as the host's (a login node busy with hundreds of handshakes, a lost SYN),
        and "the node may be down" is said only when a second try confirms it. A refusal,
        no route or an unknown name is an answer and is not tried again; a host that is
        really silent costs two time-outs, once per walk (the provider remembers it)."""
        for attempt in (1, 2):
            try:
                sock: socket.socket | paramiko.Channel
                if len(route) == 1:
                    sock = tcp_connect(route[-1], self.connect_timeout, cancel)
                else:
                    sock = self._tunnel(route, cancel)
                return self._handshake(sock, route[-1], cancel)
            except HostFailure as failure:
                if attempt == 2 or not _timed_out_before_login(failure) or is_set(cancel):
                    if attempt == 2:
                        raise HostFailure(failure.state, f"{failure.reason}, twice "
                                          "(a second try confirmed it)") from None
                    raise
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _tunnel(self, route: Route,
                cancel: threading.Event | None) -> paramiko.Channel:
        """A ``direct-tcpip`` channel from the previous hop to ``route[-1]`` (ProxyJump)."""
        jump, target = route[-2], route[-1]
        try:
            parent, _ = self.connection(route[:-1], cancel)
        except HostFailure as failure:
            raise HostFailure(failure.state,
                              f"via jump host {jump.name}: {failure.reason}") from None
        try:
            return parent.open_channel("direct-tcpip", (target.address, target.port),
                                       ("127.0.0.1", 0), timeout=self.connect_timeout)
        except paramiko.ChannelException as exc:
            raise HostFailure("unreachable", f"jump host {jump.name} cannot connect to the host "
                              f"({exc.text})") from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            why = str(exc) or "channel open timed out"
            raise HostFailure("unreachable", f"jump host {jump.name}: {why}") from None

    def _handshake(self, sock: socket.socket | paramiko.Channel, spec: HostSpec,
                   cancel: threading.Event | None) -> paramiko.Transport:
        """Banner, key exchange, host key check, authentication — each bounded."""
        conn = paramiko.Transport(sock)
        sock.settimeout(TRANSPORT_IDLE_S)  # paramiko set 0.1 s; see TRANSPORT_IDLE_S
        # paramiko's own timers are set just past ours (stretched as ours may be: LagClock),
        # so our clearer messages win.
        conn.banner_timeout = self.banner_timeout * MAX_STRETCH + 1
        conn.handshake_timeout = (self.banner_timeout + self.auth_timeout) * MAX_STRETCH + 1
        conn.auth_timeout = self.auth_timeout
        try:
            self.host_keys.prefer_known_types(conn, spec)
            done = threading.Event()
            before = LagClock(POLL_S)  # the banner's limit, then the key exchange's
            conn.start_client(event=done)
            after: LagClock | None = None
            while not done.wait(POLL_S):
                before.tick()
                if is_set(cancel):
                    raise HostFailure("cancelled", "cancelled")
                if after is None and conn.remote_version:
                    after = LagClock(POLL_S)
                if after is None and before.past(self.banner_timeout):
                    raise HostFailure("timeout", f"no SSH banner in {self.banner_timeout:g}s "
                                      "(TCP accepted, server silent)"
                                      + before.note(self.banner_timeout))
                if after is not None:
                    after.tick()
                    if after.past(self.auth_timeout):
                        raise HostFailure("timeout", f"SSH handshake stalled after the banner "
                                          f"({self.auth_timeout:g}s){after.note(self.auth_timeout)}")
            if not conn.is_active():
                raise self._classify_handshake(conn.get_exception(), before.start)
            try:
                self.host_keys.check(spec, conn.get_remote_server_key())
            except HostKeyRefused as refused:
                raise HostFailure("host-key-refused", refused.reason) from None
            with self._watchdog.watch(cancel, conn.close):
                self._auth.authenticate(conn, spec, cancel)
            return conn
        except BaseException:
            conn.close()
            raise

    def _classify_handshake(self, exc: BaseException | None, start: float) -> HostFailure:
        text = str(exc) if exc else "connection closed"
        if "protocol banner" in text:
            if time.monotonic() - start >= self.banner_timeout:
                return HostFailure("timeout", f"no SSH banner in {self.banner_timeout:g}s")
            return HostFailure("unreachable", "connection closed before the SSH banner")
        if "Indecipherable protocol version" in text:
            return HostFailure("unreachable", f"not an SSH server: {text}")
        if isinstance(exc, EOFError | ConnectionError) or not text:
            return HostFailure("unreachable", "connection closed during the SSH handshake")
        return HostFailure("unreachable", f"SSH handshake failed: {text}")


def _timed_out_before_login(failure: HostFailure) -> bool:
    """Did diag's own time limit end the attempt before login (worth a second try), rather
    than the host or the network answering no?"""
    return failure.state == "timeout" or (failure.state == "unreachable"
                                          and failure.reason.startswith("connect timeout"))
