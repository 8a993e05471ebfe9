"""A fleet of real OpenSSH servers on loopback, for tests and benchmarks of the SSH layer.

Mocking paramiko would test our assumptions about SSH, not SSH. Instead every "host" is a real
``/usr/sbin/sshd`` bound to its own loopback address (127.0.0.2, 127.0.0.3, ...: Linux routes
all of 127/8 to ``lo``) on a free port, with its own host key, a per-host directory of fake
tools (``nvidia-smi``, ``ibstat``, ``uname`` ... small shell scripts) first on the session PATH,
plus misbehaving "hosts" that real fleets have: nothing listening, a TCP accept that never
sends a banner, a banner and then silence.

Requirements (the CI installs them): root, and ``/usr/sbin/sshd`` (Debian: ``apt-get install
openssh-server``). :func:`unavailable_reason` says why a fleet cannot start, for pytest.skip.
What the setup has to do, and why:

- ``/run/sshd`` must exist (sshd's privilege-separation directory), and sshd is started by its
  absolute path (it re-executes itself).
- A dedicated user ``diagtest`` with ``/bin/sh`` as its shell: Debian's bash sources
  ``~/.bashrc`` for SSH commands, which could print noise; its password field is set to ``*``
  because with ``UsePAM no`` sshd refuses accounts whose password starts with ``!`` (locked),
  which is what ``useradd`` leaves.
- ``StrictModes no`` and a world-readable temp dir, since the keys live under /tmp and the
  ``diagtest`` user must read ``authorized_keys`` and execute the fake tools.
- ``SetEnv PATH=...`` puts the host's fake tool directory first (OpenSSH >= 7.8).
- Readiness is the ``Server listening on`` line in each sshd's log (no fixed sleeps, and no
  probe connections that would pollute the logs tests count lines in).

Start fleets from the main thread: each sshd gets ``PR_SET_PDEATHSIG`` so a killed test run
does not leave servers behind, and Linux delivers it when the *thread* that forked exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

from assistant.fleet.inventory import HostSpec  # noqa: E402
from assistant.fleet.ssh import SSHTransport  # noqa: E402

SSHD = "/usr/sbin/sshd"
TEST_USER = "diagtest"
BANNER = b"SSH-2.0-OpenSSH_9.2\r\n"
FAULT_KINDS = ("refused", "no-banner", "stall-after-banner")
PORT_RANGE = (20000, 32000)  # below Linux's ephemeral range, so client sockets never take them

DEFAULT_TOOLS: dict[str, str] = {
    "uname": 'case "$1" in -r) echo 5.15.0-105-generic ;; -n) echo "$DIAG_FLEET_HOST" ;;'
             " *) echo Linux ;; esac",
    "nvidia-smi": "echo 'NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4'",
    "ibstat": "printf \"CA 'mlx5_0'\\n\\tPort 1:\\n\\t\\tState: Active\\n\\t\\tRate: 400\\n\"",
}


def skip_or_fail(reason: str) -> None:
    """Skip where sshd cannot run — but CI sets DIAG_REQUIRE_SSHD, and there a skip is a failure:
    the SSH tests must really run somewhere."""
    import pytest

    if os.environ.get("DIAG_REQUIRE_SSHD"):
        pytest.fail(f"DIAG_REQUIRE_SSHD is set but the SSH fleet cannot start: {reason}")
    pytest.skip(reason)


class FleetUnavailable(RuntimeError):
    """The machine cannot run a fleet (no sshd, not root): tests skip with this message."""


def unavailable_reason() -> str | None:
    """Why a fleet cannot start here, or None when it can."""
    if not sys.platform.startswith("linux"):
        return "the SSH fleet needs Linux (loopback addresses 127.0.0.x)"
    if not os.path.exists(SSHD):
        return f"{SSHD} not found: install OpenSSH's server (apt-get install openssh-server)"
    if os.geteuid() != 0:
        return "the SSH fleet needs root (it runs sshd and creates the diagtest user)"
    for tool in ("ssh-keygen", "useradd", "usermod"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    return None


def sshd_version() -> tuple[int, int]:
    """OpenSSH's version, e.g. (9, 2): newer servers need extra config (PerSourcePenalties)."""
    out = subprocess.run([SSHD, "-V"], capture_output=True, text=True)
    match = re.search(r"OpenSSH_(\d+)\.(\d+)", out.stderr + out.stdout)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def ensure_test_user(user: str = TEST_USER) -> None:
    """Create the quiet login user if needed, and make it loginable without PAM."""
    if subprocess.run(["id", user], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", user], check=True,
                       capture_output=True)
    subprocess.run(["usermod", "--password", "*", user], check=True, capture_output=True)


def _loopback_addresses(first: int = 2) -> Iterator[str]:
    """127.0.0.2, 127.0.0.3, ... 127.0.0.254, 127.0.1.1, ... (no .0 / .255 octets)."""
    n = first
    while True:
        third, fourth = divmod(n, 254)
        yield f"127.0.{third}.{fourth + 1}" if third else f"127.0.0.{n}"
        n += 1


def _can_bind(address: str, port: int = 0) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


def _keygen(path: Path, comment: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                             "-f", str(path)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _child_setup() -> None:  # runs in the forked child, before exec
    os.setsid()
    if _libc is not None:
        _libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: die with the test process


@dataclass
class FleetHost:
    name: str
    address: str
    port: int
    kind: str = "sshd"  # or one of FAULT_KINDS
    dir: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    host_key: str = ""  # "ssh-ed25519 AAAA..." for sshd hosts
    server: _HoldServer | None = None

    @property
    def log(self) -> Path | None:
        return self.dir / "sshd.log" if self.dir else None

    @property
    def hostkey_name(self) -> str:
        return f"[{self.address}]:{self.port}"


class _HoldServer:
    """Accepts TCP connections and holds them: silent (no banner) or after sending a banner."""

    def __init__(self, address: str, port: int, banner: bytes | None) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((address, port))
        self.sock.listen(128)
        self.sock.settimeout(0.1)
        self.banner = banner
        self.held: list[socket.socket] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True,
                                       name=f"hold-{address}:{port}")
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            if self.banner:
                with contextlib.suppress(OSError):
                    conn.sendall(self.banner)
            self.held.append(conn)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(2)
        for conn in [*self.held, self.sock]:
            with contextlib.suppress(OSError):
                conn.close()


@dataclass
class SSHFleet:
    """N loopback sshd hosts plus faulty ones. Use as a context manager (or start/stop).

    *hosts*: a count (names ``{prefix}001``...) or explicit names. *faulty*: extra hosts,
    name -> one of FAULT_KINDS. *tools*: host -> {tool name: /bin/sh script body}, on top of
    DEFAULT_TOOLS (a fake ``uname``, ``nvidia-smi``, ``ibstat``). *hosts_per_address* > 1 puts
    several sshd on one loopback address (distinct ports), for very large fleets.
    """

    hosts: int | Sequence[str] = 4
    faulty: Mapping[str, str] = field(default_factory=dict)
    tools: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    default_tools: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_TOOLS))
    hosts_per_address: int = 1
    # host -> sshd ForceCommand: the host answers every command with this program instead
    # (it sees the command in $SSH_ORIGINAL_COMMAND). Used to replay recorded probe outputs.
    force_command: Mapping[str, str] = field(default_factory=dict)
    prefix: str = "node"
    log_level: str = "DEBUG1"  # DEBUG1 logs direct-tcpip requests: the ProxyJump tests read it
    user: str = TEST_USER
    keep: bool = field(default_factory=lambda: bool(os.environ.get("DIAG_KEEP_FLEET")))

    def __post_init__(self) -> None:
        names = ([f"{self.prefix}{i:03d}" for i in range(1, self.hosts + 1)]
                 if isinstance(self.hosts, int) else list(self.hosts))
        bad = {k for k in self.faulty.values() if k not in FAULT_KINDS}
        if bad:
            raise ValueError(f"unknown fault kinds {bad}; expected {FAULT_KINDS}")
        self.healthy: list[str] = names
        self.members: dict[str, FleetHost] = {}
        self.dir: Path = Path()
        self.client_key: Path = Path()
        self.known_hosts: Path = Path()
        self.inventory: Path = Path()
        self.ssh_config: Path = Path()
        self._ports: set[tuple[str, int]] = set()

    # ------------------------------------------------------------------------ lifecycle

    def __enter__(self) -> SSHFleet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def names(self) -> list[str]:
        """Every host, healthy first, then the faulty ones."""
        return list(self.members)

    def start(self, ready_timeout: float = 30.0) -> None:
        reason = unavailable_reason()
        if reason:
            raise FleetUnavailable(reason)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        ensure_test_user(self.user)
        self.dir = Path(tempfile.mkdtemp(prefix="diag-sshfleet-"))
        self.dir.chmod(0o755)  # the diagtest user reads authorized_keys and runs the tools
        try:
            self._start(ready_timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, ready_timeout: float) -> None:
        self.client_key = self.dir / "client_ed25519"
        proc = _keygen(self.client_key, "diag-fleet-client")
        if proc.wait() != 0:
            detail = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"ssh-keygen failed: {detail}")
        (self.dir / "authorized_keys").write_text(self.client_key.with_suffix(".pub")
                                                  .read_text())
        (self.dir / "authorized_keys").chmod(0o644)
        shared = _can_bind("127.0.0.2")  # else: distinct ports on 127.0.0.1
        addresses = _loopback_addresses() if shared else iter(lambda: "127.0.0.1", None)
        per_address = self.hosts_per_address if shared else sys.maxsize
        address = next(addresses)
        for i, name in enumerate(self.healthy + list(self.faulty)):
            if i and i % per_address == 0:
                address = next(addresses)
            kind = "sshd" if name in self.healthy else self.faulty[name]
            self.members[name] = FleetHost(name, address, self._free_port(address), kind)
        self._make_host_dirs()
        version = sshd_version()
        pending = [h for h in self.members.values() if h.kind == "sshd"]
        for host in pending:
            self._spawn(host, version)
        for host in self.members.values():
            if host.kind in ("no-banner", "stall-after-banner"):
                banner = BANNER if host.kind == "stall-after-banner" else None
                host.server = _HoldServer(host.address, host.port, banner)
        self._wait_ready(pending, version, ready_timeout)
        self._write_client_files()

    def _free_port(self, address: str) -> int:
        for _ in range(1000):
            port = random.randrange(*PORT_RANGE)
            if (address, port) not in self._ports and _can_bind(address, port):
                self._ports.add((address, port))
                return port
        raise RuntimeError(f"no free port on {address}")

    def _make_host_dirs(self) -> None:
        keygens = []
        for host in self.members.values():
            if host.kind != "sshd":
                continue
            host.dir = self.dir / "hosts" / host.name
            (host.dir / "bin").mkdir(parents=True)
            for path in (host.dir.parent, host.dir, host.dir / "bin"):
                path.chmod(0o755)
            for tool, body in {**self.default_tools, **self.tools.get(host.name, {})}.items():
                self.set_tool(host.name, tool, body)
            keygens.append((host, _keygen(host.dir / "ssh_host_ed25519_key", host.name)))
            if len(keygens) >= 32:  # bounded parallelism: fast for 512 hosts, gentle on 2 cores
                self._finish_keygens(keygens)
        self._finish_keygens(keygens)

    @staticmethod
    def _finish_keygens(keygens: list[tuple[FleetHost, subprocess.Popen[bytes]]]) -> None:
        for host, proc in keygens:
            if proc.wait() != 0:
                raise RuntimeError(f"ssh-keygen for {host.name} failed")
            assert host.dir is not None
            pub = (host.dir / "ssh_host_ed25519_key.pub").read_text().split()
            host.host_key = f"{pub[0]} {pub[1]}"
        keygens.clear()

    def _config(self, host: FleetHost, version: tuple[int, int]) -> Path:
        assert host.dir is not None
        lines = [
            f"ListenAddress {host.address}:{host.port}",
            f"HostKey {host.dir / 'ssh_host_ed25519_key'}",
            "PidFile none",
            f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
            "UsePAM no",
            "StrictModes no",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            f"AllowUsers {self.user}",
            "AllowTcpForwarding yes",  # the ProxyJump tests tunnel through fleet hosts
            f"SetEnv PATH={host.dir / 'bin'}:/usr/local/bin:/usr/bin:/bin "
            f"DIAG_FLEET_HOST={host.name} DIAG_FLEET={self.dir}",
            "MaxSessions 64",
            "MaxStartups 200:30:400",
            "PrintMotd no",
            "PrintLastLog no",
            "UseDNS no",
            f"LogLevel {self.log_level}",
        ]
        if version >= (9, 8):  # would throttle the tests' deliberate failures from 127.0.0.1
            lines.append("PerSourcePenalties no")
        if host.name in self.force_command:
            lines.append(f"ForceCommand {self.force_command[host.name]}")
        path = host.dir / "sshd_config"
        path.write_text("\n".join(lines) + "\n")
        return path

    def _spawn(self, host: FleetHost, version: tuple[int, int]) -> None:
        config = self._config(host, version)
        assert host.log is not None
        host.log.write_text("")
        host.proc = subprocess.Popen([SSHD, "-D", "-f", str(config), "-E", str(host.log)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=_child_setup)

    def _wait_ready(self, pending: list[FleetHost], version: tuple[int, int],
                    timeout: float) -> None:
        deadline = time.monotonic() + timeout
        retries: dict[str, int] = {}
        while pending:
            still = []
            for host in pending:
                assert host.log is not None and host.proc is not None
                log = host.log.read_text(errors="replace")
                if "Server listening on" in log:
                    continue
                if host.proc.poll() is not None:
                    if "Bind to port" in log and retries.get(host.name, 0) < 3:  # port taken
                        retries[host.name] = retries.get(host.name, 0) + 1
                        host.port = self._free_port(host.address)
                        self._spawn(host, version)
                    else:
                        raise RuntimeError(f"sshd for {host.name} exited: {log.strip()}")
                still.append(host)
            pending = still
            if pending and time.monotonic() > deadline:
                raise RuntimeError(f"sshd not ready in {timeout}s: {[h.name for h in pending]}")
            if pending:
                time.sleep(0.02)

    def _write_client_files(self) -> None:
        """known_hosts, an inventory and an ssh_config describing the fleet (clush/pdsh use
        the ssh_config: it is the only way to give each host its own port)."""
        self.known_hosts = self.dir / "known_hosts"
        self.known_hosts.write_text("".join(
            f"{h.hostkey_name} {h.host_key}\n" for h in self.members.values() if h.host_key))
        self.inventory = self.dir / "inventory.yaml"
        lines = ["defaults:", f"  user: {self.user}", f"  identity_file: {self.client_key}",
                 f"  known_hosts: {self.known_hosts}", "hosts:"]
        for i, host in enumerate(self.members.values()):
            lines.append(f"  {host.name}: {{address: {host.address}, port: {host.port}, "
                         f"rack: r{i // 8 + 1:02d}, kind: {host.kind}}}")
        self.inventory.write_text("\n".join(lines) + "\n")
        self.ssh_config = self.dir / "ssh_config"
        blocks = [f"Host {h.name}\n  HostName {h.address}\n  Port {h.port}\n"
                  for h in self.members.values()]
        blocks.append(f"Host *\n  User {self.user}\n  IdentityFile {self.client_key}\n"
                      f"  IdentitiesOnly yes\n  UserKnownHostsFile {self.known_hosts}\n"
                      "  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n"
                      "  ConnectTimeout 5\n")
        self.ssh_config.write_text("\n".join(blocks))

    def stop(self) -> None:
        """Kill every sshd we started (by pid, after checking /proc/PID/cmdline is ours) and
        the session processes under them; stop the fake servers; remove the temp dir."""
        procs = [h.proc for h in self.members.values() if h.proc is not None]
        victims: list[int] = []
        children = _children_map()
        for proc in procs:
            if proc.poll() is None and self._is_ours(proc.pid):
                victims.extend(_descendants(proc.pid, children))
                victims.append(proc.pid)
        # Commands whose channel was closed (timeouts, cancels) outlive their sshd session and
        # are reparented (to init or a subreaper); they carry DIAG_FLEET=<our dir> in their
        # environment, which identifies them as started by this fleet.
        victims.extend(p for p in self._session_orphans(children) if p not in victims)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for pid in victims:  # session processes that ignored SIGTERM
            if _alive(pid) and not any(p.pid == pid for p in procs):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for host in self.members.values():
            if host.server is not None:
                host.server.stop()
        if self.dir != Path() and not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _session_orphans(self, children: dict[int, list[int]]) -> list[int]:
        marker = f"DIAG_FLEET={self.dir}\0".encode()
        found = []
        for pid in sorted({p for kids in children.values() for p in kids}):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes() + b"\0"
            except OSError:
                continue
            if marker in environ:
                found.append(pid)
        return found

    def _is_ours(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            return False
        return str(self.dir).encode() in cmdline

    # --------------------------------------------------------------------------- helpers

    def set_tool(self, name: str, tool: str, body: str) -> None:
        """(Re)write a fake tool on a host; takes effect for the next command."""
        host = self.members[name]
        assert host.dir is not None, f"{name} is not an sshd host"
        path = host.dir / "bin" / tool
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)

    def log_text(self, name: str) -> str:
        log = self.members[name].log
        return log.read_text(errors="replace") if log else ""

    def count_log(self, name: str, needle: str) -> int:
        return self.log_text(name).count(needle)

    def spec(self, name: str, **overrides: object) -> HostSpec:
        host = self.members[name]
        spec = HostSpec(name=name, address=host.address, port=host.port, user=self.user,
                        identity_file=str(self.client_key),
                        attrs={"kind": host.kind})
        for key, value in overrides.items():
            setattr(spec, key, value)
        return spec

    def specs(self, names: Sequence[str] | None = None) -> dict[str, HostSpec]:
        return {n: self.spec(n) for n in (names if names is not None else self.names)}

    def transport(self, names: Sequence[str] | None = None, **kwargs: Any) -> SSHTransport:
        """An SSHTransport over the fleet, hermetic: this fleet's known_hosts and key only."""
        options: dict[str, Any] = {"known_hosts": self.known_hosts, "use_agent": False,
                                   "look_for_keys": False, "connect_timeout": 2.0}
        options.update(kwargs)
        return SSHTransport(self.specs(names), **options)


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def _descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
