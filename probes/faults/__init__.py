"""The fault catalogue: what diag knows about faults, as data (docs/fault-format.md).

``load_faults()`` reads ``probes/faults/*.yaml`` (one family a file); ``apply.judge`` turns a
probe's facts and log lines into findings; ``stream_ere`` is the POSIX ERE a component greps
a log stream with on the host, so only lines some signature could want leave the node.
"""

from __future__ import annotations

from .catalogue import (
    FaultCatalogue,
    FaultCatalogueError,
    Signature,
    load_faults,
)

__all__ = ["FaultCatalogue", "FaultCatalogueError", "Signature", "load_faults", "stream_ere"]


def stream_ere(stream: str) -> str:
    """The ERE matching every line a log signature of *stream* (kernel, job) could want."""
    return load_faults().stream_ere(stream)
