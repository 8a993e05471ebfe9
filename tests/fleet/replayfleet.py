"""One loopback sshd fleet that replays scenarios, shared by the whole session.

The walks over real sshd (tests/fleet/test_scenarios_over_ssh.py, issue 11's planted faults in
tests/fleet/test_planted_faults_e2e.py) each started a fleet of their own, 16 and 12 hosts, per
pytest-xdist worker, and waited for its sessions at teardown. Both need the same thing: hosts
gpu001..gpu064 whose sshd ForceCommand answers each of diag's probe scripts (named on its first
line) with what the staged scenario says that host prints. :func:`stage` stages one scenario
and returns its inventory; the session fixture ``replay_fleet`` (tests/fleet/conftest.py) starts
the fleet once.

What a scenario says about hosts that fail is made real:

- a host that hangs after login (``phase: command``) prints its partial output and then
  blocks in the kernel under the name the scenario's ps rows give (tests/fleet/wedged.py), so
  the SSH transport's own timeout cuts it, its partial output names the section and ps shows
  it wedged (a sleeping stand-in is only slow: diag's side under a shortened --timeout);
- a name that does not resolve gets an address under ``.invalid`` in the inventory, which no
  resolver answers (RFC 6761), so the DNS failure is the client's real one;
- any other failure to let diag in points the host at a closed loopback port (refused).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.fleet.scenario import HostState, Scenario
from probes.base import REGISTRY
from tests.fleet import sshfleet, wedged

# 64: the catalogued fault examples are walked in fleets this big (each example's fault and
# twin on hosts of their own, the rest of the fleet the baseline); scenarios use the first few.
HOSTS = [f"gpu{i:03d}" for i in range(1, 65)]

# The time a loopback login gets: the suite's three workers share this machine's two cores
# with every fleet's sshd, and a 5 s connect limit has read a healthy loopback host as
# unreachable under that load (CI, stop 35). What these walks test is the verdict on the
# answers, not how fast a saturated machine completes a handshake.
CONNECT = ["--connect-timeout", "20"]

REPLAY = r"""#!/bin/sh
# Answer a diag probe script with what the current scenario says this host prints.
probe=$(printf '%s\n' "$SSH_ORIGINAL_COMMAND" | sed -n 's/^# diag probe: \([a-z-]*\).*/\1/p')
# diag's own commands that are not probes (ps and kill after a time-out) run as on any host
[ -n "$probe" ] || exec sh -c "$SSH_ORIGINAL_COMMAND"
dir="$(dirname "$0")/current/$DIAG_FLEET_HOST"
if [ -f "$dir/$probe.hang" ]; then
  # announce the process group as diag's wrapper would (assistant/fleet/remoteproc.py: the
  # group sshd started this session in), so diag's ps after its time-out finds the stand-in
  echo "=== diag:pgid $(ps -o pgid= -p $$ | tr -d " ")" >&2
  cat "$dir/$probe.txt" 2>/dev/null
  exec python3 "$(dirname "$0")/wedged.py" "$(cat "$dir/$probe.hang")"
fi
[ -f "$dir/$probe.txt" ] && exec cat "$dir/$probe.txt"
echo "no recording for probe '$probe'" >&2
exit 127
"""


@contextlib.contextmanager
def replay_fleet() -> Iterator[tuple[sshfleet.SSHFleet, Path]]:
    """The fleet and its replay directory (where :func:`stage` writes each scenario)."""
    reason = sshfleet.unavailable_reason()
    if reason:
        sshfleet.skip_or_fail(reason)
    replay = Path(tempfile.mkdtemp(prefix="diag-replay-fleet-"))
    replay.chmod(0o755)  # read by the fleet's test user
    script = replay / "replay.sh"
    script.write_text(REPLAY)
    script.chmod(0o755)
    shutil.copy(wedged.__file__, replay / "wedged.py")
    (replay / "wedged.py").chmod(0o644)
    try:
        with sshfleet.SSHFleet(HOSTS, force_command={h: str(script) for h in HOSTS}) as fleet:
            yield fleet, replay
    finally:
        shutil.rmtree(replay, ignore_errors=True)


def closed_port(address: str) -> int:
    """A port on *address* nobody listens on (bound, then released): connecting is refused."""
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def wedged_as(state: HostState, probe: str) -> str:
    """The name the planted hang shows in ps: the scenario's blocked process for *probe*
    (its D row's command), else the probe's own name."""
    for row in state.processes.get(probe, ()):
        fields = row.split()
        if len(fields) >= 5 and fields[1].startswith("D"):
            return fields[4]
    return probe


def stage(scenario: Scenario, fleet: sshfleet.SSHFleet, replay: Path, tmp: Path) -> Path:
    """Write what each host prints for this scenario, point the replay at it, and return an
    inventory of the scenario's hosts (with its attributes and its planted access faults)."""
    current = replay / f"{scenario.name}-{tmp.name}"  # the fleet's user must read it
    for host in scenario.hosts:
        state = scenario.states.get(host)
        (current / host).mkdir(parents=True)
        for probe in [*REGISTRY, "sweep"]:  # the sweep: its components' outputs in one
            text = scenario.output(host, probe)
            if text is not None:
                (current / host / f"{probe}.txt").write_text(text)
            if state is not None and state.phase == "command" and state.applies_to(probe):
                (current / host / f"{probe}.hang").write_text(wedged_as(state, probe))
                partial = scenario.outputs.get(probe, {}).get(host, "")
                (current / host / f"{probe}.txt").write_text(partial)
    for path in [current, *current.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    link = replay / "current"
    link.unlink(missing_ok=True)
    link.symlink_to(current)
    lines = ["defaults:", f"  user: {fleet.user}", f"  identity_file: {fleet.client_key}",
             f"  known_hosts: {fleet.known_hosts}", "hosts:"]
    for host in scenario.hosts:
        member = fleet.members[host]
        address, port = member.address, member.port
        state = scenario.states.get(host)
        if state is not None and state.phase != "command":
            if "dns" in state.reason.lower() or "resol" in state.reason.lower():
                address = f"{host}.invalid"
            elif state.state == "unreachable":
                port = closed_port(address)
            else:
                pytest.fail(f"{scenario.name}: no way to plant state {state} over sshd")
        attrs = "".join(f", {k}: {json.dumps(v)}" for k, v in scenario.attrs[host].items())
        lines.append(f"  {host}: {{address: {address}, port: {port}{attrs}}}")
    inventory = tmp / "inventory.yaml"
    inventory.write_text("\n".join(lines) + "\n")
    return inventory
