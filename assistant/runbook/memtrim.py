"""Hand the memory a finished step freed back to the operating system (glibc's malloc_trim).

Why: each step's outputs arrive as text (tens of KB per host), are parsed, and are freed once
the step's outcome holds their facts and the walk its compressed copy (``outputs``). Those
blocks are larger than Python's small-object allocator serves, so they come from glibc's
malloc, which keeps freed memory inside its heaps for reuse instead of returning it: after an
in-memory hang walk over 1,000 hosts the process held 239 MB resident, 182 MB after
``malloc_trim(0)`` (190 -> 133 KB per host; ``bench/walkmem.py``). The freed memory is reused
by the next step either way; trimming matters at fleet scale, where the walk's peak decides
whether 10,000 hosts fit (issue 28: 1.5 GB). Dask's workers do the same for the same reason
(distributed docs, "Memory not released back to the OS").

A no-op where the C library has no ``malloc_trim`` (musl, macOS): only glibc keeps memory so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from collections.abc import Callable


@functools.cache
def _trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, looked up once; None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def release_freed_memory() -> bool:
    """Return glibc's free heap memory to the system; False where that cannot be done."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
