"""Host keys: which SSH servers diag trusts, checked against known_hosts, never auto-added
silently.

The policy, for a host looked up under its address and, failing that, its name, both written
the way OpenSSH files them (``[host]:port`` off port 22), so one known_hosts serves diag and
``ssh`` (the files are read by ``assistant.fleet.knownhosts``):

- a key listed ``@revoked`` for the host is refused, always ("REVOKED");
- the key known for the host, of the type offered, is accepted;
- **any other key known for the host makes the offered one CHANGED, refused always** — also
  one of another type (known ecdsa, offered ed25519). OpenSSH asks for the key types it knows
  first (as ``prefer_known_types`` does here), so a genuine server answers with the known key;
  a server that offers only a type never seen before is, to an unattended run, what a
  man-in-the-middle looks like. (OpenSSH's interactive prompt warns "keys of different type
  are already known for this host" and leaves it to a human; diag has no human at that
  moment, so it refuses and says what to check.)
- a host with no key at all is "unknown": refused, unless the operator asked for
  ``accept_new_host_keys`` (OpenSSH's ``accept-new``); then the key is recorded in the
  known_hosts file (created 0600), announced to the front end with its fingerprint
  (``on_accept``) and kept in ``accepted`` for the incident store.

A file that cannot be read refuses every host rather than trusting them all; a line that
cannot be used is skipped with a warning naming it (``warnings``).
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import paramiko

from assistant.fleet import knownhosts
from assistant.fleet.inventory import HostSpec


class HostKeyRefused(Exception):
    """The server's key is not one diag may trust; ``reason`` says why, for the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class AcceptedKey:
    """A key recorded because of ``accept_new_host_keys``: what the operator must be told."""

    host: str
    name: str  # as filed in known_hosts: host or [host]:port
    key_type: str
    fingerprint: str  # SHA256:...
    known_hosts: str

    def __str__(self) -> str:
        return (f"recorded the new host key of {self.host} ({self.name}): {self.key_type} "
                f"{self.fingerprint} in {self.known_hosts}")


def hostkey_name(address: str, port: int) -> str:
    """The name OpenSSH files a host key under: ``host`` on port 22, else ``[host]:port``."""
    return address if port == 22 else f"[{address}]:{port}"


class KnownHosts:
    """The known_hosts policy of one transport (thread-safe).

    *path* is the file keys are checked against and new ones recorded in (default
    ``~/.ssh/known_hosts``, plus the read-only ``/etc/ssh/ssh_known_hosts``).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None,
                 accept_new: bool = False) -> None:
        self.accept_new = accept_new
        # host -> "name type SHA256:..." of a key refused, for a UI that offers to verify it
        self.refused: dict[str, str] = {}
        self.accepted: list[AcceptedKey] = []
        self.warnings: list[str] = []  # known_hosts lines skipped, each naming its line
        self.on_accept: Callable[[AcceptedKey], None] | None = None
        self._lock = threading.Lock()
        self._entries = knownhosts.EntryIndex()
        self._error = ""
        explicit = path is not None
        self.path = Path(os.path.expanduser(str(path or "~/.ssh/known_hosts")))
        sources = [self.path] + ([] if explicit else [Path("/etc/ssh/ssh_known_hosts")])
        for source in sources:
            if source.exists():
                try:
                    entries, warnings = knownhosts.read_file(source)
                except (OSError, UnicodeDecodeError) as exc:
                    self._error = f"cannot read known_hosts {source}: {exc}"
                    continue
                for entry in entries:
                    self._entries.add(entry)
                self.warnings.extend(warnings)

    def prefer_known_types(self, conn: paramiko.Transport, spec: HostSpec) -> None:
        """Ask for the key types we already know first, so a host with several host keys
        answers with the one we know (what OpenSSH does too)."""
        with self._lock:
            known = list(dict.fromkeys(e.key_type for e in self._known(spec, self._names(spec))))
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
        """Return if *key* may be trusted for *spec* (known, or new and accepted, then
        recorded); raise HostKeyRefused otherwise (see the module doc)."""
        if self._error:
            raise HostKeyRefused(self._error)
        blob, key_type = key.asbytes(), key.get_name()
        offered = f"{key_type} {knownhosts.fingerprint(blob)}"
        names = self._names(spec)
        name = names[0]
        with self._lock:
            for entry in self._entries.matching(names):
                if entry.marker == "@revoked" and entry.blob == blob:
                    self.refused[spec.name] = f"{name} {offered}"
                    raise HostKeyRefused(f"host key REVOKED ({offered}, marked @revoked at "
                                         f"{entry.where}): refused")
            known = self._known(spec, names)
            if any(e.blob == blob for e in known):
                return
            if known:
                first = known[0]
                self.refused[spec.name] = f"{name} {offered}"
                other = "" if first.key_type == key_type else " (a key of another type)"
                raise HostKeyRefused(
                    f"host key CHANGED: offered {offered}, but {first.where} knows "
                    f"{first.key_type} {first.fingerprint}{other}: possible man-in-the-middle; "
                    "if the host was reinstalled, remove its old line (ssh-keygen -R)")
            if spec.port != 22 and any(  # OpenSSH also accepts a match filed without the port
                    e.blob == blob for e in self._known(spec, self._names(spec, port=22))):
                return
            if not self.accept_new:
                self.refused[spec.name] = f"{name} {offered}"
                raise HostKeyRefused(f"unknown host key ({offered}, not in {self.path}): "
                                     "verify and add it, or use --accept-new-host-keys")
            try:
                self._record(name, key)
            except OSError as exc:
                raise HostKeyRefused(f"cannot record a new host key in {self.path}: "
                                     f"{exc}") from None
            self._entries.add(knownhosts.Entry("", (name,), key_type, blob,
                                                  f"{self.path} (just recorded)"))
            accepted = AcceptedKey(spec.name, name, key_type, knownhosts.fingerprint(blob),
                                   str(self.path))
            self.accepted.append(accepted)
        if self.on_accept is not None:
            self.on_accept(accepted)

    @staticmethod
    def _names(spec: HostSpec, port: int | None = None) -> list[str]:
        """The names the host's keys may be filed under: its address, then its name."""
        port = spec.port if port is None else port
        names = [hostkey_name(spec.address, port)]
        if spec.name != spec.address:
            names.append(hostkey_name(spec.name, port))
        return names

    def _known(self, spec: HostSpec, names: list[str]) -> list[knownhosts.Entry]:
        """The plain entries for the host, filed under any of *names* (lock held)."""
        return [e for e in self._entries.matching(names) if not e.marker]

    def _record(self, name: str, key: paramiko.PKey) -> None:
        """Append one OpenSSH-format line; flock so concurrent diag runs do not interleave. A
        file created here is 0600 in a 0700 directory, like ssh's own."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a+b") as handle:
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
