"""L0 fitness says what it could not measure (issue 29 item 16): an unreadable /proc/modules is
not "nvidia_peermem not loaded" (an error), and a node without ping says L0 needs it."""

from __future__ import annotations

from probes import accept_fitness
from probes.base import Context

IBSTAT = """=== diag:section ibstat
CA 'mlx5_0'
\tCA type: MT4129
\tNumber of ports: 1
\tPort 1:
\t\tState: Active
\t\tPhysical state: LinkUp
\t\tRate: 400
\t\tLink layer: InfiniBand
=== diag:rc ibstat 0
"""


def _codes(text: str) -> dict[str, str]:
    facts = accept_fitness.parse(text)
    return {f.code: f.message for f in accept_fitness.check("gpu001", facts, Context())}


def test_an_unreadable_proc_modules_is_not_measured_not_a_missing_module() -> None:
    script = accept_fitness.command({})
    assert "[ -r /proc/modules ]" in script and "unreadable /proc/modules" in script
    said = _codes(IBSTAT + "=== diag:section peermem\nunreadable /proc/modules\n"
                  "=== diag:rc peermem 0\n")
    assert "fitness-peermem-missing" not in said, said
    assert "/proc/modules is unreadable" in said["not-measured"], said
    said = _codes(IBSTAT + "=== diag:section peermem\nnot loaded\n=== diag:rc peermem 0\n")
    assert "fitness-peermem-missing" in said, said  # a readable file without it: still an error


def test_a_node_without_ping_says_l0_needs_it() -> None:
    said = _codes(IBSTAT + "=== diag:missing reach\n")
    assert "L0 needs ping" in said.get("not-measured", ""), said
