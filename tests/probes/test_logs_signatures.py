"""The nccl-log and pytorch-dist families: every log signature counts the published lines of
its fault and not its healthy twin's, in Python (the applier) and in the host's grep -E (the
logs component's filter), and the checks they lean on exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from probes import faults
from probes.catalog import load_catalog
from probes.faults import load_faults
from probes.rankprogress.hosts import host_in_line
from tests import yamlc

FAMILIES = ("nccl-log", "pytorch-dist")
LINES: dict[str, dict[str, list[dict[str, str]]]] = yamlc.load(
    (Path(__file__).with_name("logs_signature_lines.yaml")).read_text(encoding="utf-8"))


def ours() -> list[Any]:
    return [s for s in load_faults().signatures.values() if s.family in FAMILIES]


def counts(sig: Any, line: str) -> bool:
    assert sig.log is not None
    ignored = sig.log.ignore_regex is not None and sig.log.ignore_regex.search(line)
    return bool(sig.log.regex.search(line)) and not ignored


def text(entry: dict[str, str]) -> str:
    return entry.get("real") or entry["built"]


def test_the_families_load_and_every_log_signature_has_lines() -> None:
    sigs = ours()
    logged = {s.id for s in sigs if s.log}
    assert len(logged) >= 30 and set(LINES) == logged
    for sig in sigs:
        assert sig.probe == "logs" or sig.raised_by == "check", sig.id
        if sig.log:
            assert sig.log.streams == ("job",)
            assert LINES[sig.id]["fault"] and LINES[sig.id]["twin"], sig.id
            assert all(e.get("source") for kind in ("fault", "twin") for e in LINES[sig.id][kind])


def test_checks_named_raised_by_exist_with_their_severity() -> None:
    codes = load_catalog().codes
    checks = [s for s in ours() if s.raised_by == "check"]
    assert {s.id for s in checks} == {"nccl-watchdog-timeout", "watchdog-stuck", "cuda-oom",
                                      "rendezvous-failed", "import-error", "loss-nan"}
    for sig in checks:
        assert codes[sig.id].probe == sig.probe and codes[sig.id].severity == sig.severity


@pytest.mark.parametrize("sig_id", sorted(LINES))
def test_fault_lines_count_and_twins_do_not(sig_id: str) -> None:
    sig = load_faults().signatures[sig_id]
    for entry in LINES[sig_id]["fault"]:
        assert counts(sig, text(entry)), (sig_id, text(entry))
    for entry in LINES[sig_id]["twin"]:
        assert not counts(sig, text(entry)), (sig_id, text(entry))


def test_no_fault_line_counts_for_another_signature_of_the_families_by_accident() -> None:
    # each published line names one fault; a second family signature on the same line is
    # only allowed where the catalogue means it (a summary line under its specific cause)
    allowed = {("nccl-remote-error", "torch-nccl-aborted")}
    sigs = [s for s in ours() if s.log]
    for sig_id, kinds in LINES.items():
        for entry in kinds["fault"]:
            others = {s.id for s in sigs if s.id != sig_id and counts(s, text(entry))}
            assert all((sig_id, o) in allowed or (o, sig_id) in allowed for o in others), (
                sig_id, others, text(entry))


def test_the_hosts_grep_lets_every_fault_line_through() -> None:
    # the logs component greps on the host with the union ERE (POSIX, grep -E): every fault
    # line must survive it, or the applier never sees it
    ere = faults.stream_ere("job")
    lines = [text(e) for kinds in LINES.values() for e in kinds["fault"]]
    out = subprocess.run(["grep", "-aE", "-e", ere], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=False, env={"LC_ALL": "C"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == lines


def test_nccl_lines_name_the_host_that_printed_them() -> None:
    assert host_in_line(text(LINES["nccl-ib-retry-exceeded"]["fault"][0])) == "kp-ddp-worker-0"
    nvls = text(LINES["nccl-nvls-bind-failed"]["fault"][0])  # "(func) NCCL WARN" form
    assert host_in_line(nvls) == "gpu-stress-dgc86-xfpt6"
    assert str(host_in_line(text(LINES["nccl-shm-too-small"]["fault"][1]))).startswith("mt-l-x86")
    assert host_in_line(text(LINES["torch-child-sigkill"]["fault"][0])) is None


def test_a_line_naming_a_peer_accuses_no_host_that_printed_it() -> None:
    # a completion error, a queue pair that cannot reach its remote GID, a socket connect that
    # times out: each names the other end, and the host that printed it is one end of the
    # connection, not known to be the broken one - no standing host/gpu/link signature counts it
    peer = re.compile(r"from peer |remote GID |remote address |[Cc]onnect(ion)? to [0-9A-Za-z\[]"
                      r"|connect returned")
    # (but a completion whose status is the local HCA's own, IBV_WC_LOC_PROT_ERR: this host's
    # ACS/IOMMU broke GPUDirect RDMA, whichever peer it was talking to)
    local = {"nccl-ib-local-protection-error"}
    standing = [s for s in load_faults().signatures.values()
                if s.log and "job" in s.log.streams and s.standing and s.id not in local]
    lines = [text(e) for kinds in LINES.values() for kind in ("fault", "twin")
             for e in kinds[kind] if peer.search(text(e))]
    assert len(lines) >= 10
    for line in lines:
        assert not [s.id for s in standing if counts(s, line)], line
