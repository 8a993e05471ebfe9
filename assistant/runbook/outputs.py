"""Each host's raw output of each probe, kept compressed for as long as the walk lasts.

Why: the walk keeps every host's bounded output (``RAW_OUTPUT_LIMIT``) so the recorder can
write it with its step and the TUI can show it beside a finding. At fleet scale that was the
largest thing a walk held: an in-memory ``hang`` walk kept ~88 KB of text per host (the sweep's
components and five probes) out of ~225 KB per host in all, where 10,000 hosts must fit in
1.5 GB (issue 28). Probe output is line-oriented text that repeats itself (per-GPU and
per-port blocks): zlib at level 1 keeps ~11 % of it for ~40 us per 12 KB output, and an output
is read back only when it is recorded or looked at.

A ``MutableMapping`` of (probe, host) -> text, so every reader (the recorder, the raw-output
screen, the probe worker) reads it as the plain dict it replaced; ``packed`` / ``add_packed``
move the compressed bytes across the probe worker's pipe without a round trip through text,
and ``snapshot`` copies it without decompressing.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Mapping, MutableMapping

Key = tuple[str, str]  # (probe, host)
LEVEL = 1  # zlib level: ~11 % of the text at ~40 us per 12 KB (level 6: ~9 % at ~75 us)


def _pack(text: str) -> bytes:
    # surrogatepass: any str round-trips, including undecodable bytes a transport kept as
    # lone surrogates
    return zlib.compress(text.encode("utf-8", "surrogatepass"), LEVEL)


def _unpack(data: bytes) -> str:
    return zlib.decompress(data).decode("utf-8", "surrogatepass")


class Outputs(MutableMapping[Key, str]):
    """(probe, host) -> raw output, held compressed."""

    def __init__(self, items: Mapping[Key, str] | Iterable[tuple[Key, str]] = ()) -> None:
        self._packed: dict[Key, bytes] = {}
        self.update(items)

    def __getitem__(self, key: Key) -> str:
        return _unpack(self._packed[key])

    def __setitem__(self, key: Key, text: str) -> None:
        self._packed[key] = _pack(text)

    def __delitem__(self, key: Key) -> None:
        del self._packed[key]

    def __contains__(self, key: object) -> bool:
        return key in self._packed

    def __iter__(self) -> Iterator[Key]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)

    def clear(self) -> None:
        self._packed.clear()

    def __repr__(self) -> str:
        return f"Outputs({len(self)} outputs, {self.packed_bytes()} bytes packed)"

    def packed(self, probe: str | None = None) -> dict[Key, bytes]:
        """The compressed outputs (of *probe* only, when given), for another process."""
        return {k: v for k, v in self._packed.items() if probe is None or k[0] == probe}

    def add_packed(self, packed: Mapping[Key, bytes]) -> None:
        """Outputs another ``Outputs`` packed (the probe worker's), taken as they are."""
        self._packed.update(packed)

    def snapshot(self) -> Outputs:
        """A copy that later additions do not change (the bytes are shared, not unpacked)."""
        copy = Outputs()
        copy._packed = dict(self._packed)
        return copy

    def packed_bytes(self) -> int:
        return sum(len(v) for v in self._packed.values())
