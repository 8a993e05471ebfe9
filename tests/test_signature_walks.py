"""Every catalogued fault example, walked as an on-call engineer walks it:
`diag run RUNBOOK --scenario FLEET --auto --json` over fleets that each hold many examples
(tests/signature_examples.py), from a runbook that is not the obvious one for most of these
faults (over real sshd, tests/fleet/test_signature_walks_ssh.py walks them from two).

Whatever the runbook, the evidence sweep names each fault on its host with its action, and no
healthy twin (nor a baseline host) is accused: not in the conclusion, not among the standing
faults, not with its example's signature. The same fleets go over real sshd in
tests/fleet/test_signature_walks_ssh.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assistant.cli import main
from probes.faults.catalogue import load_faults
from tests.fleet import sshfleet
from tests.signature_examples import examples, fleets, scenario_yaml, section_edits, walked_examples

FLEETS = fleets(hosts=64, per_component=8)
RUNBOOKS = ("hang", "checkpoint-stall")


def walk(fleet: dict[str, Any], runbook: str, tmp: Path, capsys: pytest.CaptureFixture[str],
         *extra: str) -> tuple[int, dict[str, Any]]:
    (tmp / "scenario.yaml").write_text(scenario_yaml(fleet, runbook), encoding="utf-8")
    code = main(["run", runbook, "--scenario", str(tmp), "--auto", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def check_verdicts(fleet: dict[str, Any], doc: dict[str, Any]) -> None:
    """Each fault named on its host (a standing one with its action), nobody healthy accused,
    and an --auto walk never left waiting while a catalogued fault stands."""
    signatures = load_faults().signatures
    on_host: dict[str, set[str]] = {}
    for finding in doc["findings"]:
        for host in finding["hosts"]:
            on_host.setdefault(host, set()).add(finding["code"])
    standing = {(f["code"], h): f for f in doc["faults"] for h in f["hosts"]}
    for host, sig in fleet["faults"].items():
        assert sig in on_host.get(host, set()), (host, sig, sorted(on_host.get(host, ())))
        if signatures[sig].standing:
            fault = standing.get((sig, host))
            assert fault is not None, (host, sig)
            assert fault["action"] == signatures[sig].action
    healthy = set(doc["hosts"]) - set(fleet["faults"])
    accused = {h for f in doc["faults"] for h in f["hosts"]}
    if doc["conclusion"] is not None:
        accused |= set(doc["conclusion"].get("hosts") or ())
        accused |= {h for f in doc["conclusion"].get("evidence") or () for h in f["hosts"]}
    assert accused & healthy == set(), sorted(accused & healthy)
    for host, sig in fleet["twins"].items():
        assert sig not in on_host.get(host, set()), (host, sig)
    assert doc["status"] != "waiting" or not doc["faults"]
    assert {h for h, s in doc["hosts"].items() if s["state"] != "ok"} == set()


# Here (no sshd needed) every fleet from both runbooks; where sshd runs (CI),
# tests/fleet/test_signature_walks_ssh.py walks them all from both runbooks over real sshd, and
# the replay walks only the first fleet (its own path) rather than all of them a second time.
WALKED_HERE = ([(i, r) for i in range(len(FLEETS)) for r in RUNBOOKS]
               if sshfleet.unavailable_reason() else [(0, RUNBOOKS[0])])


@pytest.mark.parametrize(("index", "runbook"), WALKED_HERE)
def test_every_fault_is_named_and_no_twin_accused(index: int, runbook: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fleet = FLEETS[index]
    code, doc = walk(fleet, runbook, tmp_path, capsys)
    check_verdicts(fleet, doc)
    assert code != 0  # faults stand: the exit status says so


def test_the_fleets_hold_every_example_of_the_swept_components() -> None:
    held = {s for f in FLEETS for s in f["faults"].values()}
    assert held == {ex["signature"] for ex in walked_examples()}
    assert len(held) >= 200


def test_a_conclusion_cites_no_info_finding_of_a_host_it_does_not_accuse(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # gpu001's GPU fell off the bus (XID 79); gpu002 logged an XID 43 in the same window (an
    # application's channel reset, catalogued as ignorable: an info finding). The conclusion
    # names gpu001 and shows nothing of gpu002 as its evidence.
    drain = next(ex for _, ex in examples() if ex["signature"] == "xid-drain")
    xid43 = drain["fault"]["kernel_log"].split("[1209254.420000]")[0] + (
        "[1209143.420000] NVRM: Xid (PCI:0000:19:00): 43, pid=2318820, name=python3, "
        "Ch 00000010\n")
    fleet = {"hosts": [f"gpu{i:03d}" for i in range(1, 9)], "faults": {}, "twins": {},
             "outputs": {"gpu": {"gpu001": {"sections": section_edits(drain["fault"])},
                                 "gpu002": {"sections": {"kernel_log": xid43}}}}}
    code, doc = walk(fleet, "hang", tmp_path, capsys)
    assert code != 0
    conclusion = doc["conclusion"]
    assert conclusion is not None and conclusion["hosts"] == ["gpu001"], conclusion
    assert "xid-other" in {f["code"] for f in doc["findings"] if "gpu002" in f["hosts"]}
    cited = {h for f in conclusion["evidence"] for h in f["hosts"]}
    assert cited == {"gpu001"}, conclusion["evidence"]
