"""The TUI as an operator runs it: `diag --inventory FILE` in a real terminal (tmux, 80x24) over
an 8-host loopback sshd fleet, driven by keystrokes, read from the screen.

Two hosts' GPUs fell off the bus (XID 79). The operator types the symptom, Enter walks the top
match (hang) to the drain confirmation, `y` confirms. The hosts have no Slurm client, so the
drain fails on each: the walk shows each host's result and the conclusion says the drain was
NOT done — before issue 16 the TUI only recorded "yes" and concluded "Keep the host drained".

Skipped where sshd or tmux cannot run, unless DIAG_REQUIRE_SSHD is set (then a skip fails).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.tui import tui_sshfleet

pytestmark = pytest.mark.ssh

HOSTS = [f"node{i:03d}" for i in range(1, 9)]
XID_HOSTS = ["node003", "node006"]
SYMPTOM = "8-node training job hangs, NCCL watchdog timeout, no progress"


@pytest.fixture(scope="module")
def fleet() -> Iterator[tui_sshfleet.sshfleet.SSHFleet]:
    reason = tui_sshfleet.unavailable_reason() or (
        None if shutil.which("tmux") else "tmux is not installed")
    if reason:
        tui_sshfleet.sshfleet.skip_or_fail(reason)
    xid = tui_sshfleet.XID_OUTPUT.read_text()
    with tui_sshfleet.replay_fleet(HOSTS, {h: {"gpu": xid} for h in XID_HOSTS},
                                   log_level="INFO") as started:
        yield started


class Terminal:
    """One tmux server of our own (its own socket), one 80x24 window running a command."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.socket = f"diag-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self.tmux("new-session", "-d", "-x", "80", "-y", "24", "-s", "diag",
                  f"env {exports} {shlex.join(command)}; sleep 60")

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True,
                              capture_output=True, text=True, timeout=20).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "diag")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", "diag", *(["-l"] if literal else []), *keys)

    def wait(self, ready: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = self.screen()
            if ready(shown):
                return shown
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}; the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=20)


def top_match(screen: str) -> str:
    """The first result under "Matches" (empty until the ranking is shown)."""
    lines = screen.splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip().startswith("Matches")]
    return lines[heads[0] + 1].strip() if heads and heads[0] + 1 < len(lines) else ""


def test_a_confirmed_drain_over_ssh_fails_on_each_host_and_is_not_done(
        fleet: tui_sshfleet.sshfleet.SSHFleet, tmp_path: Path) -> None:
    diag = str(Path(sys.executable).with_name("diag"))
    env = {"DIAG_DB": str(tmp_path / "diag.duckdb"), "TERM": "xterm-256color",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    term = Terminal([diag, "--inventory", str(fleet.inventory)], env)
    try:
        term.wait(lambda s: "over ssh" in s and "queue-idle" in s, "the home screen")
        term.keys(SYMPTOM, literal=True)
        term.wait(lambda s: top_match(s).endswith(" hang"), "hang, ranked first")
        term.keys("Enter")
        shown = term.wait(lambda s: "scontrol update" in s, "the drain confirmation")
        assert "node[003,006] (2)" in shown or all(h in shown for h in XID_HOSTS), shown
        term.keys("y")
        shown = term.wait(lambda s: "concluded" in s, "the conclusion")
        # the conclusion: the accused hosts in its headline, the drain NOT done and why
        assert "node[003,006] (2)" in shown, shown
        assert "NOT done: drain-gpu-node on node[003,006] (2) (the command failed)" in shown, shown
        for host in XID_HOSTS:  # each host's result, in the shell's own words
            line = next((line for line in shown.splitlines() if f"{host} failed" in line), "")
            assert "exit 127:" in line and "scontrol" in line and "not found" in line, shown
        # the walk tab keeps each host's result too
        term.keys("w")
        shown = term.wait(lambda s: "Action failed" in s, "the action's result on the walk")
        for host in XID_HOSTS:  # (the step panel is narrower: the shell's words wrap)
            assert f"{host} failed: exit 127" in shown, shown
        flat = " ".join(line.strip("▕ ") for line in shown.splitlines())
        assert flat.count("scontrol: not found") == len(XID_HOSTS), shown
        assert "Keep the host drained" not in shown
    finally:
        term.close()
