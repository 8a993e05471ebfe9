"""Each planted fault, walked as a new user would: `diag run RUNBOOK --inventory ... --auto` over a
fleet of real loopback sshd (no replay transport), asserting the diagnosis in the conclusion's
title and that the walk names exactly the planted hosts and drains only the ones it should.

The fleet is 16 real sshd hosts named gpu001..gpu016 (tests/fleet/sshfleet.py). Their
ForceCommand answers each of diag's probe scripts (named on its first line) with what the
scenario says that host prints (fixtures/scenarios/NAME: its own output, the scenario default,
or the healthy baseline). What a scenario says about hosts that fail is made real:

- a host that hangs after login (``phase: command``) prints its partial output and then
  sleeps, so the SSH transport's own timeout cuts it and its partial output names the section;
- a name that does not resolve gets an address under ``.invalid`` in the inventory, which no
  resolver answers (RFC 6761), so the DNS failure is the client's real one;
- any other failure to let diag in points the host at a closed loopback port (refused).

To add a scenario, add its name to SCENARIOS: it needs ``expect.conclusion`` and
``expect.hosts`` (``[]`` for a healthy twin), and ``expect.drained`` when the walk must act on
no host or on exactly some.
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.fleet.scenario import Scenario, load_scenario, scenarios_dir
from assistant.runbook.library import get_runbook
from probes.base import REGISTRY
from tests.fleet import sshfleet

pytestmark = pytest.mark.ssh

# Faults planted on a node (and their healthy twins). Names of fixtures/scenarios/ directories.
SCENARIOS = [
    "hang-diag-cannot-resolve",
    "hang-diag-refused-everywhere",
    "hang-healthy-nccl-connect-retries",
    "hang-node-unreachable",  # one host of many: still that host, not diag's access
    "hang-gpu-driver-hung",
    "hang-healthy-old-gsp-timeout",
    "checkpoint-stall-mount-hung",
    "checkpoint-stall-filesystem-hung",
    "checkpoint-stall-ckpt-in-container",
    "checkpoint-stall-healthy-ckpt-symlink",
    "hang-nccl-version-drift-env",
    "hang-healthy-nccl-cuda-build-differs",
    "low-bandwidth-ib-disabled-one-host",
    "low-bandwidth-healthy-ib-disable-zero",
    "hang-subnet-manager-down",
    "hang-healthy-unused-eth-ports",
    "hang-ib-port-down",
    "launch-failure-peer-path-blocked",
    "launch-failure-healthy-lossy-pair",
]
# queue-idle reads Slurm from the machine diag runs on (the scheduler probe runs on the client),
# not over SSH: its drained-for-hardware walks run against a real Slurm in
# tests/slurm/test_slurm_queue_idle.py.
FLEET = [f"gpu{i:03d}" for i in range(1, 17)]
TIMEOUT_S = 4  # per probe: a planted hang is cut by the transport after this

REPLAY = r"""#!/bin/sh
# Answer a diag probe script with what the current scenario says this host prints.
probe=$(printf '%s\n' "$SSH_ORIGINAL_COMMAND" | sed -n 's/^# diag probe: \([a-z-]*\).*/\1/p')
dir="$(dirname "$0")/current/$DIAG_FLEET_HOST"
if [ -f "$dir/$probe.hang" ]; then
  cat "$dir/$probe.txt" 2>/dev/null
  exec sleep 30
fi
[ -f "$dir/$probe.txt" ] && exec cat "$dir/$probe.txt"
echo "no recording for probe '$probe'" >&2
exit 127
"""


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[sshfleet.SSHFleet, Path]]:
    reason = sshfleet.unavailable_reason()
    if reason:
        sshfleet.skip_or_fail(reason)
    replay = Path(tempfile.mkdtemp(prefix="diag-scenario-ssh-"))
    replay.chmod(0o755)  # read by the fleet's test user
    script = replay / "replay.sh"
    script.write_text(REPLAY)
    script.chmod(0o755)
    try:
        with sshfleet.SSHFleet(FLEET, force_command={h: str(script) for h in FLEET}) as f:
            yield f, replay
    finally:
        shutil.rmtree(replay, ignore_errors=True)


def closed_port(address: str) -> int:
    """A port on *address* nobody listens on (bound, then released): connecting is refused."""
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def stage(scenario: Scenario, fleet: sshfleet.SSHFleet, replay: Path, tmp: Path) -> Path:
    """Write what each host prints for this scenario, point the replay at it, and return an
    inventory of the scenario's hosts (with its attributes and its planted access faults)."""
    current = replay / scenario.name  # under the replay dir: the fleet's user must read it
    for host in scenario.hosts:
        state = scenario.states.get(host)
        (current / host).mkdir(parents=True)
        for probe in REGISTRY:
            text = scenario.output(host, probe)
            if text is not None:
                (current / host / f"{probe}.txt").write_text(text)
            if state is not None and state.phase == "command" and state.applies_to(probe):
                (current / host / f"{probe}.hang").write_text("")
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


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_walk_names_the_planted_hosts_and_only_them(
        name: str, fleet: tuple[sshfleet.SSHFleet, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    ssh_fleet, replay = fleet
    scenario = load_scenario(name)
    assert (scenarios_dir() / name).is_dir()
    inventory = stage(scenario, ssh_fleet, replay, tmp_path)
    params = [f"--param={probe}.{key}={json.dumps(value)}"
              for probe, values in scenario.params.items() for key, value in values.items()]
    answers = [f"--answer={node}={choice}" for node, choice in scenario.answers.items()]
    code = main(["run", scenario.runbook, "--inventory", str(inventory), "--auto", "--json",
                 "--timeout", str(TIMEOUT_S), "--deadline", "30", "--connect-timeout", "3",
                 *params, *answers])
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "concluded", doc.get("question")
    expected = get_runbook(scenario.runbook).node(scenario.expect["conclusion"])
    assert (doc["conclusion"]["id"], doc["conclusion"]["title"]) == (expected.id,
                                                                    expected.title), doc["path"]
    named = {h for f in doc["conclusion"]["evidence"] for h in f["hosts"]}
    acted = {h for step in doc["steps"] for h in (step.get("action") or {}).get("hosts", [])}
    assert named == set(scenario.expect["hosts"]), doc["conclusion"]["evidence"]
    if "drained" in scenario.expect or not scenario.expect["hosts"]:
        assert acted == set(scenario.expect.get("drained", [])), doc["steps"]
    assert set(doc["hosts"]) == set(scenario.hosts)
    assert code == 0 if not scenario.expect["hosts"] else code in (1, 3)
