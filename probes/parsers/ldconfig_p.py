"""``ldconfig -p``: the dynamic loader's cache, one ``name (flags) => path`` line per library.

Lines look like ``\\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1``; the
flags name the ABI (``libc6,x86-64``, ``libc6,AArch64``; a bare ``libc6`` is 32-bit x86), and
newer glibc adds ``, OS ABI: Linux 3.2.0`` or ``, hwcap: ...`` inside the parentheses. The
first line counts the cache (``1234 libs found in cache `/etc/ld.so.cache'``). Output cut by
``grep`` keeps only library lines, which is enough. The version of a driver library is in the
name of the file its ``.so.1`` link points at (libcuda.so.550.90.07), not in the cache, so
``version`` is read from the path when the path names one, else null.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, text_lines

WHAT = "ldconfig -p"

_LIB = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S.*?)\s*$")
_HEADER = re.compile(r"^\s*\d+ libs? found in cache")
_VERSION = re.compile(r"\.so\.(\d+(?:\.\d+)+)$")


def file_version(path: str | None) -> str | None:
    """The dotted version a library's file name ends with (libnccl.so.2.21.5 -> 2.21.5,
    libcuda.so.550.90.07 -> 550.90.07), None for libcuda.so.1 or libcuda.so."""
    m = _VERSION.search(path.strip()) if path else None
    return m.group(1) if m else None


def parse(text: str) -> dict[str, Any]:
    """``libs``: [{name, abi (the flags before any comma-separated extras, e.g.
    "libc6,x86-64"), path, version}], in cache order; ``cache_count`` from the header line."""
    libs: list[dict[str, Any]] = []
    count = None
    for raw in text_lines(text):
        if _HEADER.match(raw):
            count = int(raw.split()[0])
            continue
        m = _LIB.match(raw)
        if not m:
            continue
        flags = [f.strip() for f in m.group(2).split(",")]
        abi = ",".join(f for f in flags if f and ":" not in f)
        libs.append({"name": m.group(1), "abi": abi or None, "path": m.group(3),
                     "version": file_version(m.group(3))})
    if not libs and count is None:
        fail(WHAT, "no 'name (flags) => path' line and no 'libs found in cache' header")
    return {"libs": libs, "cache_count": count}
