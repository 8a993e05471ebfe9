"""The SSH transport: paramiko, one reused connection per host, every failure classified.

Why it is built this way:

- **One connection per host per session.** A runbook runs several probes on the same nodes;
  the TCP + key exchange + auth round trips dominate a probe's cost, so the first command opens
  a connection and every later command opens a new channel on it. Connections live in a cache
  keyed by route (jump hops + host), each behind its own lock so two threads never connect the
  same host twice and one slow host never blocks another.
- **Failures are states, not exceptions.** At 3 a.m. over 512 nodes the operator needs
  "gpu017: unreachable (connection refused)", not a traceback. ``run`` never raises for host
  trouble; every phase has its own bound and its own wording: TCP connect (``unreachable``:
  refused / no route / DNS / connect timeout), banner (``timeout``: nothing after TCP accept),
  key exchange after the banner (``timeout``), authentication (``auth-failed``), host key
  (``host-key-refused``), the command itself (``timeout``), the cancel event (``cancelled``).
- **Host keys are checked, never auto-added silently.** An unknown key is refused unless the
  operator asked for ``accept_new_host_keys`` (OpenSSH's ``accept-new``), in which case it is
  recorded in the known_hosts file so the next session checks it. A changed key is always
  refused: that is exactly the situation known_hosts exists for.
- **Nothing blocks forever.** The TCP connect is non-blocking and polled; the handshake is
  started asynchronously and watched; the command's output is read with ``poll`` and a
  deadline, and the channel is closed on expiry even if the remote never closes it. ``poll``
  rather than ``select`` because a 512-host fan-out has file descriptors above 1024.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import getpass
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import paramiko

from assistant.fleet.hostexpr import InventoryError, parse_hop
from assistant.fleet.inventory import HostSpec
from assistant.fleet.local import MAX_OUTPUT, BoundedBuffer
from assistant.fleet.transport import CommandResult

DEFAULT_KEY_NAMES = ("id_ed25519", "id_ecdsa", "id_rsa")
_POLL_S = 0.05  # granularity at which cancel and deadlines are noticed

# paramiko logs a traceback at ERROR when a transport thread dies (a banner timeout, a
# connection we close on cancel). Those are states here, already reported; without a handler
# Python's last-resort handler would print them on the operator's terminal.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class _Failure(Exception):
    """A classified host failure travelling up to ``run``, which turns it into a result."""

    def __init__(self, state: str, reason: str) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason


def _is_set(event: threading.Event | None) -> bool:
    return event is not None and event.is_set()


def _hostkey_name(address: str, port: int) -> str:
    """The name OpenSSH files a host key under: ``host`` on port 22, else ``[host]:port``."""
    return address if port == 22 else f"[{address}]:{port}"


def _errno_reason(err: int) -> str:
    return {
        errno.ECONNREFUSED: "connection refused",
        errno.EHOSTUNREACH: "no route to host",
        errno.ENETUNREACH: "network unreachable",
        errno.ETIMEDOUT: "connect timed out",
        errno.ECONNRESET: "connection reset",
    }.get(err, os.strerror(err).lower())


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

    def _loop(self) -> None:
        while True:
            time.sleep(_POLL_S)
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
        self.connect_timeout = connect_timeout
        self.banner_timeout = banner_timeout if banner_timeout is not None else connect_timeout
        self.auth_timeout = auth_timeout if auth_timeout is not None else connect_timeout
        self.accept_new_host_keys = accept_new_host_keys
        self.use_agent = use_agent
        self.look_for_keys = look_for_keys
        self.max_output = max_output
        self.connections_opened = 0  # how many SSH connections this transport has made
        # host -> "name type SHA256:..." of a key refused, for a UI that offers to verify it
        self.refused_keys: dict[str, str] = {}
        self._lock = threading.Lock()
        self._conns: dict[tuple[tuple[str, str, int, str], ...], paramiko.Transport] = {}
        self._route_locks: dict[tuple[tuple[str, str, int, str], ...], threading.Lock] = {}
        self._keys: dict[str, paramiko.PKey | str] = {}  # path -> key, or why it cannot load
        self._closed = False
        self._watchdog = _Watchdog()
        # known_hosts
        self._hk_lock = threading.Lock()
        self._host_keys = paramiko.HostKeys()
        self._known_hosts_error = ""
        explicit = known_hosts is not None
        self.known_hosts = Path(os.path.expanduser(str(known_hosts or "~/.ssh/known_hosts")))
        sources = [self.known_hosts] + ([] if explicit else [Path("/etc/ssh/ssh_known_hosts")])
        for source in sources:
            if source.exists():
                try:
                    self._host_keys.load(str(source))
                except (OSError, UnicodeDecodeError, paramiko.hostkeys.InvalidHostKey) as exc:
                    self._known_hosts_error = f"cannot read known_hosts {source}: {exc}"

    # ------------------------------------------------------------------------------ public

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        """Run *command* on *host*; never raises for host trouble (see the module doc)."""
        start = time.monotonic()

        def result(state: str, reason: str = "", **kw: Any) -> CommandResult:
            return CommandResult(host=host, state=state, reason=reason,
                                 duration_s=time.monotonic() - start, **kw)

        if _is_set(cancel):
            return result("cancelled", "cancelled")
        if self._closed:
            return result("cancelled", "transport closed")
        try:
            route = self._route(self._spec(host))
            for attempt in (0, 1):
                conn, fresh = self._connection(route, cancel)
                try:
                    channel = conn.open_session(timeout=max(self.connect_timeout, 1.0))
                    break
                except (paramiko.SSHException, EOFError, OSError) as exc:
                    self._drop(route, conn)
                    if fresh or attempt:  # a reused connection may have died: retry once
                        raise _Failure("unreachable", f"cannot open a session: {exc}") from None
            return self._execute(channel, command, timeout, cancel, result)
        except _Failure as failure:
            if _is_set(cancel):
                return result("cancelled", "cancelled")
            return result(failure.state, failure.reason)
        except InventoryError as exc:
            return result("unreachable", str(exc))
        except Exception as exc:  # last resort: a bug or an unforeseen paramiko error
            if _is_set(cancel):
                return result("cancelled", "cancelled")
            return result("unreachable", f"unexpected {type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Close every connection (later ``run`` calls answer ``cancelled``)."""
        self._closed = True
        with self._lock:
            conns = list(self._conns.values())
            self._conns.clear()
        for conn in reversed(conns):  # targets before the jump hosts they tunnel through
            with contextlib.suppress(Exception):
                conn.close()

    def __enter__(self) -> SSHTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------ resolution

    def _spec(self, name: str) -> HostSpec:
        return self.specs.get(name) or HostSpec(name=name, address=name)

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

    def _route(self, spec: HostSpec, seen: tuple[str, ...] = ()) -> tuple[HostSpec, ...]:
        """The hosts to traverse, ending with *spec*: ProxyJump ``a,b`` gives (a, b, spec)."""
        if spec.name in seen or len(seen) > 8:
            raise _Failure("unreachable", f"ProxyJump loop: {' -> '.join((*seen, spec.name))}")
        hops = list(spec.jumps)
        if not hops and spec.proxy_jump:
            hops = [self._hop(h) for h in spec.proxy_jump.split(",") if h.strip()]
        if not hops:
            return (spec,)
        return (*self._route(hops[0], (*seen, spec.name)), *hops[1:], spec)

    # ----------------------------------------------------------------------- connections

    @staticmethod
    def _key(route: tuple[HostSpec, ...]) -> tuple[tuple[str, str, int, str], ...]:
        return tuple((h.name, h.address, h.port, h.user or "") for h in route)

    def _drop(self, route: tuple[HostSpec, ...], conn: paramiko.Transport) -> None:
        with self._lock:
            if self._conns.get(self._key(route)) is conn:
                del self._conns[self._key(route)]
        with contextlib.suppress(Exception):
            conn.close()

    def _connection(self, route: tuple[HostSpec, ...],
                    cancel: threading.Event | None) -> tuple[paramiko.Transport, bool]:
        """The cached live connection for *route*, or a new one. Returns (conn, fresh)."""
        key = self._key(route)
        with self._lock:
            lock = self._route_locks.setdefault(key, threading.Lock())
        while not lock.acquire(timeout=_POLL_S):  # someone else is connecting this route
            if _is_set(cancel):
                raise _Failure("cancelled", "cancelled")
        try:
            with self._lock:
                conn = self._conns.get(key)
            if conn is not None and conn.is_active():
                return conn, False
            if conn is not None:
                self._drop(route, conn)
            spec = route[-1]
            if len(route) == 1:
                sock: socket.socket | paramiko.Channel = self._tcp_connect(spec, cancel)
            else:
                sock = self._tunnel(route, cancel)
            conn = self._handshake(sock, spec, cancel)
            with self._lock:
                if self._closed:
                    conn.close()
                    raise _Failure("cancelled", "transport closed")
                self._conns[key] = conn
                self.connections_opened += 1
            return conn, True
        finally:
            lock.release()

    def _tunnel(self, route: tuple[HostSpec, ...],
                cancel: threading.Event | None) -> paramiko.Channel:
        """A ``direct-tcpip`` channel from the previous hop to ``route[-1]`` (ProxyJump)."""
        jump, target = route[-2], route[-1]
        try:
            parent, _ = self._connection(route[:-1], cancel)
        except _Failure as failure:
            raise _Failure(failure.state, f"via jump host {jump.name}: {failure.reason}") from None
        try:
            return parent.open_channel("direct-tcpip", (target.address, target.port),
                                       ("127.0.0.1", 0), timeout=self.connect_timeout)
        except paramiko.ChannelException as exc:
            raise _Failure("unreachable", f"jump host {jump.name} cannot connect to the host "
                           f"({exc.text})") from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            why = str(exc) or "channel open timed out"
            raise _Failure("unreachable", f"jump host {jump.name}: {why}") from None

    def _tcp_connect(self, spec: HostSpec, cancel: threading.Event | None) -> socket.socket:
        """Non-blocking connect polled in small steps, so cancel is honoured and the reason is
        precise (refused / no route / timeout / DNS)."""
        try:
            infos = socket.getaddrinfo(spec.address, spec.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise _Failure("unreachable", f"DNS lookup failed: {exc.strerror}") from None
        except UnicodeError:  # getaddrinfo's IDNA step rejects e.g. a label over 63 characters
            raise _Failure("unreachable", "DNS lookup failed: invalid host name") from None
        deadline = time.monotonic() + self.connect_timeout
        reason = "no address"
        for family, kind, proto, _, sockaddr in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                err = sock.connect_ex(sockaddr)
                if err in (errno.EINPROGRESS, errno.EAGAIN):
                    poller = select.poll()
                    poller.register(sock, select.POLLOUT)
                    while True:
                        if _is_set(cancel):
                            raise _Failure("cancelled", "cancelled")
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            raise _Failure("unreachable", f"connect timeout after "
                                           f"{self.connect_timeout:g}s")
                        if poller.poll(min(_POLL_S, remaining) * 1000):
                            break
                    err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err == 0:
                    sock.setblocking(True)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    return sock
                reason = _errno_reason(err)
            except _Failure:
                sock.close()
                raise
            except OSError as exc:
                reason = _errno_reason(exc.errno or 0)
            sock.close()
        raise _Failure("unreachable", reason)

    def _handshake(self, sock: socket.socket | paramiko.Channel, spec: HostSpec,
                   cancel: threading.Event | None) -> paramiko.Transport:
        """Banner, key exchange, host key check, authentication — each bounded."""
        conn = paramiko.Transport(sock)
        # paramiko's own timers are set just past ours, so our clearer messages win.
        conn.banner_timeout = self.banner_timeout + 1
        conn.handshake_timeout = self.banner_timeout + self.auth_timeout + 1
        conn.auth_timeout = self.auth_timeout
        try:
            self._prefer_known_key_types(conn, spec)
            done = threading.Event()
            start = time.monotonic()
            conn.start_client(event=done)
            banner_at: float | None = None
            while not done.wait(_POLL_S):
                now = time.monotonic()
                if _is_set(cancel):
                    raise _Failure("cancelled", "cancelled")
                if banner_at is None and conn.remote_version:
                    banner_at = now
                if banner_at is None and now - start > self.banner_timeout:
                    raise _Failure("timeout", f"no SSH banner in {self.banner_timeout:g}s "
                                   "(TCP accepted, server silent)")
                if banner_at is not None and now - banner_at > self.auth_timeout:
                    raise _Failure("timeout", f"SSH handshake stalled after the banner "
                                   f"({self.auth_timeout:g}s)")
            if not conn.is_active():
                raise self._classify_handshake(conn.get_exception(), start)
            self._check_host_key(spec, conn.get_remote_server_key())
            with self._watchdog.watch(cancel, conn.close):
                self._authenticate(conn, spec, cancel)
            return conn
        except BaseException:
            conn.close()
            raise

    def _classify_handshake(self, exc: BaseException | None, start: float) -> _Failure:
        text = str(exc) if exc else "connection closed"
        if "protocol banner" in text:
            if time.monotonic() - start >= self.banner_timeout:
                return _Failure("timeout", f"no SSH banner in {self.banner_timeout:g}s")
            return _Failure("unreachable", "connection closed before the SSH banner")
        if "Indecipherable protocol version" in text:
            return _Failure("unreachable", f"not an SSH server: {text}")
        if isinstance(exc, EOFError | ConnectionError) or not text:
            return _Failure("unreachable", "connection closed during the SSH handshake")
        return _Failure("unreachable", f"SSH handshake failed: {text}")

    # ------------------------------------------------------------------------- host keys

    def _known_keys(self, spec: HostSpec) -> list[tuple[str, dict[str, paramiko.PKey]]]:
        with self._hk_lock:
            return self._known_keys_locked(spec)

    def _prefer_known_key_types(self, conn: paramiko.Transport, spec: HostSpec) -> None:
        """Ask for the key type we already know first, so a host with several host keys is not
        mistaken for one whose key changed (what OpenSSH does too)."""
        known = [t for _, keys in self._known_keys(spec) for t in keys]
        if not known:
            return
        options = conn.get_security_options()
        offered = list(options.key_types)
        wanted: list[str] = []
        for key_type in known:
            candidates = (["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] if key_type == "ssh-rsa"
                          else [key_type, f"{key_type}-cert-v01@openssh.com"])
            wanted.extend(c for c in candidates if c in offered and c not in wanted)
        options.key_types = wanted + [t for t in offered if t not in wanted]

    def _check_host_key(self, spec: HostSpec, key: paramiko.PKey) -> None:
        if self._known_hosts_error:
            raise _Failure("host-key-refused", self._known_hosts_error)
        fingerprint = key.fingerprint
        name = _hostkey_name(spec.address, spec.port)
        with self._hk_lock:
            for entry_name, keys in self._known_keys_locked(spec):
                known = keys.get(key.get_name())
                if known is None:
                    continue
                if known == key:
                    return
                self.refused_keys[spec.name] = f"{entry_name} {key.get_name()} {fingerprint}"
                raise _Failure("host-key-refused",
                               f"host key CHANGED ({key.get_name()}, not the one in "
                               f"{self.known_hosts}): possible man-in-the-middle; if the host "
                               "was reinstalled, remove its old line (ssh-keygen -R)")
            if not self.accept_new_host_keys:
                self.refused_keys[spec.name] = f"{name} {key.get_name()} {fingerprint}"
                raise _Failure("host-key-refused",
                               f"unknown host key ({key.get_name()}, not in {self.known_hosts}):"
                               " verify and add it, or use --accept-new-host-keys")
            self._host_keys.add(name, key.get_name(), key)
            try:
                self._record_host_key(name, key)
            except OSError as exc:
                raise _Failure("host-key-refused", f"cannot record a new host key in "
                               f"{self.known_hosts}: {exc}") from None

    def _known_keys_locked(self, spec: HostSpec) -> list[tuple[str, dict[str, paramiko.PKey]]]:
        """Entries for the host under its address and, failing that, its name."""
        names = [_hostkey_name(spec.address, spec.port)]
        if spec.name != spec.address:
            names.append(_hostkey_name(spec.name, spec.port))
        found = []
        for name in names:
            entry = self._host_keys.lookup(name)
            if entry is not None:
                found.append((name, {k: entry[k] for k in entry}))
        return found

    def _record_host_key(self, name: str, key: paramiko.PKey) -> None:
        """Append one OpenSSH-format line; flock so concurrent diag runs do not interleave."""
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.known_hosts, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                handle.seek(0, os.SEEK_END)
                prefix = b""
                if handle.tell():
                    handle.seek(-1, os.SEEK_END)
                    if handle.read(1) != b"\n":
                        prefix = b"\n"
                line = f"{name} {key.get_name()} {key.get_base64()}\n".encode()
                handle.write(prefix + line)
                handle.flush()
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --------------------------------------------------------------------- authentication

    def _load_key(self, path: str) -> paramiko.PKey | str:
        """Load (once per transport) a private key, or return why it cannot be used."""
        with self._lock:
            cached = self._keys.get(path)
        if cached is not None:
            return cached
        loaded: paramiko.PKey | str
        try:
            loaded = paramiko.PKey.from_path(path)
        except FileNotFoundError:
            loaded = f"{path}: no such file"
        except paramiko.PasswordRequiredException:
            loaded = f"{path}: encrypted (load it into ssh-agent)"
        except (OSError, ValueError, TypeError, paramiko.SSHException) as exc:
            loaded = f"{path}: cannot load ({exc})"
        with self._lock:
            self._keys[path] = loaded
        return loaded

    def _authenticate(self, conn: paramiko.Transport, spec: HostSpec,
                      cancel: threading.Event | None) -> None:
        user = spec.user or getpass.getuser()
        candidates: list[tuple[str, paramiko.PKey]] = []
        problems: list[str] = []
        paths: list[str] = []
        if spec.identity_file:
            paths.append(os.path.expanduser(spec.identity_file))
        agent: paramiko.Agent | None = None
        try:
            for path in paths:
                key = self._load_key(path)
                (problems.append(key) if isinstance(key, str)
                 else candidates.append((os.path.basename(path), key)))
            if self.use_agent and os.environ.get("SSH_AUTH_SOCK"):
                try:
                    agent = paramiko.Agent()
                    candidates.extend(("agent key", key) for key in agent.get_keys())
                except paramiko.SSHException as exc:
                    problems.append(f"ssh-agent: {exc}")
            if self.look_for_keys:
                for key_name in DEFAULT_KEY_NAMES:
                    path = os.path.expanduser(f"~/.ssh/{key_name}")
                    if path not in paths and os.path.isfile(path):
                        key = self._load_key(path)
                        if not isinstance(key, str):
                            candidates.append((key_name, key))
            if not candidates:
                detail = f" ({'; '.join(problems)})" if problems else ""
                raise _Failure("auth-failed", f"no usable SSH key for user {user}: no identity "
                               f"file, agent key or ~/.ssh/id_* key{detail}")
            tried = 0
            for _label, key in candidates:
                if _is_set(cancel):
                    raise _Failure("cancelled", "cancelled")
                tried += 1
                try:
                    conn.auth_publickey(user, key)
                except paramiko.BadAuthenticationType as exc:
                    raise _Failure("auth-failed", "server does not accept public keys (allows "
                                   f"{', '.join(exc.allowed_types)})") from None
                except paramiko.AuthenticationException as exc:
                    if "timeout" in str(exc).lower():
                        raise _Failure("timeout", f"no answer to authentication in "
                                       f"{self.auth_timeout:g}s") from None
                    if not conn.is_active():
                        raise _Failure("auth-failed", f"user {user}: server closed the "
                                       f"connection after {tried} key(s)") from None
                    continue
                except paramiko.SSHException:  # e.g. the agent refused to sign
                    continue
                if conn.is_authenticated():
                    return
            detail = f"; {'; '.join(problems)}" if problems else ""
            raise _Failure("auth-failed", f"public key refused for user {user} "
                           f"({tried} key(s) tried{detail})")
        finally:
            if agent is not None:
                agent.close()

    # ------------------------------------------------------------------------- execution

    def _execute(self, channel: paramiko.Channel, command: str, timeout: float,
                 cancel: threading.Event | None,
                 result: Callable[..., CommandResult]) -> CommandResult:
        """Run on an open channel, reading both streams until exit, deadline or cancel."""
        out, err = BoundedBuffer(self.max_output), BoundedBuffer(self.max_output)
        deadline = time.monotonic() + timeout
        state, reason = "ok", ""
        try:
            channel.exec_command(command)
            channel.shutdown_write()  # stdin: EOF at once, a probe never waits for input
            poller = select.poll()
            poller.register(channel.fileno(), select.POLLIN)
            while True:
                while channel.recv_ready():
                    out.add(channel.recv(65536))
                while channel.recv_stderr_ready():
                    err.add(channel.recv_stderr(65536))
                # exit status can precede the last output (OpenSSH sends it when the child
                # exits, then drains the pipes): finished means EOF *and* status, or closed.
                if channel.closed or (channel.eof_received and channel.exit_status_ready()):
                    break
                if _is_set(cancel):
                    state, reason = "cancelled", "cancelled"
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    state, reason = "timeout", f"command did not finish in {timeout:g}s"
                    break
                wait = min(_POLL_S * 2, remaining)
                if channel.eof_received:  # the pipe stays readable after EOF: wait on status
                    channel.status_event.wait(wait)
                else:
                    poller.poll(wait * 1000)
            while channel.recv_ready():
                out.add(channel.recv(65536))
            while channel.recv_stderr_ready():
                err.add(channel.recv_stderr(65536))
            transport = channel.get_transport()
            if state == "ok" and channel.exit_status == -1 and not (transport and
                                                                 transport.is_active()):
                state, reason = "unreachable", "connection lost during the command"
        except (paramiko.SSHException, EOFError, OSError) as exc:
            state, reason = "unreachable", f"connection lost during the command: {exc}"
        finally:
            exit_status = channel.exit_status if channel.exit_status_ready() else -1
            with contextlib.suppress(Exception):
                channel.close()
        return result(state, reason, stdout=out.text("stdout"), stderr=err.text("stderr"),
                      exit_status=None if exit_status == -1 or state != "ok" else exit_status)
