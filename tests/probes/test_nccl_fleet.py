"""The nccl probe across hosts: the NCCL version each host loaded and the network NCCL chose,
named for what they are (version drift; TCP sockets on a few hosts while the rest use IB)."""

from __future__ import annotations

from pathlib import Path

from probes.base import Context, default_thresholds, get_probe
from probes.nccl_fleet import transport

PROBE = get_probe("nccl")
SCENARIOS = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"
BASE = PROBE.parse((SCENARIOS / "_baseline" / "nccl.txt").read_text())


def scenario_facts(path: str) -> dict:
    return PROBE.parse((SCENARIOS / path).read_text())


def fleet_codes(facts: dict[str, dict]) -> dict[str, tuple[str, ...]]:
    ctx = Context(default_thresholds(), {}, {"peers": list(facts)})
    return {f.code: f.hosts for f in PROBE.check_fleet(facts, ctx)}


def test_one_host_on_another_nccl_is_version_drift_named_with_host_and_majority() -> None:
    odd = scenario_facts("hang-nccl-version-drift-env/outputs/nccl-gpu006-old-image.txt")
    facts = {f"gpu00{i}": BASE for i in range(1, 9)} | {"gpu006": odd}
    found = fleet_codes(facts)
    assert found["nccl-version-drift"] == ("gpu006",)
    assert found["nccl-env-drift"] == ("gpu006",)  # NCCL_NVLS_ENABLE: a symptom of the image
    [drift] = [f for f in PROBE.check_fleet(facts, Context(default_thresholds()))
               if f.code == "nccl-version-drift"]
    assert drift.message == ("the NCCL version the job loaded differs on 1 host(s): 2.18.3 on "
                             "gpu006 (majority 2.21.5 on 7)")


def test_the_same_nccl_built_for_another_cuda_is_not_drift() -> None:
    other = scenario_facts(
        "hang-healthy-nccl-cuda-build-differs/outputs/nccl-gpu006-cuda12.2-build.txt")
    assert fleet_codes({"gpu001": BASE, "gpu002": BASE, "gpu006": other}) == {}


def test_one_host_on_sockets_while_the_rest_use_ib() -> None:
    sock = scenario_facts("low-bandwidth-ib-disabled-one-host/outputs/"
                          "nccl-gpu004-ib-disabled.txt")
    assert transport(sock) == "Socket" and transport(BASE) == "IB"
    found = fleet_codes({"gpu001": BASE, "gpu002": BASE, "gpu003": BASE, "gpu004": sock})
    assert found["nccl-transport-mixed"] == ("gpu004",)
    [mixed] = [f for f in PROBE.check_fleet({"gpu001": BASE, "gpu002": BASE, "gpu004": sock},
                                            Context(default_thresholds()))
               if f.code == "nccl-transport-mixed"]
    assert mixed.evidence["why"] == {"gpu004": "NCCL_IB_DISABLE=1"}


def test_every_host_on_sockets_is_the_fleet_wide_fallback_not_a_mix() -> None:
    sock = scenario_facts("low-bandwidth-socket-fallback/outputs/nccl-socket.txt")
    assert "nccl-transport-mixed" not in fleet_codes({f"g{i}": sock for i in range(4)})


def test_ib_disable_zero_is_ib() -> None:
    zero = scenario_facts("low-bandwidth-healthy-ib-disable-zero/outputs/"
                          "nccl-gpu004-ib-disable-0.txt")
    assert transport(zero) == "IB"
    found = fleet_codes({"gpu001": BASE, "gpu002": BASE, "gpu004": zero})
    assert "nccl-transport-mixed" not in found and "nccl-version-drift" not in found


def test_hosts_without_nccl_lines_say_nothing() -> None:
    quiet = dict(BASE, networks=[], nccl_version=None)
    assert transport(quiet) is None
    assert fleet_codes({"gpu001": quiet, "gpu002": quiet, "gpu003": BASE}) == {}
