"""Host keys over real sshd, as OpenSSH's known_hosts means them (see assistant.fleet.hostkeys).

Each attack here was reproduced on the code before: a known key of another type was treated as
"unknown" (and replaced with --accept-new-host-keys); one ``@cert-authority``, ``@revoked`` or
malformed line made every host fail with a base64 error; accepted keys were recorded silently.
"""

from __future__ import annotations

import contextlib
import io
import stat
import subprocess
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.fleet.fanout import fan_out
from assistant.store import Store
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import HEALTHY

pytestmark = pytest.mark.ssh

H1, H2, H3 = HEALTHY[6:9]


def _keygen(path: Path, kind: str) -> str:
    """A fresh public key line body ("type base64") of *kind*."""
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True,
                   capture_output=True)
    fields = path.with_suffix(".pub").read_text().split()
    return f"{fields[0]} {fields[1]}"


def _fingerprint(key_line: str, tmp_path: Path) -> str:
    pub = tmp_path / "key.pub"
    pub.write_text(key_line + "\n")
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(pub)], capture_output=True, text=True,
                         check=True).stdout
    return out.split()[1]


def test_a_known_key_of_another_type_makes_the_offered_one_changed(
        fleet: sshfleet.SSHFleet, tmp_path: Path) -> None:
    """known ecdsa, offered ed25519 (the server has no ecdsa key): CHANGED, refused even with
    --accept-new-host-keys, and the file is left as it was."""
    ecdsa = _keygen(tmp_path / "ecdsa", "ecdsa")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"{fleet.members[H1].hostkey_name} {ecdsa}\n")
    before = known_hosts.read_text()
    for accept_new in (False, True):
        with fleet.transport([H1], known_hosts=known_hosts,
                             accept_new_host_keys=accept_new) as transport:
            result = transport.run(H1, "true", timeout=5)
        assert result.state == "host-key-refused", result
        assert "CHANGED" in result.reason and "ecdsa-sha2-nistp256" in result.reason
        assert "another type" in result.reason
    assert known_hosts.read_text() == before


def test_markers_and_a_malformed_line_are_skipped_with_a_warning(
        fleet: sshfleet.SSHFleet, tmp_path: Path) -> None:
    ca = _keygen(tmp_path / "ca", "ed25519")
    stranger = _keygen(tmp_path / "stranger", "ed25519")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("\n".join([
        "# site CA and a revoked key, as an admin writes them",
        f"@cert-authority *.cluster.example {ca}",
        f"@revoked * {stranger}",
        "gpu-old ssh-ed25519 AAAA!!not-base64!!",
        f"{fleet.members[H1].hostkey_name} {fleet.members[H1].host_key}",
        f"{fleet.members[H2].hostkey_name} {fleet.members[H2].host_key}",
    ]) + "\n")
    with fleet.transport([H1, H2], known_hosts=known_hosts) as transport:
        results = fan_out(transport, [H1, H2], "uname -n", timeout=5)
    assert {r.state for r in results.values()} == {"ok"}, results
    warnings = transport.host_keys.warnings
    assert len(warnings) == 2, warnings
    assert f"{known_hosts}:2: @cert-authority line not used" in warnings[0]
    assert f"{known_hosts}:4: line skipped: the ssh-ed25519 key is not valid base64" \
        in warnings[1]


def test_a_revoked_key_is_refused_even_where_it_is_known(fleet: sshfleet.SSHFleet,
                                                         tmp_path: Path) -> None:
    member = fleet.members[H1]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"@revoked * {member.host_key}\n"
                           f"{member.hostkey_name} {member.host_key}\n")
    for accept_new in (False, True):
        with fleet.transport([H1], known_hosts=known_hosts,
                             accept_new_host_keys=accept_new) as transport:
            result = transport.run(H1, "true", timeout=5)
        assert result.state == "host-key-refused" and "REVOKED" in result.reason, result
        assert f"{known_hosts}:1" in result.reason


def test_patterns_and_negation_as_openssh_reads_them(fleet: sshfleet.SSHFleet,
                                                     tmp_path: Path) -> None:
    """``[127.0.0.*]:PORT`` matches by wildcard; ``!`` takes a host out of a line."""
    member = fleet.members[H1]
    wildcard = member.hostkey_name.replace(member.address, member.address.rsplit(".", 1)[0]
                                           + ".*")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"{wildcard} {member.host_key}\n")
    with fleet.transport([H1], known_hosts=known_hosts) as transport:
        assert transport.run(H1, "true", timeout=5).state == "ok"
    known_hosts.write_text(f"{wildcard},!{member.hostkey_name} {member.host_key}\n")
    with fleet.transport([H1], known_hosts=known_hosts) as transport:
        result = transport.run(H1, "true", timeout=5)
    assert result.state == "host-key-refused" and "unknown host key" in result.reason


def test_accepted_keys_are_printed_recorded_in_the_store_and_the_file_is_private(
        fleet: sshfleet.SSHFleet, tmp_path: Path) -> None:
    known_hosts = tmp_path / "ssh" / "known_hosts"  # neither the file nor its directory exists
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(fleet.inventory.read_text().replace(str(fleet.known_hosts),
                                                             str(known_hosts)))
    db = tmp_path / "diag.duckdb"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        main(["run", "hang", "--inventory", str(inventory), "--hosts", f"{H1},{H2}",
              "--accept-new-host-keys", "--auto", "--db", str(db), "--deadline", "20"])
    printed = err.getvalue()
    assert stat.S_IMODE(known_hosts.stat().st_mode) == 0o600
    assert stat.S_IMODE(known_hosts.parent.stat().st_mode) == 0o700
    recorded = Store(db).read(lambda con: con.execute(
        "SELECT host, name, key_type, fingerprint, known_hosts FROM host_keys "
        "ORDER BY host").fetchall())
    assert [r[0] for r in recorded] == [H1, H2]
    for host, name, key_type, fingerprint, path in recorded:
        member = fleet.members[host]
        expected = _fingerprint(member.host_key, tmp_path)
        assert (name, key_type, fingerprint, path) == (
            member.hostkey_name, "ssh-ed25519", expected, str(known_hosts))
        assert f"recorded the new host key of {host} ({name}): ssh-ed25519 {expected}" in printed
    assert printed.count("recorded the new host key") == 2  # once each, not once per probe
