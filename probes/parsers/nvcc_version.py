"""``nvcc --version``: the CUDA toolkit a job compiles against (not the driver's CUDA).

``cuda_version`` is the short release ("12.2") that matches nvidia-smi's "CUDA Version" so the
two can be compared; the full build number ("12.2.140") is kept as ``cuda_build``.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail

WHAT = "nvcc --version"

_SIGNATURE = re.compile(r"Cuda compilation tools|nvcc: NVIDIA \(R\) Cuda compiler")
_RELEASE = re.compile(r"release\s+(\d+\.\d+)\s*,\s*V(\d+(?:\.\d+)*)")
_BUILT = re.compile(r"Built on\s+(\S+)")
_BUILD = re.compile(r"^\s*Build\s+(\S+)", re.MULTILINE)


def parse(text: str) -> dict[str, Any]:
    """Short and full toolkit version, build date and build id."""
    if not _SIGNATURE.search(text):
        fail(WHAT, "no 'Cuda compilation tools' / 'nvcc: NVIDIA (R) Cuda compiler' line found")
    release = _RELEASE.search(text)
    built = _BUILT.search(text)
    build = _BUILD.search(text)
    return {
        "cuda_version": release.group(1) if release else None,
        "cuda_build": release.group(2) if release else None,
        "built_on": built.group(1) if built else None,
        "build": build.group(1) if build else None,
    }
