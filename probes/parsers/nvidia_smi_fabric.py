"""The ``Fabric`` block of ``nvidia-smi -q``: each GPU's registration with the NVLink fabric.

On NVSwitch systems from Hopper on, a GPU registers with the fabric (the fabric manager, or the
NVLink switch trays' NVOS on GB200) before CUDA may use it; until then CUDA fails with
cudaErrorSystemNotReady. nvidia-smi shows it per GPU, indented under the GPU's block::

    GPU 00000000:19:00.0
        ...
        Fabric
            State                             : Completed       (Not Supported / Not Started /
            Status                            : Success          In Progress / Completed)
            CliqueId                          : 0               (R550 on)
            ClusterUUID                       : 00000000-...    (R550 on)
            Health                                              (R560 on)
                Bandwidth                     : Full
                Summary                       : Healthy         (R570 on)

R535 prints State and Status only; GPUs that are not on an NVSwitch fabric print ``N/A``.

The same report says what the driver wants done to a GPU, higher up in its block, and the
services component keeps those lines with the Fabric blocks::

        GPU Reset Status                                (R535-R565: Yes / No; R570 on
            Reset Required                    : No       "Requested functionality has been
            Drain and Reset Recommended       : No       deprecated")
        GPU Recovery Action                   : None    (R565 on: None, Reset, Reboot,
                                                         Drain P2P, Drain and Reset)

Accepted: the full report, the report cut down to the GPU lines and the Fabric blocks, and
``grep -A/-C`` excerpts (``--`` separators, no GPU line). ``N/A`` values are null.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, none_if_na, text_lines, to_int, yes_no

WHAT = "nvidia-smi -q (Fabric)"

_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_FABRIC = re.compile(r"^(\s*)Fabric\s*$")
_KV = re.compile(r"^(\s*)([^:]*?\S)\s+:\s?(.*)$")
_RESET_STATUS = re.compile(r"^(\s*)GPU Reset Status\s*$")
_RECOVERY = re.compile(r"^\s*GPU Recovery Action\s+:\s?(.*)$")
_RESET_KEYS = {"Reset Required": "reset_required",
               "Drain and Reset Recommended": "drain_and_reset_recommended"}
_KEYS = {
    ("State",): "state", ("Status",): "status", ("CliqueId",): "clique_id",
    ("ClusterUUID",): "cluster_uuid", ("Health", "Summary"): "health_summary",
    ("Health", "Bandwidth"): "health_bandwidth",
}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def parse(text: str) -> dict[str, Any]:
    """``gpus``: one entry per Fabric block {bus_id (from the GPU line above it, else null),
    state, status, clique_id (int), cluster_uuid, health_summary, health_bandwidth};
    ``recovery``: one entry per GPU that printed a recovery action or a reset status
    {bus_id, action (null for N/A), reset_required, drain_and_reset_recommended (true / false,
    null when not printed or "deprecated")};
    ``gpu_lines``: how many ``GPU <bus id>`` lines the text had (a report from a driver that
    prints no Fabric block has GPU lines and no entry)."""
    gpus: list[dict[str, Any]] = []
    recovery: list[dict[str, Any]] = []
    bus: str | None = None
    gpu_lines = 0
    block: dict[str, Any] | None = None
    base = 0
    stack: list[tuple[int, str]] = []
    reset_at: int | None = None  # indent of the "GPU Reset Status" line being read

    def recovery_of(bus_id: str | None) -> dict[str, Any]:
        if not recovery or recovery[-1]["bus_id"] != bus_id:
            recovery.append({"bus_id": bus_id, "action": None, "reset_required": None,
                             "drain_and_reset_recommended": None})
        return recovery[-1]

    for raw in text_lines(text):
        line = raw.rstrip()
        if not line.strip():
            continue
        if m := _GPU.match(line):
            bus, block, gpu_lines, reset_at = m.group(1), None, gpu_lines + 1, None
            continue
        if reset_at is not None and _indent(line) <= reset_at:
            reset_at = None
        if m := _RESET_STATUS.match(line):
            recovery_of(bus)
            reset_at, block = len(m.group(1)), None
            continue
        if reset_at is not None:
            kv = _KV.match(line)
            if kv and kv.group(2).strip() in _RESET_KEYS:
                recovery_of(bus)[_RESET_KEYS[kv.group(2).strip()]] = yes_no(kv.group(3))
            continue
        if m := _RECOVERY.match(line):
            recovery_of(bus)["action"] = none_if_na(m.group(1).strip())
            block = None
            continue
        if m := _FABRIC.match(line):
            block = {"bus_id": bus, "state": None, "status": None, "clique_id": None,
                     "cluster_uuid": None, "health_summary": None, "health_bandwidth": None}
            gpus.append(block)
            base, stack = len(m.group(1)), []
            continue
        if block is None:
            continue
        indent = _indent(line)
        if indent <= base or line.strip() == "--":
            block = None
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        kv = _KV.match(line)
        key = kv.group(2).strip() if kv else line.strip()
        if kv:
            field = _KEYS.get((*(name for _, name in stack), key))
            if field:
                value = none_if_na(kv.group(3))
                block[field] = to_int(value) if field == "clique_id" else value
        else:
            stack.append((indent, key))
    if not gpus and not recovery and not gpu_lines:
        fail(WHAT, "no 'Fabric' block and no 'GPU <bus id>' line")
    if not gpus and not recovery and "NVSMI LOG" not in text and "Attached GPUs" not in text:
        fail(WHAT, "GPU lines but neither a Fabric block nor the nvidia-smi -q banner")
    return {"gpus": gpus, "recovery": recovery, "gpu_lines": gpu_lines}
