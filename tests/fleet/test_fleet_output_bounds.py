"""Output held in memory is bounded for the whole fan-out, not only per host, and replayed
scenario outputs are bounded like a real host's."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.fleet import scenario as scenario_mod
from assistant.fleet.fanout import fan_out
from assistant.fleet.local import MAX_OUTPUT, LocalTransport
from assistant.fleet.replay import ReplayTransport
from assistant.fleet.scenario import ScenarioError, load_scenario
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import HEALTHY

MIB = 1024 * 1024


@pytest.mark.ssh
def test_the_whole_fan_out_holds_at_most_its_budget(fleet: sshfleet.SSHFleet) -> None:
    """Over real sshd: 8 hosts print 3 MiB each (under the 4 MiB per-stream limit): 24 MiB
    would be held; with an 8 MiB budget for the fan-out, 8 MiB are, and the hosts cut short
    say why."""
    hosts = HEALTHY[10:18]
    # the fixture's 2 s login limit is for unreachable-host tests: under the suite's load a
    # handshake took longer once and a healthy host read as unreachable
    with fleet.transport(hosts, connect_timeout=15.0) as transport:
        results = fan_out(transport, hosts, f"head -c {3 * MIB} /dev/zero | tr '\\0' x",
                          timeout=60, deadline=120, concurrency=8, output_budget=8 * MIB)
    assert {r.state for r in results.values()} == {"ok"}
    held = sum(r.stdout.count("x") for r in results.values())
    assert 8 * MIB - 1024 <= held <= 8 * MIB  # (stderr draws from the same budget)
    cut = [r for r in results.values() if "output budget" in r.stdout]
    assert cut and all("was used up" in r.stdout for r in cut)
    whole = [r for r in results.values() if r.stdout.count("x") == 3 * MIB]
    assert len(whole) + len(cut) == len(hosts)


def test_the_budget_is_per_fan_out_and_spares_small_outputs() -> None:
    hosts = [f"h{i}" for i in range(20)]
    for _ in range(2):  # a new fan-out starts with the whole budget again
        results = fan_out(LocalTransport(), hosts, "head -c 1000 /dev/zero | tr '\\0' y",
                          timeout=30, deadline=60, output_budget=20_000)
        assert all(r.stdout == "y" * 1000 for r in results.values())



def test_output_read_and_dropped_is_given_back_to_the_budget() -> None:
    # 20 hosts of 1,000 bytes through a 5,000-byte budget, 2 at a time: a caller that reads
    # each answer as it comes (drop_read_output) gets every host whole; holding them all, the
    # hosts past the budget are cut (a walk over 10,000 hosts against its 256 MB)
    hosts = [f"h{i}" for i in range(20)]
    command = "head -c 1000 /dev/zero | tr '\\0' y"
    read: dict[str, str] = {}
    results = fan_out(LocalTransport(), hosts, command, timeout=30, deadline=60,
                      concurrency=2, output_budget=5_000, drop_read_output=True,
                      on_result=lambda r: read.__setitem__(r.host, r.stdout))
    assert read == {h: "y" * 1000 for h in hosts}
    assert all(r.state == "ok" and r.stdout == "" for r in results.values())  # dropped
    held = fan_out(LocalTransport(), hosts, command, timeout=30, deadline=60, concurrency=2,
                   output_budget=5_000, on_result=lambda r: None)
    assert sum(r.stdout == "y" * 1000 for r in held.values()) < len(hosts)

def _scenario(tmp_path: Path, outputs: dict[str, int]) -> Path:
    directory = tmp_path / "big"
    (directory / "outputs").mkdir(parents=True)
    lines = ["title: big outputs", "symptom: x", "runbook: hang", "hosts: gpu[001-004]",
             "outputs:", "  versions:"]
    for i, (name, size) in enumerate(outputs.items(), 1):
        (directory / "outputs" / name).write_bytes(b"z" * size)
        lines.append(f"    gpu00{i}: outputs/{name}")
    (directory / "scenario.yaml").write_text("\n".join(lines) + "\n")
    return directory


def test_a_huge_recorded_output_is_cut_like_a_hosts(tmp_path: Path) -> None:
    scenario = load_scenario(str(_scenario(tmp_path, {"huge.txt": MAX_OUTPUT + 5 * MIB})))
    text = scenario.output("gpu001", "versions")
    assert text is not None and text.count("z") == MAX_OUTPUT
    assert f"{5 * MIB} bytes after the first {MAX_OUTPUT} dropped" in text
    results = fan_out(ReplayTransport(scenario), ["gpu001", "gpu002"], "", label="versions",
                      timeout=5, output_budget=MIB)
    # and the fan-out's budget applies: the two hosts share it, whichever reads first (a race)
    assert sum(r.stdout.count("z") for r in results.values()) == MIB
    assert all("output budget" in r.stdout for r in results.values())


def test_a_scenario_whose_outputs_exceed_the_budget_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scenario_mod, "SCENARIO_OUTPUT_BUDGET", MIB)
    path = _scenario(tmp_path, {"a.txt": 600_000, "b.txt": 600_000})
    with pytest.raises(ScenarioError, match="output files hold more than 1 MiB"):
        load_scenario(str(path))
