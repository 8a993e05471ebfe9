"""``nvidia-smi -L``: the GPUs NVML can open, one ``GPU n: NAME (UUID: GPU-...)`` line each.

MIG devices follow their GPU as indented ``MIG 1g.20gb Device 0: (UUID: MIG-...)`` lines. When
NVML cannot start, nvidia-smi prints one of a few fixed messages instead, which name the fault
(the kernel module not loaded, a user-space library of another driver version than the loaded
module, no GPU the driver could bring up, a GPU that stopped answering); ``error_kind`` names
which, so checks and the fault catalogue compare words, not message text:

    driver-library-mismatch   Failed to initialize NVML: Driver/library version mismatch
                              (R535+ add "NVML library version: 570.124")
    driver-not-loaded         NVIDIA-SMI has failed because it couldn't communicate with the
                              NVIDIA driver. / Failed to initialize NVML: Driver Not Loaded
    no-devices                No devices were found
    gpu-lost                  Unable to determine the device handle for GPU ...: GPU is lost
    device-handle             Unable to determine the device handle for gpu ...: Unknown Error
                              (or Not Found, ...)
    nvml-unknown-error        Failed to initialize NVML: Unknown Error (typically a container
                              that lost access to /dev/nvidia*)
    insufficient-permissions  Failed to initialize NVML: Insufficient Permissions
    other                     another "Failed to initialize NVML: ..." message
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "nvidia-smi -L"

_GPU = re.compile(r"^GPU\s+(\d+):\s+(.*?)\s*\(UUID:\s*(GPU-[0-9A-Fa-f-]+)\)\s*$")
_MIG = re.compile(r"^\s*MIG\s+\S+\s+Device\s+\d+:\s*\(UUID:\s*(MIG-[0-9A-Za-z/-]+)\)")
_HANDLE = re.compile(r"Unable to determine the device handle for gpu\s*"
                     r"([0-9A-Fa-f]{0,8}:?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])?:?\s*(.*)$",
                     re.I)
_LIBRARY = re.compile(r"NVML library version:\s*([\d.]+)")
# nvidia-smi appends this warning to whatever it printed, and exits 14 ("infoROM is corrupted",
# nvidia-smi(1) RETURN VALUE): the GPU lines before it are valid.
_INFOROM = re.compile(r"WARNING: infoROM is corrupted at gpu\s*"
                      r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])", re.I)
_KINDS = (
    ("driver-library-mismatch", re.compile(r"Driver/library version mismatch", re.I)),
    ("driver-not-loaded", re.compile(r"couldn.t communicate with the NVIDIA driver"
                                     r"|Failed to initialize NVML: Driver Not Loaded", re.I)),
    ("no-devices", re.compile(r"^No devices were found", re.I)),
    ("gpu-lost", re.compile(r"Unable to determine the device handle.*GPU is lost", re.I)),
    ("device-handle", re.compile(r"Unable to determine the device handle", re.I)),
    ("insufficient-permissions", re.compile(r"Failed to initialize NVML: Insufficient Perm",
                                            re.I)),
    ("nvml-unknown-error", re.compile(r"Failed to initialize NVML: Unknown Error", re.I)),
    ("other", re.compile(r"Failed to initialize NVML|NVIDIA-SMI has failed", re.I)),
)


def error_kind(line: str) -> str | None:
    """The class of one nvidia-smi error line (see the module doc), or None."""
    return next((kind for kind, pattern in _KINDS if pattern.search(line)), None)


def parse(text: str) -> dict[str, Any]:
    """``gpus`` [{index, name, uuid, mig_devices}], ``error`` (the first error line),
    ``error_kind``, ``errors`` (every error line), ``lost_bus_ids`` (GPUs without a handle),
    ``nvml_library_version`` (from the mismatch message, else None), ``inforom_corrupted``
    (bus ids of "WARNING: infoROM is corrupted at gpu ..." lines)."""
    gpus: list[dict[str, Any]] = []
    errors: list[str] = []
    kinds: list[str] = []
    lost: list[str] = []
    library = None
    inforom: list[str] = []
    for raw in text_lines(text):
        line = strip_prefix(raw).rstrip()
        if not line.strip():
            continue
        if m := _GPU.match(line.strip()):
            gpus.append({"index": int(m.group(1)), "name": m.group(2).strip() or None,
                         "uuid": m.group(3), "mig_devices": 0})
            continue
        if _MIG.match(line) and gpus:
            gpus[-1]["mig_devices"] += 1
            continue
        if m := _LIBRARY.search(line):
            library = m.group(1)
            continue
        if m := _INFOROM.search(line):
            inforom.append(m.group(1))
            continue
        kind = error_kind(line)
        if kind is None:
            # -L prints nothing else; a GPU line inside other output (nvidia-smi nvlink -s,
            # gpu_burn's banner) is not this command's output
            fail(WHAT, f"unexpected line {line.strip()[:60]!r}")
        errors.append(line.strip()[:300])
        kinds.append(kind)
        if (m := _HANDLE.search(line)) and m.group(1):
            lost.append(m.group(1))
    if not gpus and not errors and not inforom:
        fail(WHAT, "no 'GPU n: ... (UUID: GPU-...)' line and no nvidia-smi error message")
    return {
        "gpus": gpus,
        "error": errors[0] if errors else None,
        "error_kind": kinds[0] if kinds else None,
        "errors": errors[:16],
        "lost_bus_ids": lost,
        "nvml_library_version": library,
        "inforom_corrupted": inforom,
    }
