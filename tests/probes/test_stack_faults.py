"""The gpu-services, driver-stack and nvml-cuda families against the baselines and their cases.

Every signature has a fault case that raises it and a healthy twin that does not
(tests/probes/stack_cases.py); the healthy baselines raise nothing of these families.
"""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

import pytest

from probes import driver, services
from probes.faults.apply import attach_log_lines, judge
from probes.faults.catalogue import FaultCatalogue, read_files
from tests import yamlc
from tests.probes.probe_outputs import baseline
from tests.probes.stack_cases import DRIVER, LOGS, SERVICES, edited, examples_yaml

FAULTS = Path(__file__).resolve().parents[2] / "probes" / "faults"
FILES = ("gpu-services.yaml", "driver-stack.yaml", "nvml-cuda.yaml")
THRESHOLDS = {"fabric_registration_settle_s": 600, "fault_log_window_minutes": 120}


@cache
def catalogue() -> FaultCatalogue:
    return read_files([(name, yamlc.load((FAULTS / name).read_text(encoding="utf-8")))
                       for name in FILES])


def _codes(probe: str, facts: dict) -> set[str]:
    return {f.code for f in judge(probe, {"gpu001": facts}, THRESHOLDS, catalogue())}


def test_families_load_and_count() -> None:
    cat = catalogue()
    assert set(cat.families) == {"gpu-services", "driver-stack", "nvml-cuda"}
    assert len(cat.signatures) >= 25
    # every signature has a case, every case a signature
    cased = {c["signature"] for c in SERVICES + DRIVER + LOGS}
    assert cased == set(cat.signatures)


def test_log_patterns_are_posix_ere() -> None:
    # the host greps its logs with these: grep -E must accept every one of them
    for sig in catalogue().signatures.values():
        if sig.log:
            done = subprocess.run(["grep", "-E", sig.log.pattern], input="x\n", text=True,
                                  capture_output=True, check=False)
            assert done.returncode in (0, 1), (sig.id, done.stderr)


def test_baselines_raise_nothing() -> None:
    assert _codes("services", services.parse(baseline("services"))) == set()
    assert _codes("driver", driver.parse(baseline("driver"))) == set()


@pytest.mark.parametrize("case", SERVICES, ids=[c["signature"] for c in SERVICES])
def test_services_case(case: dict) -> None:
    fault = services.parse(edited("services", case["fault"]))
    twin = services.parse(edited("services", case["twin"]))
    assert case["signature"] in _codes("services", fault)
    assert case["signature"] not in _codes("services", twin)


@pytest.mark.parametrize("case", DRIVER, ids=[c["signature"] for c in DRIVER])
def test_driver_case(case: dict) -> None:
    fault = driver.parse(edited("driver", case["fault"]))
    twin = driver.parse(edited("driver", case["twin"]))
    assert case["signature"] in _codes("driver", fault)
    assert case["signature"] not in _codes("driver", twin)


def test_a_cpu_only_node_has_no_nvidia_module_to_miss() -> None:
    # A login or storage node of the job, or a machine with no GPU at all: no GPU on its bus,
    # no module loaded, no nvidia-smi, and modinfo finds no nvidia module. Nothing to accuse.
    not_found = "".join(f"{f}: modinfo: ERROR: Module nvidia not found.\n"
                        for f in ("version", "vermagic", "filename"))
    no_module = ("cat: /proc/driver/nvidia/version: No such file or directory\n", 1)
    cpu_only = driver.parse(edited("driver", {"module": no_module, "modinfo": not_found,
                                              "smi": None, "pci": "", "maps": ""}))
    assert _codes("driver", cpu_only) == set()
    # the same modinfo answer on a node with GPUs on its bus is the fault
    gpu_node = driver.parse(edited("driver", {"module": no_module, "modinfo": not_found,
                                              "smi": None, "maps": ""}))
    assert "driver-module-missing-for-kernel" in _codes("driver", gpu_node)


def _log_codes(stream: str, lines: str) -> set[str]:
    probe = "kernel" if stream == "kernel" else "logs"
    text = f"=== diag:section log\n{lines}=== diag:rc log 0\n"
    facts: dict = {"uptime_s": 1209631.42}
    attach_log_lines(text, {"log": stream}, facts, catalogue())
    return {f.code for f in judge(probe, {"gpu001": facts}, THRESHOLDS, catalogue())}


@pytest.mark.parametrize("case", LOGS, ids=[c["signature"] for c in LOGS])
def test_log_case(case: dict) -> None:
    assert case["signature"] in _log_codes(case["stream"], case["fault"])
    assert case["signature"] not in _log_codes(case["stream"], case["twin"])


def test_healthy_job_log_matches_no_signature() -> None:
    # the baseline's NCCL init lines (what a healthy job prints) raise nothing
    log = baseline("nccl").split("=== diag:section log\n")[1].split("=== diag:rc log")[0]
    assert _log_codes("job", log) == set()


def test_examples_file_round_trips() -> None:
    # the merge note's examples say exactly what the cases test
    def spec(value: object) -> object:
        if isinstance(value, dict):
            return (value["text"], value["rc"])
        return "" if value == "" else value

    for component, cases, logs in (("driver", DRIVER, LOGS), ("services", SERVICES, [])):
        data = yamlc.load(examples_yaml(component, cases, logs))
        assert [d["signature"] for d in data] == [c["signature"] for c in cases + logs]
        for entry, case in zip(data, cases + logs, strict=True):
            for side in ("fault", "twin"):
                if "stream" in case:
                    assert entry[side] == {f"{case['stream']}-stream": case[side]}
                else:
                    assert {k: spec(v) for k, v in entry[side].items()} == case[side]


def test_a_logged_driver_library_mismatch_accuses_no_host() -> None:
    # A container that brings its own libnvidia-ml (560.35 on a 550.90.07 host whose own
    # libraries match its module): NVML fails in the job, and the kernel names the client.
    # Rebooting the host changes nothing, so neither line is a standing fault of the host (both
    # were host / critical / reboot); the host's own versions are the driver component's.
    from probes.faults.catalogue import load_faults

    assert _codes("driver", driver.parse(baseline("driver"))) == set()
    standing = load_faults().standing_codes()
    for stream, line in (("job", "Failed to initialize NVML: Driver/library version mismatch\n"
                                 "NVML library version: 560.35\n"),
                         ("kernel", "[1209500.118233] NVRM: API mismatch: the client has the "
                                    "version 560.35.03, but\n")):
        codes = _log_codes(stream, line)
        assert codes and not codes & standing, (stream, codes)
        assert {catalogue().signatures[c].scope for c in codes} == {"job"}
