"""``/proc/driver/nvidia/version``: the loaded kernel module's version and flavour.

This is the module actually running, which can differ from the userspace nvidia-smi after an
upgrade without reboot ("Driver/library version mismatch"). The open and proprietary kernel
modules behave differently (e.g. GSP firmware), hence ``open_kernel_module``.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "/proc/driver/nvidia/version"

_NVRM = re.compile(r"NVRM version:\s*")
_VERSION = re.compile(r"\s(\d+\.\d+(?:\.\d+)*)(?=\s|$)")
_GCC = re.compile(r"GCC version:\s*(?:gcc version\s+)?(\S+)")
_ARCH = re.compile(r"\b(x86_64|aarch64|ppc64le|arm64)\b")


def parse(text: str) -> dict[str, Any]:
    """Driver version, open/proprietary flavour, architecture and compiler."""
    module: tuple[str, str, str] | None = None  # (description, version, build)
    gcc = None
    for raw in text_lines(text):
        line = strip_prefix(raw)
        gcc = gcc or _GCC.search(line)
        nvrm = _NVRM.search(line)
        if module or not nvrm:
            continue
        rest = line[nvrm.end() :]
        kernel_module = rest.find("Kernel Module")
        version = _VERSION.search(rest, kernel_module) if kernel_module >= 0 else None
        if version:
            module = (rest[: version.start()], version.group(1), rest[version.end() :])
    if module is None:
        fail(WHAT, "no 'NVRM version: ... Kernel Module <version>' line found")
    desc, version_text, build = module
    arch = _ARCH.search(desc)
    return {
        "driver_version": version_text,
        "open_kernel_module": "Open Kernel Module" in desc,
        "architecture": arch.group(1) if arch else None,
        "build": build.strip() or None,
        "gcc_version": gcc.group(1) if gcc else None,
    }
