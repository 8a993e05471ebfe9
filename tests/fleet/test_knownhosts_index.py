"""The known_hosts index finds exactly what a scan of every line finds, in the files' order."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random

from assistant.fleet import knownhosts
from assistant.fleet.knownhosts import Entry, EntryIndex


def hashed(name: str, salt: bytes) -> str:
    """A ``|1|salt|hmac`` name as ``HashKnownHosts yes`` writes it."""
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def scan(entries: list[Entry], names: list[str]) -> list[Entry]:
    """The plain reading: every line, tested pattern by pattern."""
    return [e for e in entries if any(e.matches(n) for n in names)]


def test_index_agrees_with_a_scan_of_every_line() -> None:
    rng = random.Random(7)
    hosts = [f"gpu{i:03d}" for i in range(60)]
    patterns: list[tuple[str, ...]] = []
    for i, host in enumerate(hosts):
        kind = i % 6
        if kind == 0:
            patterns.append((host, f"10.0.0.{i}"))
        elif kind == 1:
            patterns.append((f"[{host}]:2222",))
        elif kind == 2:
            patterns.append((hashed(host, rng.randbytes(20)),))
        elif kind == 3:
            patterns.append((host.upper(),))  # names compare without regard to case
        elif kind == 4:
            patterns.append((f"{host[:4]}*", f"!{host}"))  # wildcard, this host negated
        else:
            patterns.append((f"gpu0?{i % 10}", host))
    entries = [Entry("@revoked" if i % 17 == 0 else "", p, "ssh-ed25519", bytes([i]), f"f:{i}")
               for i, p in enumerate(patterns)]
    index = EntryIndex(entries)
    asked = [[h] for h in hosts] + [[f"[{h}]:2222", h] for h in hosts] + [["GPU007"], ["none"],
                                                                          ["10.0.0.6"]]
    for names in asked:
        assert index.matching(names) == scan(entries, names), names
    assert index.matching(["gpu012"])  # the hashed line is found
    assert entries[4] not in index.matching(["gpu004"])  # negated on its own line


def test_a_line_added_later_is_found_after_the_earlier_ones() -> None:
    index = EntryIndex([Entry("", ("gpu*",), "ssh-rsa", b"a", "f:1")])
    assert [e.where for e in index.matching(["gpu001"])] == ["f:1"]  # asked before the add
    index.add(Entry("", ("gpu001",), "ssh-ed25519", b"b", "f:2"))
    assert [e.where for e in index.matching(["gpu001"])] == ["f:1", "f:2"]


def test_glob_is_literal_apart_from_star_and_question_mark() -> None:
    assert knownhosts._glob("[gpu1]:2222", "[gpu1]:2222")
    assert not knownhosts._glob("gpu1.", "gpu1x")
    assert knownhosts._glob("gpu?.*", "gpu1.example.com")


def test_a_hashed_name_is_tested_as_hmac_sha1_keyed_by_its_salt() -> None:
    # the pre-hashed key pads give exactly hmac's answer, for salts of every length ssh-keygen
    # could write (20 bytes) and longer than SHA-1's block
    rng = random.Random(3)
    for size in (20, 1, 64, 100):
        salt = rng.randbytes(size)
        line = knownhosts._hashed_name(hashed("gpu042", salt))
        assert line is not None
        assert line.names(b"gpu042") and not line.names(b"gpu043")
    assert knownhosts._hashed_name("|1|not base64|x") is None
