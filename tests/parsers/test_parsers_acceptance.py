"""The acceptance walk's kinds: dcgmi-diag, gpu-burn, nvbandwidth, ib-write-bw, ib-write-lat, and
ibstat's LIDs and error lines.

Values from the real samples in fixtures/real/ are copied from the sample text by eye; the
hand-written variants (acceptance_variants.py) cover the releases and modes the samples lack,
each built from the tool's own print statements in the release it names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.parsers import parse

from . import acceptance_variants as v

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
MB = 0.008388608  # perftest MB/sec (2^20 bytes) to Gb/s


def facts(name: str) -> dict[str, Any]:
    """Parse fixtures/real/<name> with the KIND its file name starts with."""
    return parse(name.split("__", 1)[0], (REAL / name).read_text(encoding="utf-8"))


# --- ibstat: LIDs and lines outside the CA blocks ------------------------------------------------


def test_ibstat_lids_as_printed() -> None:
    f = facts("ibstat__11-cas-connectx8-down-connectx7-active-b300-host.txt")
    ports = {ca["name"]: ca["ports"][0] for ca in f["cas"]}
    assert (ports["mlx5_0"]["base_lid"], ports["mlx5_0"]["sm_lid"]) == (65535, 0)
    assert (ports["mlx5_2"]["base_lid"], ports["mlx5_2"]["sm_lid"]) == (1, 1)
    assert f["errors"] == []
    f = facts("ibstat__12-cas-h100-node-8x-cx7-ndr400-plus-cx6dx-eth-tabs.txt")
    ports = {ca["name"]: ca["ports"][0] for ca in f["cas"]}
    assert (ports["mlx5_0"]["base_lid"], ports["mlx5_0"]["sm_lid"]) == (75, 334)
    assert (ports["mlx5_1"]["base_lid"], ports["mlx5_1"]["link_layer"]) == (0, "Ethernet")


def test_ibstat_ibpanic_keeps_the_cas_before_it() -> None:
    f = parse("ibstat", v.IBSTAT_IBPANIC)
    assert [ca["name"] for ca in f["cas"]] == ["mlx5_0"]
    port = f["cas"][0]["ports"][0]
    # no subnet manager swept this port: Initializing with SM lid 0
    assert (port["state"], port["sm_lid"], port["base_lid"]) == ("Initializing", 0, 65535)
    assert f["errors"] == [
        "ibwarn: [40922] main: stat of IB device 'mlx5_1' failed",
        "ibpanic: [40922] main: stat of IB device 'mlx5_1' failed: No such device",
    ]


def test_ibstat_error_before_the_cas_and_alone() -> None:
    # stdout is flushed at exit, so stderr's panic can come first; a panic alone is still ibstat
    panic = "ibpanic: [7] main: can't list IB device names: No such file or directory"
    f = parse("ibstat", panic + "\n" + v.IBSTAT_IBPANIC.split("ibwarn")[0])
    assert f["errors"] == [panic] and len(f["cas"]) == 1
    assert parse("ibstat", panic + "\n") == {"cas": [], "errors": [panic]}
    exit_line = "ibstat: iberror: failed: 'mlx5_9' IB device can't be found"
    assert parse("ibstat", exit_line + "\n")["errors"] == [exit_line]
