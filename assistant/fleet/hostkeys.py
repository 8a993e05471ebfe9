"""Host keys: which SSH servers diag trusts, checked against known_hosts, never auto-added
silently.

An unknown key is refused unless the operator asked for ``accept_new_host_keys`` (OpenSSH's
``accept-new``), in which case it is recorded in the known_hosts file so the next session checks
it. A changed key is always refused: that is exactly the situation known_hosts exists for.
Hosts are looked up under their address and, failing that, their name, both written the way
OpenSSH files them (``[host]:port`` off port 22), so one known_hosts serves diag and ``ssh``.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import paramiko

from assistant.fleet.inventory import HostSpec


class HostKeyRefused(Exception):
    """The server's key is not one diag may trust; ``reason`` says why, for the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def hostkey_name(address: str, port: int) -> str:
    """The name OpenSSH files a host key under: ``host`` on port 22, else ``[host]:port``."""
    return address if port == 22 else f"[{address}]:{port}"


class KnownHosts:
    """The known_hosts policy of one transport (thread-safe).

    *path* is the file keys are checked against and new ones recorded in (default
    ``~/.ssh/known_hosts``, plus the read-only ``/etc/ssh/ssh_known_hosts``). A file that
    cannot be read refuses every host rather than trusting them all.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None,
                 accept_new: bool = False) -> None:
        self.accept_new = accept_new
        # host -> "name type SHA256:..." of a key refused, for a UI that offers to verify it
        self.refused: dict[str, str] = {}
        self._lock = threading.Lock()
        self._keys = paramiko.HostKeys()
        self._error = ""
        explicit = path is not None
        self.path = Path(os.path.expanduser(str(path or "~/.ssh/known_hosts")))
        sources = [self.path] + ([] if explicit else [Path("/etc/ssh/ssh_known_hosts")])
        for source in sources:
            if source.exists():
                try:
                    self._keys.load(str(source))
                except (OSError, UnicodeDecodeError, paramiko.hostkeys.InvalidHostKey) as exc:
                    self._error = f"cannot read known_hosts {source}: {exc}"

    def prefer_known_types(self, conn: paramiko.Transport, spec: HostSpec) -> None:
        """Ask for the key type we already know first, so a host with several host keys is not
        mistaken for one whose key changed (what OpenSSH does too)."""
        with self._lock:
            known = [t for _, keys in self._entries(spec) for t in keys]
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

    def check(self, spec: HostSpec, key: paramiko.PKey) -> None:
        """Return if *key* is the one known for *spec* (or new and accepted, then recorded);
        raise HostKeyRefused otherwise."""
        if self._error:
            raise HostKeyRefused(self._error)
        fingerprint = key.fingerprint
        name = hostkey_name(spec.address, spec.port)
        with self._lock:
            for entry_name, keys in self._entries(spec):
                known = keys.get(key.get_name())
                if known is None:
                    continue
                if known == key:
                    return
                self.refused[spec.name] = f"{entry_name} {key.get_name()} {fingerprint}"
                raise HostKeyRefused(f"host key CHANGED ({key.get_name()}, not the one in "
                                     f"{self.path}): possible man-in-the-middle; if the host "
                                     "was reinstalled, remove its old line (ssh-keygen -R)")
            if not self.accept_new:
                self.refused[spec.name] = f"{name} {key.get_name()} {fingerprint}"
                raise HostKeyRefused(f"unknown host key ({key.get_name()}, not in {self.path}):"
                                     " verify and add it, or use --accept-new-host-keys")
            self._keys.add(name, key.get_name(), key)
            try:
                self._record(name, key)
            except OSError as exc:
                raise HostKeyRefused(f"cannot record a new host key in {self.path}: "
                                     f"{exc}") from None

    def _entries(self, spec: HostSpec) -> list[tuple[str, dict[str, paramiko.PKey]]]:
        """Entries for the host under its address and, failing that, its name (lock held)."""
        names = [hostkey_name(spec.address, spec.port)]
        if spec.name != spec.address:
            names.append(hostkey_name(spec.name, spec.port))
        found = []
        for name in names:
            entry = self._keys.lookup(name)
            if entry is not None:
                found.append((name, {k: entry[k] for k in entry}))
        return found

    def _record(self, name: str, key: paramiko.PKey) -> None:
        """Append one OpenSSH-format line; flock so concurrent diag runs do not interleave."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.path, "a+b") as handle:
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
