"""``dcgmi diag -r N`` (NVIDIA DCGM): the diagnostic's per-test, per-GPU results, table or ``-j``.

Both forms changed shape between DCGM majors, and a node's acceptance hangs on reading them right:

- table, 2.x/3.x: one row per test with "Pass - All", or split rows "Pass - GPUs: 1, 2" /
  "Fail - GPU: 0"; Warning / Error / Info rows follow a test, wrapped every 45 characters
  (DCGM cuts mid-word); no Metadata section before 3.x;
- table, 4.x: lowercase plugin names (software, memory, pcie, targeted_stress ...) with the
  test's own result, then one "GPU3: Pass" row per entity and "Warning: GPU3" rows;
- JSON, 2.x/3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [...]}}`` with ``gpu_ids`` /
  ``gpu_id`` per result (3.x adds top-level ``version`` and "Driver Version Detected");
- JSON, 4.x: ``{"DCGM Diagnostic": {...}, "entity_groups": [...], "metadata": {...}}`` with
  ``entity_id`` per result and a ``test_summary``; a failed start prints only ``runtime_error``.

What a result means is DCGM's, not the word printed: dcgmi 3.x prints every result other than
Pass / Skip as "Fail" (a 2.x/3.x Deployment check that can only warn is read as Warn), and 4.x
prints a GPU's Warn as "Fail" in entity rows and every JSON status (a GPU with no error of its own
under a failed test, or any GPU of a Warn test, is a Warn). A JSON ``runtime_error`` is
``run_error``: the diagnostic did not run or finish, which is no test's result.

_dcgmi_table.py and _dcgmi_json.py read the two forms; _dcgmi.py holds what they share (status
words, GPU ids named in messages, Warn read back from "Fail", the result's derived keys).
"""

from __future__ import annotations

from typing import Any

from . import _dcgmi_json, _dcgmi_table
from ._common import fail

WHAT = "dcgmi diag"


def parse(text: str) -> dict[str, Any]:
    """Table or JSON, whichever ``text`` is; anything else is refused."""
    document = _dcgmi_json.find_document(text)
    if document is not None:
        return _dcgmi_json.read(document)
    parsed = _dcgmi_table.read(text)
    if parsed is not None:
        return parsed
    said = _dcgmi_table.dcgmi_error_line(text)
    if said:
        fail(WHAT, f"no result table or JSON document; dcgmi said: {said}")
    fail(WHAT, "no \"| Diagnostic | Result |\" table rows and no dcgmi JSON document found")
