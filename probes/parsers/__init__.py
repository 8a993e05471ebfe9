"""Parsers that turn saved command output into facts (see docs/parse-contract.md).

Every parser is a pure ``text -> dict`` function so that a probe's live output, an operator's
paste and a recorded fixture all go through the same code. ``parse`` is the only entry point
callers need: it guarantees that garbled or foreign input surfaces as a ``ParseError`` with a
one-line message, never as a traceback from deep inside a regex or JSON decoder.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["KINDS", "ParseError", "module_name", "parse"]


class ParseError(ValueError):
    """Raised when text is not the output of the tool a KIND names, or cannot be read as such.

    The message is a single line because the CLI prints it verbatim on stderr next to a host name.
    """

    def __init__(self, message: str) -> None:
        one_line = " ".join(str(message).split())
        if len(one_line) > 300:
            one_line = one_line[:297] + "..."
        super().__init__(one_line)


# Contract spelling, in the order of the contract table.
KINDS: tuple[str, ...] = (
    "nvidia-smi-topo",
    "nvidia-smi",
    "nvidia-smi-q",
    "nvidia-smi-query",
    "nvidia-smi-nvlink",
    "ibstat",
    "ibv_devinfo",
    "ibdev2netdev",
    "ethtool-S",
    "ib-sysfs-counters",
    "perfquery",
    "rdma-statistic",
    "nccl-tests",
    "nccl-debug",
    "dmesg-xid",
    "dmesg-link",
    "ib-hw-counters",
    "cuda-oom",
    "fio-json",
    "ioping",
    "dd",
    "netstat-s",
    "nstat",
    "uname-r",
    "proc-driver-nvidia-version",
    "nvcc-version",
    "ofed-info",
    "dcgmi-diag",
    "ib-write-bw",
    "ib-write-lat",
    "nvbandwidth",
    "gpu-burn",
    "rank-logs",
    "sinfo",
    "squeue",
    "scontrol-job",
    # the evidence sweep's components (probes/sweep.py)
    "systemctl-show",
    "nvidia-smi-fabric",
    "nvidia-smi-L",
    "ldconfig-p",
    "mlnx-qos",
    "show-gids",
    "ethtool-a",
    "dcb",
    "kernel-log",
    "proc-limits",
    "proc-mountinfo",
    "proc-pressure",
)


def module_name(kind: str) -> str:
    """Module holding a KIND's parser; kinds use dashes, Python modules cannot."""
    return kind.replace("-", "_")


def parse(kind: str, text: str) -> dict[str, Any]:
    """Parse ``text`` as the output named by ``kind``.

    Modules are imported lazily so a probe that needs one parser does not pay for 25, and a bug
    in one module cannot break the others at import time.
    """
    if kind not in KINDS:
        raise ParseError(f"unknown kind {kind!r}; known kinds: {', '.join(KINDS)}")
    if not isinstance(text, str):
        raise ParseError(f"{kind}: expected text (str), got {type(text).__name__}")
    try:
        module = importlib.import_module(f"{__name__}.{module_name(kind)}")
        result = module.parse(text)
    except ParseError:
        raise
    except Exception as exc:  # a parser must never leak anything but ParseError
        raise ParseError(f"{kind}: cannot parse output ({type(exc).__name__}: {exc})") from exc
    if not isinstance(result, dict):
        raise ParseError(f"{kind}: parser returned {type(result).__name__}, not a dict")
    return result
