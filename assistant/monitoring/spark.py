"""A signal over the window as one line of block characters (a sparkline), for the TUI's
finding pane and any text front end: gaps (no sample) are spaces, the scale is the series' own."""

from __future__ import annotations

from collections.abc import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None]) -> str:
    seen = [v for v in values if v is not None]
    if not seen:
        return ""
    low, high = min(seen), max(seen)
    span = (high - low) or 1.0
    return "".join(" " if v is None else BLOCKS[int((v - low) / span * (len(BLOCKS) - 1))]
                   for v in values)
