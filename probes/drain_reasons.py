"""What a Slurm drain reason says about the node: was it drained for a hardware fault?

A node drained for an XID, an ECC error, row remapping, a GPU gone from the bus or a link fault
must not be resumed because diag's *passive* checks (nvidia-smi, ibstat, counters read while the
node idles) look clean now: those faults hide at idle and come back under load. DCGM's own docs
draw the line: health monitoring "evaluates telemetry collected during ordinary operation", while
a long, administrator-led diagnostic (dcgmi diag -r 3) is what runs "before returning a node to
service" (DCGM user guide, Diagnostics). So such nodes go to acceptance validation first.

The words are those health checkers write into the reason: LBNL NHC's and azurehpc-health-
checks' check names (check_hw_ib, check_gpu_xid, check_gpu_ecc, check_ib_link_flapping,
check_gpu_count, check_hw_mcelog, check_hw_physmem), DCGM health-watch systems (PCIe, NVLink,
memory), and operators' own notes ("XID 79", "DBE", "row remap failed", "mlx5_2 down").
"""

from __future__ import annotations

import re

# kind -> pattern, the first that matches names the fault (case-insensitive).
HARDWARE_DRAIN: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in (
        ("XID", r"\bxid\b|check_gpu_xid|fallen off the bus|fell off the bus|\bgpu (?:is )?lost"),
        ("row remap", r"row.?remap|remapp(?:ed|ing) rows?"),
        ("ECC", r"\becc\b|\bdbe\b|\bsbe\b|uncorrectable|check_gpu_ecc|retired pages?|"
                r"page retire"),
        # Slurm gres.c: "gres/gpu count reported lower than configured (7 < 8)", "gres/gpu count
        # too low (7 < 8)", typed "gres/gpu:h100 count too low (7 < 8)" (20.11-24.11)
        ("GPU missing", r"gres/gpu(?::\S+)? count|gpu_count|gpu count|"
                        r"expected \d+ gpus?, found \d+"),
        # LBNL NHC scripts/lbnl_hw.nhc check_hw_mcelog: "MCEs detected - N UNcorrected memory
        # errors detected (limit of 0/day)", "... corrected memory errors detected (limit of
        # 9/day)" (its per-DIMM 24-hour rates), "MCEs detected in log."; operators' "MCE" and
        # "machine check" notes, EDAC's DIMM errors
        ("MCE", r"check_hw_mcelog|\bmces?\b|machine.?check|\bedac\b|"
                r"\b(?:un)?corrected memory errors?\b"),
        # NHC check_hw_physmem / check_hw_mem: "Actual RAM size (N kB) less than minimum
        # allowed (M kB)." - a DIMM gone or mapped out ("greater than maximum" is not)
        ("memory missing", r"check_hw_(?:phys)?mem:\s+Actual (?:RAM size|system memory) "
                           r"\(\d+ kB\) less than"),
        ("link", r"check_hw_ib|check_ib_|\binfiniband\b|\bib (?:port|link)\b|\bnvlink\b|"
                 r"\bmlx\d_\d+\b|\bhca\b|link ?(?:flap|down|errors?)|symbol.?errors?|"
                 r"\bport\b.*\b(?:down|polling|init\w*|not active)\b"),
    ))


# Slurm's "gres/gpu count reported lower than configured (0 < 8)" or "gres/gpu count too low
# (0 < 8)" (gres.c): slurmd saw no GPU at all, which is the driver or the configuration
# (slurm-gpus-not-detected), not a part to replace.
_NONE_FOUND = re.compile(r"(?:lower than configured|count too low) \(0 <|found 0\b",
                         re.IGNORECASE)


def hardware_fault(reason: str | None) -> str | None:
    """The hardware fault a drain reason names ("XID", "ECC", "row remap", "GPU missing",
    "MCE", "memory missing", "link"), or None for any other reason (Kill task failed, Not
    responding, a prolog error, an admin's maintenance note)."""
    if not reason:
        return None
    for kind, pattern in HARDWARE_DRAIN:
        if pattern.search(reason):
            if kind == "GPU missing" and _NONE_FOUND.search(reason):
                return None
            return kind
    return None
