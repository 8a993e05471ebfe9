"""The ``nvidia-smi -q`` walker reads "KEY : VALUE" without its regular expression (a parse's
hot loop); the expression stays the definition, and this holds the two to the same answer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.parsers.nvidia_smi_q import _KV, _split

PIECES = st.sampled_from([" ", "  ", ":", " : ", "\t", "=", "a", "B7", "N/A", "\u00a0", "GPU",
                          "Memory Used", "MiB"])


def _by_regex(line: str) -> tuple[str, str] | None:
    m = _KV.match(line)
    return (m.group("key").strip(), m.group("value").strip()) if m else None


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=10).map("".join))
def test_split_is_the_regex(text: str) -> None:
    line = text.strip()
    assert _split(line) == _by_regex(line)


def test_split_reads_the_reports_layouts() -> None:
    assert _split("Product Name : NVIDIA H100 80GB HBM3") == ("Product Name",
                                                             "NVIDIA H100 80GB HBM3")
    assert _split("Pending :") == ("Pending", "")
    assert _split("Timestamp : Mon Dec  8 00:20:35 2026") == ("Timestamp",
                                                             "Mon Dec  8 00:20:35 2026")
    assert _split("Clocks Event Reasons") is None
    assert _split("Key: : value") == ("Key:", "value")  # the regex's key may end at the colon
