"""A drift judged among the hosts that share a fact (``among``): a power limit is compared only
with hosts of the same GPU models, so a healthy A100 host at its own default, walked with H100
hosts, is not "set low", while an H100 host below its peers still is."""

from __future__ import annotations

from typing import Any

from probes.base import load_thresholds
from probes.faults.apply import judge
from probes.faults.predicate import check_predicate

H100 = ["NVIDIA H100 80GB HBM3"]
A100 = ["NVIDIA A100-SXM4-80GB"]


def _host(models: list[str] | None, limit: float | None) -> dict[str, Any]:
    return {"gpu_models": models, "power_limit_min_w": limit, "gpus": []}


def _low(facts: dict[str, dict[str, Any]]) -> list[str]:
    found = judge("gpuhealth", facts, load_thresholds())
    return sorted(h for f in found if f.code == "gpu-power-limit-below-fleet" for h in f.hosts)


def test_a_host_of_another_gpu_model_at_its_own_default_is_not_low() -> None:
    fleet = {f"h{i}": _host(H100, 700.0) for i in range(1, 5)}
    fleet["a1"] = _host(A100, 400.0)
    assert _low(fleet) == []


def test_a_host_below_its_own_models_peers_is_low() -> None:
    fleet = {f"h{i}": _host(H100, 700.0) for i in range(1, 5)}
    fleet["h5"] = _host(H100, 500.0)
    fleet["a1"] = _host(A100, 400.0)
    assert _low(fleet) == ["h5"]


def test_a_model_group_without_a_clear_majority_is_not_judged() -> None:
    # two A100 hosts (fewer than three report): no norm for them, whatever their limits
    fleet = {f"h{i}": _host(H100, 700.0) for i in range(1, 5)}
    fleet["a1"], fleet["a2"] = _host(A100, 400.0), _host(A100, 250.0)
    fleet["x"] = _host(None, 300.0)  # models unknown: not judged either
    assert _low(fleet) == []


def test_among_names_a_fact() -> None:
    assert check_predicate({"drift": "power_limit_min_w", "among": "gpu_models"}) == []
    assert check_predicate({"drift": "power_limit_min_w", "among": 3}) != []
    assert check_predicate({"drift": "power_limit_min_w", "by": "x"}) != []
