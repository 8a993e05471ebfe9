"""The walk's raw outputs are kept compressed (issue 28: memory per host) and read back exactly
as they were given, by every reader that took them for a dict."""

from __future__ import annotations

import pickle

from assistant.runbook.outputs import Outputs

# what a host can print: per-GPU blocks that repeat, non-ASCII, an undecodable byte the
# transport kept as a lone surrogate, nothing at all
SMI = "".join(f"GPU 00000000:{i:02X}:00.0\n    Temp : 41 C\n    Power : 70.00 W\n"
              for i in range(8))
TEXTS = {("gpu", "node01"): SMI, ("kernel", "node01"): "Xid (PCI:0000:01:00): 79 – äöü\n",
         ("logs", "node02"): "bad byte: \udcff\n", ("versions", "node02"): ""}


def test_outputs_read_back_exactly_and_smaller() -> None:
    outputs = Outputs(TEXTS)
    assert dict(outputs) == TEXTS
    assert outputs.get(("gpu", "node01")) == SMI and ("gpu", "node09") not in outputs
    assert outputs.get(("gpu", "node09")) is None
    assert outputs.packed_bytes() < len(SMI) / 3  # the repeating blocks compress


def test_a_snapshot_is_not_changed_by_later_outputs() -> None:
    outputs = Outputs(TEXTS)
    shot = outputs.snapshot()
    outputs[("nvlink", "node03")] = "Link 0: 26.562 GB/s\n"
    del outputs[("gpu", "node01")]
    assert dict(shot) == TEXTS
    assert len(outputs) == len(TEXTS)


def test_packed_outputs_cross_a_pipe_as_they_are() -> None:
    worker = Outputs(TEXTS)
    sent = pickle.loads(pickle.dumps(worker.packed("gpu")))
    assert set(sent) == {("gpu", "node01")}
    assert all(isinstance(v, bytes) for v in sent.values())
    caller = Outputs()
    caller.add_packed(sent)
    worker.clear()
    assert dict(caller) == {("gpu", "node01"): SMI} and not worker


def test_freed_memory_is_handed_back_on_glibc() -> None:
    import platform
    import sys

    from assistant.runbook.memtrim import release_freed_memory

    on_glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert release_freed_memory() is on_glibc
