"""A stand-in for a command wedged in the kernel, for loopback hosts that plant a hang.

A hung probe is the host's fault only when something of it waits in the kernel (ps state D,
probes/hangstate.py): a sleeping stand-in (``sleep 30``) is what a slow probe looks like, and a
walk with a shortened --timeout rightly reads it as diag's side. This one is really blocked,
without root: it names itself (``prctl(PR_SET_NAME)``, so ps shows e.g. ``nvidia-smi``), then
``clone(CLONE_VM | CLONE_VFORK)``s a child that runs libc's ``pause`` on a stack of its own; the
parent waits for the vfork child in the kernel (TASK_KILLABLE, ps ``D``, wchan
``kernel_clone``) until the child dies. Killing the process group (what the SSH transport does
after a time-out) ends both. The child never runs Python code, so sharing the parent's memory is
safe.

Run as a script by the replay fleets' ForceCommand: ``python3 wedged.py [COMM]``.
"""

from __future__ import annotations

import ctypes
import mmap
import sys

PR_SET_NAME = 15
CLONE_VM, CLONE_VFORK, SIGCHLD = 0x100, 0x4000, 17


def wedge(comm: str) -> None:
    """Block in the kernel as *comm* until killed."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, ctypes.c_char_p(comm.encode()[:15]), 0, 0, 0)
    stack = mmap.mmap(-1, 64 * 1024)
    top = ctypes.addressof(ctypes.c_char.from_buffer(stack)) + len(stack) - 64
    libc.clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    pause = ctypes.cast(libc.pause, ctypes.c_void_p)
    if libc.clone(pause, ctypes.c_void_p(top), CLONE_VM | CLONE_VFORK | SIGCHLD, None) < 0:
        raise OSError(ctypes.get_errno(), "clone(CLONE_VFORK) failed")


if __name__ == "__main__":
    wedge(sys.argv[1] if len(sys.argv) > 1 else "diag-wedged")
