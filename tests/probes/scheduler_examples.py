"""Minimal fault and healthy-twin examples of the scheduler family (probes/faults/scheduler.yaml).

Each replaces the ``nodes`` section (``sinfo -N -O ...``) of the baseline scheduler output
(fixtures/scenarios/_baseline/scheduler.txt): gpu003 carries the fault, or the twin that looks
like it and must not match. Shared by tests/probes/test_scheduler_faults.py and the scenario
builder (the same data is written out as YAML for the lead).
"""

from __future__ import annotations

HEADER = "NODELIST|PARTITION|STATECOMPLETE|GRES|GRES_USED|CPUS(A/I/O/T)|TIMESTAMP|USER|REASON|"
_HEALTHY = [
    "gpu001|gpu*|mixed|gpu:h100:8|gpu:h100:8(IDX:0-7)|1/7/0/8|Unknown|Unknown|none|",
    "gpu001|small|mixed|gpu:h100:8|gpu:h100:8(IDX:0-7)|1/7/0/8|Unknown|Unknown|none|",
    "gpu002|gpu*|mixed|gpu:h100:8|gpu:h100:8(IDX:0-7)|1/7/0/8|Unknown|Unknown|none|",
    "gpu002|small|mixed|gpu:h100:8|gpu:h100:8(IDX:0-7)|1/7/0/8|Unknown|Unknown|none|",
]
_LAST = "gpu004|gpu*|mixed|gpu:h100:8|gpu:h100:8(IDX:0-7)|1/7/0/8|Unknown|Unknown|none|"
_WHEN = "2026-11-30T08:57:47"


def nodes(gpu003: str) -> str:
    """The baseline's sinfo table with gpu003's row replaced by *gpu003* (STATE|...|REASON)."""
    return "\n".join([HEADER, *_HEALTHY, f"gpu003|gpu*|{gpu003}|", _LAST]) + "\n"


def row(state: str, reason: str, user: str = "root(0)", used: str = "gpu:h100:0(IDX:N/A)",
        cpus: str = "0/0/8/8") -> str:
    return f"{state}|gpu:h100:8|{used}|{cpus}|{_WHEN}|{user}|{reason}"


# signature -> (fault row, twin row) for gpu003
EXAMPLES: dict[str, tuple[str, str]] = {
    "slurm-node-not-responding": (
        row("idle*", "none", user="Unknown", cpus="0/8/0/8").replace(_WHEN, "Unknown"),
        row("idle~", "none", user="Unknown", cpus="0/8/0/8").replace(_WHEN, "Unknown")),
    "slurm-node-unexpected-reboot": (
        row("down", "Node unexpectedly rebooted", user="slurm(64030)"),
        row("idle+drain+reboot_requested", "Reboot ASAP", user="root(0)", cpus="0/8/0/8")),
    "slurm-kill-task-failed": (
        row("idle+drain", "Kill task failed"),
        row("completing", "none", user="Unknown", used="gpu:h100:8(IDX:0-7)",
            cpus="8/0/0/8").replace(_WHEN, "Unknown")),
    "slurm-gpu-missing": (
        row("idle+drain+invalid_reg", "gres/gpu count reported lower than configured (7 < 8)",
            user="slurm(64030)"),
        row("idle+drain+invalid_reg", "gres/gpu count reported lower than configured (0 < 8)",
            user="slurm(64030)")),
    "slurm-gpus-not-detected": (
        row("idle+drain+invalid_reg", "gres/gpu count reported lower than configured (0 < 8)",
            user="slurm(64030)"),
        row("idle+drain+invalid_reg", "gres/gpu count reported lower than configured (7 < 8)",
            user="slurm(64030)")),
    "slurm-prolog-epilog-failed": (
        row("idle+drain", "Prolog error", user="slurm(64030)"),
        row("idle+drain", "prolog script rewritten, testing on this node - jdoe")),
    "slurm-nhc-drain": (
        row("idle+drain", "NHC: check_fs_mount:  /lustre/datasets not mounted"),
        row("idle+drain", "NHC: check_hw_ib:  No IB port mlx5_3:1 is ACTIVE (LinkUp 400 Gb/sec).")),
    "slurm-low-realmemory": (
        row("idle+drain+invalid_reg",
            "Low RealMemory (reported:1982464 < 100.00% of configured:2063552)",
            user="slurm(64030)"),
        row("idle+drain", "memtest after DIMM swap - jdoe")),
    "slurm-low-cpus": (
        row("idle+drain+invalid_reg", "Low socket*core*thread count, Low CPUs",
            user="slurm(64030)"),
        row("idle+drain", "CPU microcode update pending - jdoe")),
}
