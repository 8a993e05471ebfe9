"""Conclusions name the hosts they accuse, questions the hosts they ask about, and findings that
say the same thing about many hosts are one entry (text and JSON alike)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.cli import main
from probes.hostfold import fold_findings
from probes.model import Finding
from tests.tui.tui_support import write_scenario


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


def test_the_conclusion_names_the_accused_host(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run(["run", "hang", "--scenario", "demo", "--auto", "--json"], capsys)
    doc = json.loads(out)
    assert doc["conclusion"]["hosts"] == ["gpu013"]
    _, text = run(["run", "hang", "--scenario", "demo", "--auto"], capsys)
    assert "conclusion: IB link down or flapping — gpu013 (1) [critical]" in text


def test_findings_about_many_hosts_fold_into_one(capsys: pytest.CaptureFixture[str]) -> None:
    # Before: eight entries, one per host, differing only in the host's name. The same on
    # every host of the walk is the job's image (probes/nccl_settings.py): one entry that
    # names the hosts it was seen on and accuses none of them.
    _, out = run(["run", "low-bandwidth", "--scenario", "low-bandwidth-socket-fallback",
                  "--auto", "--json"], capsys)
    doc = json.loads(out)
    socket = [f for f in doc["findings"] if f["code"] == "nccl-socket-transport"]
    assert len(socket) == 1
    assert socket[0]["hosts"] == []
    assert socket[0]["message"].startswith(
        "the job, on 8 of 8 hosts (gpu[001-008] (8)): NCCL logged the Socket network (TCP) "
        "although each host has RDMA HCAs")
    assert socket[0]["evidence"]["raised_on"] == "gpu[001-008] (8)"  # the detail stays
    assert doc["conclusion"]["hosts"] == []
    _, text = run(["run", "low-bandwidth", "--scenario", "low-bandwidth-socket-fallback",
                   "--auto"], capsys)
    assert text.count("nccl-socket-transport") == 1


def test_a_conclusion_that_finds_nothing_accuses_nobody(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    healthy = write_scenario(tmp_path / "healthy", hosts="gpu[001-004]")
    _, out = run(["run", "hang", "--scenario", str(healthy), "--auto", "--json",
                     "--answer", "ask-phase=mid", "--answer", "ask-change=nothing"], capsys)
    doc = json.loads(out)
    assert doc["conclusion"]["id"] == "nothing-found"
    assert doc["conclusion"]["hosts"] == []


def test_fold_keeps_different_messages_apart() -> None:
    a = Finding("storage-latency-high", "error", ("gpu001",), "/ckpt on gpu001: fsync 163 ms")
    b = Finding("storage-latency-high", "error", ("gpu002",), "/ckpt on gpu002: fsync 90 ms")
    c = Finding("storage-latency-high", "error", ("gpu003",), "/ckpt on gpu003: fsync 90 ms")
    folded = fold_findings([a, b, c])
    assert [f.hosts for f in folded] == [("gpu001",), ("gpu002", "gpu003")]
    assert folded[1].message == "/ckpt on gpu[002-003]: fsync 90 ms"
    assert folded[0] is a  # alone: as it was, evidence untouched
    # a host name inside a longer one is not that host
    d = Finding("x", "error", ("gpu1",), "gpu1 and gpu10 differ")
    assert fold_findings([d])[0].message == "gpu1 and gpu10 differ"
