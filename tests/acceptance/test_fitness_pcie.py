"""L0 fitness and a GPU's PCIe width: an idle GPU may run its link narrower than its maximum
("These may be reduced when the GPU is not in use", nvidia-smi --help-query-gpu), and a node
under acceptance is idle. Narrow and busy is a bad slot, riser or retimer (an error that keeps
the node drained); narrow and idle is said, and left to L1's host-to-device test."""

from __future__ import annotations

import re
from pathlib import Path

from probes import accept_fitness
from probes.base import Context, load_thresholds

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
# R580, real: P8, 0 % busy, Gen1 of Gen5, x8 of x16 ("GPU" row under Utilization)
RTX5080_IDLE = REAL / ("nvidia-smi-q__1x-rtx5080-laptop-driver580-idle-p8-gen1-x8-of-x16-"
                       "repair-flags-head-excerpt.txt")
# R545, real: idle at full width x16 ("Gpu" row under Utilization, as before R575)
H100_IDLE = REAL / "nvidia-smi-q__1x-h100-hbm3-driver545-tlimit-temps-ecc-enabled-idle.txt"


def _codes(smi: str) -> dict[str, str]:
    text = f"=== diag:section smi\n{smi}\n=== diag:rc smi 0\n"
    facts = accept_fitness.parse(text)
    return {f.code: f.message for f in accept_fitness.check("gpu001", facts,
                                                              Context(thresholds=load_thresholds()))
            if f.code != "not-measured"}


def _busy(text: str, pct: int) -> str:
    """The same GPU under load: its Utilization section's first row at *pct*."""
    return re.sub(r"(Utilization\n\s*(?:Gpu|GPU)\s*: )0 %", rf"\g<1>{pct} %", text)


def _narrowed(text: str) -> str:
    """The H100 with its link trained at x8 of x16."""
    return re.sub(r"(Link Width\n\s*Max\s*: 16x\n\s*Current\s*: )16x", r"\g<1>8x", text)


def test_an_idle_gpus_narrow_link_is_said_not_held_against_the_node() -> None:
    said = _codes(RTX5080_IDLE.read_text())
    assert "fitness-pcie-degraded" not in said, said
    assert "GPU 0 x8 of x16 at 0 % busy" in said["pcie-narrow-at-idle"], said


def test_a_busy_gpus_narrow_link_fails_fitness() -> None:
    said = _codes(_busy(RTX5080_IDLE.read_text(), 97))
    assert "pcie-narrow-at-idle" not in said, said
    assert "GPU 0 x8 of x16 at 97 % busy" in said["fitness-pcie-degraded"], said


def test_both_spellings_of_the_utilization_row() -> None:
    h100 = H100_IDLE.read_text()
    assert _codes(h100).keys().isdisjoint({"fitness-pcie-degraded", "pcie-narrow-at-idle"})
    assert "pcie-narrow-at-idle" in _codes(_narrowed(h100))
    assert "fitness-pcie-degraded" in _codes(_busy(_narrowed(h100), 60))
    # at the threshold's edge (pcie_gen_busy_pct, 50): below is idle
    assert "pcie-narrow-at-idle" in _codes(_busy(_narrowed(h100), 49))
