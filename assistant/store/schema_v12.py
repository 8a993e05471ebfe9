"""Schema version 12: one code per fault, whichever runbook concluded it.

Four conclusions named a fault that another runbook names too, under their own id: an IB port
down was ``ib-link-fault`` in hang and crash but ``link-physical-fault`` in low-bandwidth, so
history and a query for one code missed the walks that met it as slow bandwidth (issue 29
item 12). The runbooks now share the id; this step renames what older walks recorded, only in
the runbook that used the old id (conclusion ids are node ids, unique within a runbook).
"""

from __future__ import annotations

# (runbook, old conclusion id, the shared id)
RENAMED: tuple[tuple[str, str, str], ...] = (
    ("low-bandwidth", "link-physical-fault", "ib-link-fault"),
    ("hang", "nccl-wrong-interface", "nccl-wrong-nic"),
    ("launch-failure", "nccl-init-config", "nccl-wrong-nic"),
    ("crash", "host-oom-kill", "host-oom"),
)


def _renames(runbook: str, old: str, new: str) -> tuple[str, ...]:
    walked = f"session_id IN (SELECT id FROM sessions WHERE runbook = '{runbook}')"
    return (
        f"UPDATE sessions SET conclusion = '{new}' "
        f"WHERE runbook = '{runbook}' AND conclusion = '{old}'",
        # an incident's conclusion is its latest walk's; the old ids were used by one runbook
        f"UPDATE incidents SET conclusion = '{new}' WHERE conclusion = '{old}'",
        f"UPDATE steps SET node = '{new}' WHERE node = '{old}' AND {walked}",
        f"UPDATE steps SET goto = '{new}' WHERE goto = '{old}' AND {walked}",
        f"UPDATE drills SET conclusion = '{new}' "
        f"WHERE runbook = '{runbook}' AND conclusion = '{old}'",
        f"UPDATE drills SET expected = '{new}' WHERE runbook = '{runbook}' AND expected = '{old}'",
    )


V12_STATEMENTS: tuple[str, ...] = tuple(s for r in RENAMED for s in _renames(*r))
