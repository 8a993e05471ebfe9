"""Reading known_hosts files the way OpenSSH does (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT").

paramiko's own reader handles neither markers nor patterns: one ``@cert-authority`` or
``@revoked`` line, or one line with broken key data, raised a base64 error and so refused every
host. Here each line is read on its own:

- ``[marker] hostnames keytype base64-key [comment]``, fields separated by spaces or tabs;
  blank lines and ``#`` comments are skipped;
- *hostnames* is a comma-separated list of patterns (``*`` and ``?`` wildcards, ``!`` negates:
  a host matching a negated pattern is not matched by the line even if another pattern
  matches), compared without regard to case, with ``[host]:port`` for a port other than 22; or
  one hashed name ``|1|salt|hmac`` (HMAC-SHA1 of the name keyed by the salt, what
  ``HashKnownHosts yes`` writes);
- ``@revoked`` lines name keys that must never be accepted for the matching hosts;
  ``@cert-authority`` lines trust a CA for host *certificates*, which diag does not verify, so
  they are not used (and never make a plain key known or changed — as in OpenSSH);
- a line that cannot be used (unknown marker, missing fields, key data that is not base64 or
  does not hold the key type it claims) is skipped with a warning naming the file and line.

Keys are compared by their wire-format blob, so a key type paramiko cannot parse
(``sk-ssh-ed25519@openssh.com``) still counts as "a key known for this host".
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MARKERS = ("@cert-authority", "@revoked")


@dataclass(frozen=True)
class Entry:
    """One usable line of a known_hosts file."""

    marker: str  # "", "@revoked" or "@cert-authority"
    patterns: tuple[str, ...]
    key_type: str
    blob: bytes
    where: str  # "FILE:LINE", for messages

    def matches(self, name: str) -> bool:
        """Does this line apply to *name* (``host`` or ``[host]:port``)?"""
        name = name.lower()
        matched = False
        for pattern in self.patterns:
            if pattern.startswith("|1|"):
                matched = matched or _hashed_match(pattern, name)
                continue
            negated = pattern.startswith("!")
            if _glob(pattern[1:] if negated else pattern, name):
                if negated:
                    return False
                matched = True
        return matched

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.blob)

    def literal_names(self) -> tuple[str, ...] | None:
        """The names this line applies to when every pattern is a plain name (no wildcard,
        negation or hash), lowercased; None when the line has to be matched pattern by
        pattern."""
        if any(p.startswith(("|1|", "!")) or "*" in p or "?" in p for p in self.patterns):
            return None
        return tuple(p.lower() for p in self.patterns)


class EntryIndex:
    """The entries of the known_hosts files, found by name without a scan of every line.

    A fleet's known_hosts holds a line per host, and every connection looks its host up (up to
    four times: preferred key types, revoked, known, known without the port): scanning every
    line for every host made a 128-host fan-out spend more client CPU here than in SSH itself.
    Lines of plain names are indexed by name; only lines with wildcards, negations or hashed
    names are matched one by one (a hashed name can only be tested with its own salt, as
    OpenSSH does). Results keep the
    files' order, which the messages rely on ("the first line that knows this host").
    Not locked: its owner (``hostkeys.KnownHosts``) asks under its own lock."""

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self.entries: list[Entry] = []
        self._by_name: dict[str, list[int]] = {}
        self._scanned: list[int] = []
        # lines of hashed names only: (position, [HashedName, ...]), tested in a tight loop
        self._hashed: list[tuple[int, list[HashedName]]] = []
        # names -> entries: a connection asks up to four times (preferred key types, revoked,
        # known, known without the port), and hashed lines cost an HMAC each per asking
        self._asked: dict[tuple[str, ...], list[Entry]] = {}
        for entry in entries:
            self.add(entry)

    def add(self, entry: Entry) -> None:
        position = len(self.entries)
        self.entries.append(entry)
        self._asked.clear()
        names = entry.literal_names()
        if names is None:
            hashes = [_hashed_name(p) for p in entry.patterns]
            if hashes and all(h is not None for h in hashes):
                self._hashed.append((position, [h for h in hashes if h is not None]))
            else:
                self._scanned.append(position)
            return
        for name in dict.fromkeys(names):
            self._by_name.setdefault(name, []).append(position)

    def matching(self, names: Iterable[str]) -> list[Entry]:
        """Every entry that applies to any of *names*, in file order."""
        key = tuple(n.lower() for n in names)
        found = self._asked.get(key)
        if found is None:
            positions = {p for n in key for p in self._by_name.get(n, ())}
            positions.update(p for p in self._scanned
                             if any(self.entries[p].matches(n) for n in key))
            encoded = [n.encode() for n in key]
            positions.update(p for p, hashes in self._hashed
                             if any(h.names(n) for h in hashes for n in encoded))
            found = self._asked[key] = [self.entries[p] for p in sorted(positions)]
        return list(found)


class HashedName:
    """One ``|1|salt|hmac`` name with its HMAC-SHA1 key pads hashed once (RFC 2104).

    Testing a name against a hashed line is an HMAC keyed by that line's own salt, so a fleet
    of N hosts and a hashed known_hosts of M lines costs N x M of them; ``hmac.digest`` set up
    its key for each one (~3 us), where copying the two pre-fed SHA-1 states costs a third."""

    __slots__ = ("_inner", "_mac", "_outer")

    def __init__(self, salt: bytes, mac: bytes) -> None:
        key = salt if len(salt) <= 64 else hashlib.sha1(salt).digest()
        key = key.ljust(64, b"\0")
        self._inner = hashlib.sha1(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha1(bytes(b ^ 0x5C for b in key))
        self._mac = mac

    def names(self, name: bytes) -> bool:
        """Is this the line's hashed *name* (lowercased, encoded)?"""
        inner = self._inner.copy()
        inner.update(name)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest() == self._mac


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch)
                    for ch in pattern.lower())
    return re.compile(regex)


def _glob(pattern: str, name: str) -> bool:
    """OpenSSH's pattern match: ``*`` any run, ``?`` one character, everything else literal
    (``[`` and ``]`` included: ``[host]:2222`` is a name, not a character class)."""
    if "*" not in pattern and "?" not in pattern:
        return pattern.lower() == name
    return _compiled(pattern).fullmatch(name) is not None


def fingerprint(blob: bytes) -> str:
    """``SHA256:...`` as ``ssh-keygen -l`` prints it."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def _hashed_match(pattern: str, name: str) -> bool:
    hashed = _hashed_name(pattern)
    return hashed is not None and hashed.names(name.encode())


@functools.lru_cache(maxsize=1 << 16)
def _hashed_name(pattern: str) -> HashedName | None:
    """The ``|1|salt|hmac`` name of a line, decoded and its key pads hashed once per line, not
    once per host; None for a pattern that is not one."""
    if not pattern.startswith("|1|"):
        return None
    try:
        _, _, salt, digest = pattern.split("|")
        return HashedName(base64.b64decode(salt), base64.b64decode(digest))
    except (ValueError, binascii.Error):
        return None


def _blob_type(blob: bytes) -> str | None:
    """The key type a wire-format key blob starts with (``string key-type``), or None."""
    if len(blob) < 4:
        return None
    (size,) = struct.unpack(">I", blob[:4])
    if size > 64 or len(blob) < 4 + size:
        return None
    try:
        return blob[4:4 + size].decode("ascii")
    except UnicodeDecodeError:
        return None


def parse_line(line: str, where: str) -> tuple[Entry | None, str | None]:
    """(the entry, None) for a usable line, (None, why it is skipped) for a broken one, and
    (None, None) for a blank line or a comment."""
    fields = line.split()
    if not fields or fields[0].startswith("#"):
        return None, None
    marker = ""
    if fields[0].startswith("@"):
        marker = fields.pop(0)
        if marker not in MARKERS:
            return None, f"unknown marker {marker!r} (known: {', '.join(MARKERS)})"
    if len(fields) < 3:
        return None, "not 'hostnames keytype key': too few fields"
    names, key_type, data = fields[0], fields[1], fields[2]
    try:
        blob = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None, f"the {key_type} key is not valid base64"
    if _blob_type(blob) != key_type:
        return None, f"the key data does not hold a {key_type} key"
    return Entry(marker, tuple(p for p in names.split(",") if p), key_type, blob, where), None


def read_file(path: Path) -> tuple[list[Entry], list[str]]:
    """The usable entries of one known_hosts file and a warning per skipped line.

    Raises OSError / UnicodeDecodeError when the file cannot be read at all."""
    entries: list[Entry] = []
    warnings: list[str] = []
    text = path.read_bytes().decode("utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path}:{number}"
        entry, problem = parse_line(line, where)
        if problem is not None:
            warnings.append(f"known_hosts {where}: line skipped: {problem}")
        elif entry is not None and entry.marker == "@cert-authority":
            warnings.append(f"known_hosts {where}: @cert-authority line not used (diag does not "
                            "verify host certificates; give the hosts' own keys)")
        elif entry is not None:
            entries.append(entry)
    return entries, warnings
