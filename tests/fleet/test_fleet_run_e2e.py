"""`diag run hang --auto --json` end to end over a 32-host loopback sshd fleet.

The healthy hosts answer each probe script with a recorded output (sshd ForceCommand replays
the file for the probe the script names on its first line), so the walk sees a real incident
through real SSH: connections, fan-out, timeouts and the faulty hosts are all genuine.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.locations import fixtures_dir
from tests.fleet import sshfleet, wedged

pytestmark = pytest.mark.ssh

SCENARIO = fixtures_dir() / "scenarios" / "hang-xid79-fallen-off-bus"
HEALTHY = [f"node{i:03d}" for i in range(1, 28)]
XID_HOST = "node003"
SLOW, GARBAGE = "slow01", "garbage01"
FAULTY = {"dead01": "refused", "mute01": "no-banner", "stall01": "stall-after-banner"}

REPLAY = r"""#!/bin/sh
# Answer a diag probe script with the recorded output for this host (or the healthy baseline).
probe=$(printf '%s\n' "$SSH_ORIGINAL_COMMAND" | sed -n 's/^# diag probe: \([a-z-]*\).*/\1/p')
# diag's own commands that are not probes (ps and kill after a time-out) run as on any host
[ -n "$probe" ] || exec sh -c "$SSH_ORIGINAL_COMMAND"
root=$(dirname "$0")
case "$(cat "$root/hosts/$DIAG_FLEET_HOST/mode" 2>/dev/null)" in
  # wedged in the kernel (ps: D), its process group announced as diag's wrapper would
  # (assistant/fleet/remoteproc.py), so diag's ps after its time-out finds it
  slow) echo "=== diag:pgid $(ps -o pgid= -p $$ | tr -d " ")" >&2
        exec python3 "$root/wedged.py" nvidia-smi ;;
  garbage) head -c 3000 /dev/urandom; exit 0 ;;
esac
for f in "$root/hosts/$DIAG_FLEET_HOST/$probe.txt" "$root/baseline/$probe.txt"; do
  [ -f "$f" ] && exec cat "$f"
done
echo "no recording for probe '$probe'" >&2
exit 127
"""


@pytest.fixture(scope="module")
def incident_fleet() -> Iterator[sshfleet.SSHFleet]:
    reason = sshfleet.unavailable_reason()
    if reason:
        sshfleet.skip_or_fail(reason)
    replay = Path(tempfile.mkdtemp(prefix="diag-replay-"))
    replay.chmod(0o755)  # read by the fleet's test user
    shutil.copytree(fixtures_dir() / "scenarios" / "_baseline", replay / "baseline")
    for name, mode in ((SLOW, "slow"), (GARBAGE, "garbage")):
        (replay / "hosts" / name).mkdir(parents=True)
        (replay / "hosts" / name / "mode").write_text(mode)
    (replay / "hosts" / XID_HOST).mkdir(parents=True)
    shutil.copy(SCENARIO / "outputs" / "gpu-gpu003-xid79.txt", replay / "hosts" / XID_HOST /
                "gpu.txt")
    script = replay / "replay.sh"
    script.write_text(REPLAY)
    script.chmod(0o755)
    shutil.copy(wedged.__file__, replay / "wedged.py")
    for path in replay.rglob("*"):
        path.chmod(0o755 if path.is_dir() or path.suffix == ".sh" else 0o644)
    hosts = [*HEALTHY, SLOW, GARBAGE]
    try:
        with sshfleet.SSHFleet(hosts, faulty=FAULTY,
                               force_command={h: str(script) for h in hosts}) as fleet:
            yield fleet
    finally:
        shutil.rmtree(replay, ignore_errors=True)


def run(fleet: sshfleet.SSHFleet, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[
        int, dict, float]:
    started = time.monotonic()
    code = main(["run", "hang", "--inventory", str(fleet.inventory), "--auto", "--json",
                 "--timeout", "4", "--deadline", "12", "--connect-timeout", "5", *extra])
    elapsed = time.monotonic() - started
    return code, json.loads(capsys.readouterr().out), elapsed


def test_32_hosts_with_faults_every_host_accounted_for(
        incident_fleet: sshfleet.SSHFleet, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, elapsed = run(incident_fleet, capsys=capsys)
    assert len(incident_fleet.names) == 32
    states = {h: s["state"] for h, s in doc["hosts"].items()}
    assert set(states) == set(incident_fleet.names)  # every host, exactly once
    assert states["dead01"] == "unreachable"
    assert states["mute01"] == "timeout" and states["stall01"] == "timeout"
    assert states[SLOW] == "timeout"
    assert states[GARBAGE] == "parse-error"
    assert {h for h, s in states.items() if s == "ok"} == set(HEALTHY)
    # Hosts that do not let diag in while the job hangs: the walk concludes they are the cause.
    assert doc["status"] == "concluded"
    assert doc["conclusion"]["id"] == "host-dead"
    named = {h for f in doc["conclusion"]["evidence"] for h in f["hosts"]}
    assert named == {"dead01", "mute01", "stall01"}
    # The slow host let diag in and then its probe hung: that says something about the host,
    # not that it is unreachable, so it is not among the dead ones.
    assert doc["hosts"][SLOW]["reason"].startswith("logged in, then the ranks probe hung")
    # The sweep did not measure it either (its deadline ran out there): "not measured" is what
    # that is, not an accusation.
    codes = {f["code"] for f in doc["findings"] if SLOW in f["hosts"]}
    assert codes - {"not-measured"} == {"probe-hung"}
    assert code == 3
    # The evidence sweep and one probe step ran before the conclusion, each within the
    # operator's deadline (the sweep's own default limit does not stretch it).
    # Each step is bounded by the deadline (12 s) plus what a loaded machine adds to wind it
    # up; the sweep's own default limit (25 s) would show here, whatever else the walk took.
    timed = {s["node"]: s["seconds"] for s in doc["steps"] if s["kind"] in ("sweep", "probe")}
    assert len(timed) >= 2 and all(t < 12 + 6 for t in timed.values()), timed
    assert elapsed < 2 * 12 + 30  # the whole walk, with room for a loaded CI machine


def test_the_fault_in_the_data_is_found_over_ssh(
        incident_fleet: sshfleet.SSHFleet, capsys: pytest.CaptureFixture[str]) -> None:
    # The reachable hosts only (garbage included): the XID 79 on node003 decides the walk.
    code, doc, _ = run(incident_fleet, "--hosts", "node[001-027],garbage01", capsys=capsys)
    assert doc["hosts"][GARBAGE]["state"] == "parse-error"
    assert doc["conclusion"]["id"] == "gpu-hardware-fault"
    assert {h for f in doc["conclusion"]["evidence"] for h in f["hosts"]} == {XID_HOST}
    assert code == 1
