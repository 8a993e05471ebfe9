"""What a command still running at its time limit was doing: blocked, or only slow.

A time-out alone cannot tell a wedged driver from a busy host. The evidence sweep prints the
state of each process of a component it ends (probes/sweep.py, ``ps``: pid, state, kernel
wait channel, command). A process in a *blocked* state (``sweep_blocked_states``: D,
uninterruptible sleep) waits inside the kernel for a device or a mount, and waiting longer
never ends it: that is the hang the catalog names (gpu-driver-hung, filesystem-hung). With
none blocked, on a host whose CPUs the same sweep measured saturated, the command was slow,
not stuck; calling that host's GPU driver hung would be diag's own limit read as the host's
fault, so it is "not measured" (also where ps printed nothing there). On a host with CPUs to
spare, a command that did not finish reads as it always has: a hang.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Verdict = Literal["blocked", "starved", "unknown"]


@dataclass(frozen=True)
class Process:
    """One process of a timed-out command, as ps printed it."""

    pid: int
    state: str
    wchan: str
    command: str

    def words(self) -> str:
        where = f" in {self.wchan}" if self.wchan not in ("", "-") else ""
        return f"{self.command} (pid {self.pid}, state {self.state}{where})"


def processes(rows: Sequence[str]) -> list[Process]:
    """The rows "PID STAT WCHAN COMM..." read back; a row that is not one is skipped."""
    read = []
    for row in rows:
        fields = row.split(None, 3)
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        if len(fields) == 3:  # no wait channel column (ps printed an empty one)
            fields = [fields[0], fields[1], "-", fields[2]]
        read.append(Process(int(fields[0]), fields[1], fields[2], fields[3]))
    return read


def judge(rows: Sequence[str], blocked_states: Collection[str],
          host_saturated: bool) -> tuple[Verdict, list[Process]]:
    """("blocked", the blocked processes) when any waits in the kernel; ("starved", all of
    them) when none does on a host whose CPUs were saturated (also when ps printed nothing:
    there, slow and stuck cannot be told apart, and no verdict beats a wrong one); else
    ("unknown", [])."""
    seen = processes(rows)
    blocked = [p for p in seen if p.state[:1] in blocked_states]
    if blocked:
        return "blocked", blocked
    if host_saturated:
        return "starved", seen
    return "unknown", []


def facts(verdict: Verdict, shown: Sequence[Process], rows: Sequence[str]) -> dict[str, Any]:
    """What a timed-out component's result keeps (recorded with the walk)."""
    return {"processes": list(rows), "hang_verdict": verdict,
            "hang_processes": [p.words() for p in shown]}
