"""Issue 11, tried as a new user would: a fleet over real sshd, one node planted with a fault.

Each scenario of issue 11's verdict items (XIDs by the catalog, power and heat, NCCL's
environment, link flap history, RDMA retransmits, PCIe, IB error counters and busbw levels) is
replayed over a loopback sshd fleet: every host answers each probe script with the scenario's
recorded output for it (sshd ForceCommand, as in test_fleet_run_e2e), and ``diag run RUNBOOK
--inventory --auto --json`` walks it through real SSH. For a fault, the walk must reach the
scenario's conclusion and its evidence must name the planted node and only that node; for a
healthy twin (alarming but normal), it must end without naming any host.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.fleet.scenario import Scenario, load_scenario
from assistant.locations import fixtures_dir
from probes.catalog import load_catalog
from tests.fleet import sshfleet

pytestmark = pytest.mark.ssh

FAULTS = ["hang-xid109-ctx-switch-timeout", "low-utilization-power-limit-lowered",
          "low-utilization-thermal-throttle", "hang-nccl-hca-exclude-reversed",
          "hang-ib-link-flapped-recovered", "low-bandwidth-rdma-retransmits",
          "low-bandwidth-nic-pcie-x8", "low-bandwidth-ib-receive-errors"]
TWINS = ["hang-xid-stale-from-last-week", "low-utilization-power-cap-normal",
         "low-utilization-hot-gpu-full-clocks", "hang-nccl-env-exact-twin",
         "hang-link-events-from-boot", "low-bandwidth-heavy-traffic-clean",
         "low-bandwidth-idle-gpus-gen1", "low-bandwidth-xmit-discards-under-load",
         "low-bandwidth-a3mega-tcpxo-normal"]
HOSTS = [f"gpu{i:03d}" for i in range(1, 13)]
BASELINE = fixtures_dir() / "scenarios" / "_baseline"

REPLAY = r"""#!/bin/sh
# Answer a diag probe script with this host's recorded output for the probe it names.
probe=$(printf '%s\n' "$SSH_ORIGINAL_COMMAND" | sed -n 's/^# diag probe: \([a-z-]*\).*/\1/p')
f="$(dirname "$0")/hosts/$DIAG_FLEET_HOST/$probe.txt"
[ -f "$f" ] && exec cat "$f"
echo "no recording for probe '$probe'" >&2
exit 127
"""


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[sshfleet.SSHFleet, Path]]:
    reason = sshfleet.unavailable_reason()
    if reason:
        sshfleet.skip_or_fail(reason)
    replay = Path(tempfile.mkdtemp(prefix="diag-planted-"))
    replay.chmod(0o755)  # read by the fleet's test user
    script = replay / "replay.sh"
    script.write_text(REPLAY)
    script.chmod(0o755)
    try:
        with sshfleet.SSHFleet(HOSTS, force_command={h: str(script) for h in HOSTS}) as ssh:
            yield ssh, replay
    finally:
        shutil.rmtree(replay, ignore_errors=True)


def plant(replay: Path, scenario: Scenario) -> None:
    """Every host's recording for every probe: the scenario's own, else the baseline."""
    shutil.rmtree(replay / "hosts", ignore_errors=True)
    probes = {p.stem for p in BASELINE.glob("*.txt")} | set(scenario.outputs)
    for host in scenario.hosts:
        folder = replay / "hosts" / host
        folder.mkdir(parents=True)
        folder.chmod(0o755)
        for probe in probes:
            text = scenario.output(host, probe)
            if text is not None:
                (folder / f"{probe}.txt").write_text(text)
                (folder / f"{probe}.txt").chmod(0o644)


def inventory(ssh: sshfleet.SSHFleet, scenario: Scenario, path: Path) -> Path:
    """The fleet's connection details for the scenario's hosts, with its attributes."""
    lines = ["defaults:", f"  user: {ssh.user}", f"  identity_file: {ssh.client_key}",
             f"  known_hosts: {ssh.known_hosts}", "hosts:"]
    for host in scenario.hosts:
        member = ssh.members[host]
        attrs = "".join(f", {k}: {v}" for k, v in scenario.attrs.get(host, {}).items())
        lines.append(f"  {host}: {{address: {member.address}, port: {member.port}{attrs}}}")
    path.write_text("\n".join(lines) + "\n")
    return path


def walk(fleet: tuple[sshfleet.SSHFleet, Path], name: str, tmp_path: Path,
         capsys: pytest.CaptureFixture[str]) -> tuple[Scenario, int, dict]:
    ssh, replay = fleet
    scenario = load_scenario(name)
    plant(replay, scenario)
    argv = ["run", scenario.runbook, "--inventory", str(inventory(ssh, scenario, tmp_path /
            "inventory.yaml")), "--auto", "--json", "--timeout", "20", "--connect-timeout", "5"]
    for node, choice in scenario.answers.items():
        argv += ["--answer", f"{node}={choice}"]
    for probe, params in scenario.params.items():
        for key, value in params.items():
            argv += ["--param", f"{probe}.{key}={value}"]
    code = main(argv)
    return scenario, code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", FAULTS)
def test_the_planted_node_and_only_it_is_named(
        fleet: tuple[sshfleet.SSHFleet, Path], name: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    scenario, code, doc = walk(fleet, name, tmp_path, capsys)
    assert {h: s["state"] for h, s in doc["hosts"].items()} == dict.fromkeys(
        scenario.hosts, "ok")  # every host answered over SSH
    assert doc["status"] == "concluded", doc.get("question")
    assert doc["conclusion"]["id"] == scenario.expect["conclusion"], doc["path"]
    named = {h for f in doc["conclusion"]["evidence"] for h in f["hosts"]}
    assert named == set(scenario.expect["only_hosts"]), doc["conclusion"]["evidence"]
    assert code in (1, 3)


@pytest.mark.parametrize("name", TWINS)
def test_the_healthy_twin_names_no_node(
        fleet: tuple[sshfleet.SSHFleet, Path], name: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    scenario, code, doc = walk(fleet, name, tmp_path, capsys)
    assert doc["status"] == "concluded", doc.get("question")
    assert doc["conclusion"]["id"] == scenario.expect["conclusion"], doc["path"]
    blind = set(load_catalog().category("not-evidence"))
    accusing = [f for f in doc["findings"] if f["code"] not in blind and f["hosts"]
                and f["severity"] in ("warning", "error", "critical")]
    assert accusing == [] and code == 0
