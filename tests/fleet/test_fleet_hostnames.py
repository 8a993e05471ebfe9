"""Host names are checked before anything uses them, and ``$HOST`` is literal wherever it stands.

The attacks an SRE tries first: a host "name" carrying shell syntax reaching ssh_config's
``Match exec "... %h"`` (which runs a command on the operator's machine: the class of
CVE-2023-51385), and ``$HOST`` inside quotes in an action command (which ran the name as code on
the node). Each test fails on the code before the checks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.fleet.hostexpr import InventoryError, expand_hosts
from assistant.fleet.inventory import load_inventory, resolve
from assistant.fleet.ssh import SSHTransport
from assistant.runbook.actions import transport_runner
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import HEALTHY

ROOT = Path(__file__).resolve().parents[2]


def _cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def _diag(argv: list[str], home: Path) -> tuple[int, str]:
    """diag in its own process with HOME=*home* (``Match exec`` reads the terminal's stdin)."""
    proc = subprocess.run([sys.executable, "-m", "assistant.cli", *argv], cwd=ROOT,
                          env={**os.environ, "HOME": str(home)}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr


@pytest.fixture()
def match_exec_home(tmp_path: Path) -> Path:
    """A HOME whose ~/.ssh/config runs a command for every host it is asked about, the way a
    real config uses ``Match exec`` (e.g. "am I on the VPN?"): it leaves a file per host."""
    seen = tmp_path / "seen"
    seen.mkdir()
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(f'Match exec "touch {seen}/%h"\n  User nobody\n')
    return seen


EVIL = "gpu7;touch${IFS}{marker};true"


def test_match_exec_never_runs_a_hostile_host_name(match_exec_home: Path,
                                                  tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = EVIL.replace("{marker}", str(marker))
    code, err = _diag(["probe", "versions", "--hosts", evil, "--connect-timeout", "0.5",
                       "--deadline", "3"], tmp_path)
    assert not marker.exists(), "the host name ran as a command on this machine"
    assert code == 2 and err.count("\n") == 1, err
    assert "';' is not allowed in a host name" in err
    # the same config with an ordinary name is consulted as before (its Match exec ran)
    _diag(["probe", "versions", "--hosts", "gpu7", "--connect-timeout", "0.5", "--deadline",
           "3"], tmp_path)
    assert (match_exec_home / "gpu7").exists()


def test_every_way_a_name_arrives_is_checked(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config: paramiko only
    marker = tmp_path / "pwned"
    evil = EVIL.replace("{marker}", str(marker))
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"hosts:\n  '{evil}': {{}}\n")
    with pytest.raises(InventoryError, match=r"inv.yaml:2: bad host name or expression"):
        load_inventory(inventory)
    inventory.write_text(f"hosts:\n  gpu1: {{proxy_jump: '{evil}'}}\n")
    with pytest.raises(InventoryError, match="bad ProxyJump host"):
        resolve(["gpu1"], load_inventory(inventory))
    with pytest.raises(InventoryError, match="bad host name"):  # the last lock, at lookup
        resolve([evil], allow_unknown=True)
    assert not marker.exists()


@pytest.mark.parametrize(("expr", "says"), [
    (",,,", "names no host"),
    ("-oProxyCommand=id", "starts with '-'"),
    ("gpu[1-2],-x", "starts with '-'"),
    ("gpu\x1b[2Jx", "'\\x1b' is not allowed"),
    ("gpu$(id)", "'$' is not allowed"),
    ("a" * 300, "longer than 253 characters"),
])
def test_bad_host_expressions_are_one_clear_line(expr: str, says: str) -> None:
    with pytest.raises(InventoryError, match=None) as refused:
        expand_hosts(expr)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_hosts_that_name_no_host_exit_2() -> None:
    """``--hosts ',,,'`` ran on zero hosts and exited 0: a cron check would pass nothing."""
    code, err = _cli(["probe", "versions", "--hosts", ",,,"])
    assert code == 2 and "names no host" in err and err.count("\n") == 1, err


def test_ordinary_names_still_expand() -> None:
    assert expand_hosts("gpu[001-003],login-1 node_7 10.0.0.[1-2] ::1 fe80::1%eth0") == [
        "gpu001", "gpu002", "gpu003", "login-1", "node_7", "10.0.0.1", "10.0.0.2", "::1",
        "fe80::1%eth0"]


@pytest.mark.ssh
@pytest.mark.parametrize("template", ['echo "node $HOST" >/dev/null',
                                      "echo 'node $HOST' >/dev/null",
                                      "echo node ${HOST} >/dev/null"])
def test_host_in_an_action_is_literal_wherever_it_stands(fleet: sshfleet.SSHFleet,
                                                         tmp_path: Path, template: str) -> None:
    """Over real sshd: a name carrying ``$(...)`` (had it got past the name checks) is text
    on the node, whether ``$HOST`` stands bare or inside either kind of quotes."""
    drop = fleet.dir / f"drop-{tmp_path.name}"  # where the fleet's login user can write
    drop.mkdir()
    drop.chmod(0o777)
    evil = f"gpu$(touch {drop}/pwned)'$(touch {drop}/pwned2)'"
    spec = dataclasses.replace(fleet.spec(HEALTHY[0]), name=evil)
    transport = SSHTransport({evil: spec}, known_hosts=fleet.known_hosts, use_agent=False,
                             look_for_keys=False, connect_timeout=2.0)
    try:
        outcome = transport_runner(transport, timeout=10)(template, (evil,))
    finally:
        transport.close()
    assert outcome[evil]["state"] == "done", outcome
    assert os.listdir(drop) == [], "the host name ran as code on the node"
