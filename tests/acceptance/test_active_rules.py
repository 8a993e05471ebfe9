"""The rules that keep an active probe from running unasked: the validator refuses a step that
mixes active and read-only probes or pre-confirms itself, and ``diag probe`` of an active probe
runs nothing (it has no walk to confirm it)."""

from __future__ import annotations

import json

import pytest

from assistant.cli import main
from assistant.kb import kb_ids
from assistant.locations import runbooks_dir
from assistant.runbook.validate import validate_text

ACCEPTANCE = (runbooks_dir() / "acceptance.yaml").read_text()
KB = kb_ids()


def _messages(text: str) -> list[str]:
    _, issues = validate_text(text, "acceptance.yaml", kb_ids=KB)
    return [i.message for i in issues]


def test_the_shipped_acceptance_runbook_is_valid() -> None:
    assert _messages(ACCEPTANCE) == []


def test_a_step_mixing_active_and_read_only_probes_is_refused() -> None:
    text = ACCEPTANCE.replace("probes: [dcgm-diag, gpu-burn, nvbandwidth]",
                              "probes: [dcgm-diag, gpu-burn, versions]")
    assert any("active probes (dcgm-diag, gpu-burn)" in m and "versions" in m
               for m in _messages(text)), _messages(text)


def test_a_runbook_cannot_confirm_an_active_step_itself() -> None:
    text = ACCEPTANCE.replace("    probes: [nccl-node, ib-loopback]\n",
                              "    probes: [nccl-node, ib-loopback]\n"
                              "    params: {nccl-node: {confirmed_active: true}}\n")
    assert any("'confirmed_active' is set by the walk" in m for m in _messages(text))


def test_diag_probe_of_an_active_probe_runs_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe", "gpu-burn", "--hosts", "gpu001", "--transport", "local", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in doc["findings"]] == ["active-test-not-confirmed"]
    assert doc["hosts"]["gpu001"]["facts"] == {"refused": "not confirmed"}
    assert code == 0
