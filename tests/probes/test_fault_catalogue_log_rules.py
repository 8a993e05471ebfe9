"""A log signature's ``unless``: lines that are the healthy twin on a host measured to be it
(docs/fault-format.md), and a catalogue file whose rule is broken named with its signature."""

from __future__ import annotations

from typing import Any

import pytest

from probes.faults.apply import judge
from probes.faults.catalogue import FaultCatalogueError, read_files

LINE = {"stream": "job", "text": "h:1:1 [0] NCCL INFO Failed to open libibverbs.so[.1]",
        "age_s": None}


def family(log: dict[str, Any]) -> list[tuple[str, Any]]:
    return [("test.yaml", {"family": "test", "signatures": [{
        "id": "ibverbs-missing", "probe": "logs", "scope": "job", "severity": "warning",
        "action": "reconfigure", "summary": "s", "cause": "c", "source": "NCCL ibvsymbols.cc",
        "twin": "an Ethernet-only host", "log": log}]})]


@pytest.mark.parametrize(("rdma", "raised"), [
    (9, True),      # HCAs here: the image lacks the library
    (0, False),     # measured to have no RDMA device: the twin
    (None, True),   # not measured is not healthy: the line still counts
])
def test_unless_spares_only_a_host_measured_to_be_the_twin(rdma: int | None,
                                                            raised: bool) -> None:
    catalogue = read_files(family({"streams": ["job"], "pattern": "Failed to open libibverbs",
                                   "unless": {"key": "rdma_devices", "op": "eq", "value": 0}}))
    facts: dict[str, Any] = {"log_lines": [LINE]}
    if rdma is not None:
        facts["rdma_devices"] = rdma
    codes = {f.code for f in judge("logs", {"h1": facts}, {}, catalogue)}
    assert (codes == {"ibverbs-missing"}) is raised, codes


@pytest.mark.parametrize(("log", "message"), [
    ({"streams": ["job"], "pattern": "x", "unless": {"key": "k", "op": "about", "value": 0}},
     "test.yaml: signature 'ibverbs-missing': log.unless: op 'about'"),
    ({"streams": ["job"], "pattern": "x", "unles": {"key": "k", "op": "eq", "value": 0}},
     "log: unknown key 'unles'"),
])
def test_a_broken_log_rule_names_its_file_and_signature(log: dict[str, Any],
                                                        message: str) -> None:
    with pytest.raises(FaultCatalogueError) as caught:
        read_files(family(log))
    assert message in str(caught.value)
