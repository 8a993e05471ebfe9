"""versions: parsing the stack from each section, and drift against the fleet and a baseline."""

from __future__ import annotations

import pytest

from probes.parsers import ParseError
from probes.versions import PROBE
from tests.probes.probe_outputs import baseline, codes, real, replace, sh_accepts
from tests.probes.probe_outputs import context as ctx

BASE = baseline("versions")


def test_baseline_parses_to_the_healthy_stack() -> None:
    # The healthy 8xH100 node: every version read, nothing missing.
    facts = PROBE.parse(BASE)
    assert facts["kernel"] == "5.15.0-105-generic"
    assert facts["driver_version"] == "550.90.07"
    assert facts["cuda_version"] == "12.4"
    assert facts["nccl_version"] == "2.21.5"  # the one torch loads
    assert facts["ofed_version"] == "23.10-1.1.9.0"
    assert facts["torch_version"] == "2.4.0+cu124"
    assert facts["missing"] == []
    assert PROBE.check("gpu001", facts, ctx()) == []


def test_real_driver_and_nvcc_samples() -> None:
    # Real /proc/driver/nvidia/version (open kernel module) and an nvcc without a Build line.
    driver = real("proc-driver-nvidia-version__open-kernel-module-525-archlinux-dkms")
    text = replace(BASE, driver=driver, nvcc=real("nvcc-version__cuda10.1-no-build-line"))
    facts = PROBE.parse(text)
    assert facts["driver_version"] == "525.60.11"
    assert facts["cuda_version"] == "10.1"


def test_missing_tools_fall_back_and_say_so() -> None:
    # No nvcc and no torch: CUDA comes from the driver's nvidia-smi line, NCCL from ldconfig.
    facts = PROBE.parse(replace(BASE, nvcc=None, torch=None))
    assert facts["cuda_version"] == "12.4"
    assert facts["nccl_version"] == "2.21.5"
    assert set(facts["missing"]) == {"nvcc", "torch"}


def test_no_driver_is_not_measured() -> None:
    # A node without the NVIDIA driver: never a pass.
    facts = PROBE.parse(replace(BASE, driver=("cat: /proc/driver/nvidia/version: No such file", 1),
                                smi=None))
    assert codes(PROBE.check("gpu001", facts, ctx())) == ["not-measured"]


def test_drift_names_the_odd_host_and_the_majority() -> None:
    # Seven hosts on NCCL 2.21.5, one on 2.18.1: one finding naming that host.
    facts = {f"gpu00{i}": PROBE.parse(BASE) for i in range(1, 9)}
    facts["gpu006"]["nccl_version"] = "2.18.1"
    findings = PROBE.check_fleet(facts, ctx())
    assert codes(findings) == ["version-drift"]
    assert findings[0].hosts == ("gpu006",)
    assert findings[0].evidence["majority"] == "2.21.5"
    assert "2.18.1" in findings[0].message


def test_a_node_without_nvcc_is_not_a_node_on_another_cuda() -> None:
    # nvcc (the toolkit, 12.4 here) on seven nodes, not installed on the eighth, whose CUDA
    # is the driver's newest supported (nvidia-smi "CUDA Version: 12.6"): not comparable.
    # Under a cut --timeout the nvcc section of one host may be all that did not answer.
    facts = {f"gpu00{i}": PROBE.parse(BASE) for i in range(1, 9)}
    smi = "550.90.07\n| NVIDIA-SMI 550.90.07    Driver Version: 550.90.07    CUDA Version: 12.6 |"
    facts["gpu008"] = PROBE.parse(replace(BASE, nvcc=None, smi=smi))
    assert (facts["gpu008"]["cuda_version"], facts["gpu008"]["cuda_version_from"]) == \
        ("12.6", "driver")
    assert PROBE.check_fleet(facts, ctx()) == []
    # toolkits that differ are still drift
    facts["gpu007"]["cuda_version"] = "12.1"
    assert [f.hosts for f in PROBE.check_fleet(facts, ctx())] == [("gpu007",)]


def test_same_versions_everywhere_is_quiet() -> None:
    # A uniform fleet raises nothing.
    facts = {f"gpu00{i}": PROBE.parse(BASE) for i in range(1, 5)}
    assert PROBE.check_fleet(facts, ctx()) == []


def test_pinned_baseline_mismatch() -> None:
    # A pinned driver the whole fleet misses: every host is named.
    facts = {f"gpu00{i}": PROBE.parse(BASE) for i in range(1, 3)}
    findings = PROBE.check_fleet(facts, ctx(params={"baseline": {"driver_version": "550.54.15"}}))
    assert codes(findings) == ["version-baseline-mismatch"]
    assert findings[0].hosts == ("gpu001", "gpu002")


def test_garbage_is_a_parse_error() -> None:
    # Text that is not this probe's output at all.
    with pytest.raises(ParseError):
        PROBE.parse("Welcome to Ubuntu 22.04\nlast login: yesterday\n")


def test_command_is_valid_shell() -> None:
    assert sh_accepts(PROBE.command({})).returncode == 0
