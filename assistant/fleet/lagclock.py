"""A time limit that counts only the time diag's own process was there to watch.

A login limit (TCP connect, SSH banner, key exchange) says "the host did not answer in N
seconds". That is only true if diag was running during those N seconds. A client busy with
its own work (parsing and checking a 512-host step holds Python's interpreter for seconds; a
login node loaded by other users) leaves the banner unread in its socket, and a healthy host
read as "no SSH banner in 10s" was the client's stall, not the node's silence. The watching
thread polls every ``poll_s``; a poll that came back a stall late (``STALL_S``) is time the
client was behind, and the limit is stretched by it, up to ``MAX_STRETCH`` times the limit in
all (a client that never catches up still ends). When the limit ends while the client was behind for
a large share of it, the reason says so, and the host's failure reads as diag's own (not
measured), never as the node being down.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# A poll that came back this long after the previous one is a stall of the client (its
# interpreter held by other work, the process stopped or starved), and the whole gap counts.
# Shorter gaps are a busy machine's scheduling (tens to hundreds of ms under load), which
# delays the reading of a banner by as much and no more: they count as waiting.
STALL_S = 0.5
# A limit is never stretched past this many times itself, whatever the client's lag.
MAX_STRETCH = 2.0
# A wait the stretch ended was "behind" when the client lost this share of it, and at least
# BEHIND_MIN_S: then a time-out says nothing about the host.
BEHIND_SHARE = 0.25
BEHIND_MIN_S = 1.0
# The words a failure's reason carries when the client was behind (read by
# CommandResult.connect_failed and assistant.runbook.hostfail).
CLIENT_BEHIND = "diag's client was behind"


class LagClock:
    """Elapsed time, and how much of it the polling thread spent not running."""

    def __init__(self, poll_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.poll_s = poll_s
        self._clock = clock
        self.start = self._last = clock()
        self.late = 0.0

    def tick(self) -> float:
        """Call after every poll; returns the time elapsed since the start."""
        now = self._clock()
        gap = now - self._last
        if gap >= STALL_S:
            self.late += gap - self.poll_s
        self._last = now
        return now - self.start

    @property
    def elapsed(self) -> float:
        return self._last - self.start

    def past(self, limit: float) -> bool:
        """Has *limit* of on-time waiting run out (or MAX_STRETCH times it in all)?"""
        return (self.elapsed - self.late > limit
                or self.elapsed > limit * MAX_STRETCH)

    def behind(self, limit: float) -> bool:
        """Did the stretch's end, not *limit* of on-time waiting, end the wait? Then diag did
        not watch the host for as long as it was given, and its silence is not measured."""
        return (self.elapsed - self.late <= limit and self.late >= BEHIND_MIN_S
                and self.late >= BEHIND_SHARE * self.elapsed)

    def note(self, limit: float) -> str:
        """What to add to a time-out's reason: empty unless the client was behind."""
        if not self.behind(limit):
            return ""
        return (f"; {CLIENT_BEHIND} by {self.late:.1f}s of {self.elapsed:.1f}s "
                "(busy or starved of CPU): diag's own, not the host's")
