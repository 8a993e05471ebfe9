"""What a command still running at its time limit was doing: blocked, or only slow.

A time-out alone cannot tell a wedged driver from a busy host, or from diag's own delay. So
before a command is ended its processes are asked of ps (pid, state, seconds run, kernel wait
channel, command): the evidence sweep does it on the host for each component it ends
(probes/sweep.py), the SSH transport over the same connection for a step's command that diag's
time-out ends (assistant/fleet/ssh.py).

- ps is asked twice, a second apart (``AGAIN`` between the two looks). A process in a
  *blocked* state (``sweep_blocked_states``: D, uninterruptible sleep) at both looks waits in
  the kernel for a device or a mount, and no wait ends it: the hang the catalog names
  (gpu-driver-hung, filesystem-hung). One look is not enough: a healthy process reading a busy
  disk, or paging its own binary in on a loaded host, is in D for milliseconds at a time (the
  kernel's own hung-task detector waits ``kernel.hung_task_timeout_secs``, 120 s, before it
  calls one hung). A process blocked at the first look and not at the second, or a command
  that started a process between the looks, was moving: "not measured", slow and not stuck
  (one that only ended proves nothing: diag's remote time limit may have ended it). Rows
  without a second look (recorded before it was taken) are read as one look, as then.
- None blocked and one runnable (R: waiting for a CPU) on a host whose CPUs the sweep measured
  saturated: slow, not stuck ("starved"), also where ps printed nothing there: "not measured",
  never a hang verdict. Asleep (S) it waits for something other than a CPU, which saturation
  does not explain.
- None blocked, and the command had run on the host for under half the time diag allowed it
  ("late": diag or the session was slow to start it): "not measured".
- Otherwise (a quiet host, the command given its time): a hang, as before.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Verdict = Literal["blocked", "moving", "starved", "late", "short", "unknown"]
# Verdicts under which a command that did not finish says nothing about the host.
NOT_MEASURED: frozenset[str] = frozenset({"moving", "starved", "late", "short"})
# The row between ps's first look at a timed-out command's processes and its second.
AGAIN = "--- again"
AGAIN_AFTER_S = 1  # the second look's delay: a process blocked for both is not one disk read


@dataclass(frozen=True)
class Process:
    """One process of a timed-out command, as ps printed it."""

    pid: int
    state: str
    elapsed_s: int
    wchan: str
    command: str

    def words(self) -> str:
        where = f" in {self.wchan}" if self.wchan not in ("", "-") else ""
        return f"{self.command} (pid {self.pid}, state {self.state}{where}, {self.elapsed_s} s)"


def blocked_states(thresholds: Mapping[str, Any]) -> tuple[str, ...]:
    """The process states that mean "blocked in the kernel" (probes/thresholds.yaml,
    ``sweep_blocked_states``, where its source is written)."""
    return tuple(thresholds.get("sweep_blocked_states", ("D",)))


def given_s(reason: str) -> float | None:
    """The time diag gave a command, as its transport said it ("did not finish in 30s")."""
    said = re.search(r"in ([0-9.]+)s\b", reason or "")
    return float(said.group(1)) if said else None


def processes(rows: Sequence[str]) -> list[Process]:
    """The rows "PID STAT ELAPSED WCHAN COMM..." read back; a row that is not one is
    skipped (ps prints "-" for an empty wait channel, so every column is there)."""
    read = []
    for row in rows:
        fields = row.split(None, 4)
        if len(fields) < 5 or not fields[0].isdigit() or not fields[2].isdigit():
            continue
        read.append(Process(int(fields[0]), fields[1], int(fields[2]), fields[3], fields[4]))
    return read


def looks(rows: Sequence[str]) -> tuple[list[Process], list[Process] | None]:
    """ps's first look and its second (None when the rows hold one look)."""
    if AGAIN not in rows:
        return processes(rows), None
    cut = list(rows).index(AGAIN)
    return processes(rows[:cut]), processes(rows[cut + 1:])


def judge(rows: Sequence[str], blocked_states: Collection[str], host_saturated: bool,
          given_s: float | None = None, needs_s: float | None = None
          ) -> tuple[Verdict, list[Process]]:
    """("blocked", the blocked processes) when any waits in the kernel at both looks (or at
    the one look of older rows); ("moving", what changed) when the two looks differ (a
    process left the kernel's wait, ended or started); ("starved", the
    runnable ones) when one waits for a CPU on a host whose CPUs were saturated (also when ps
    printed nothing there: slow and stuck cannot be told apart, and no verdict beats a wrong
    one); ("late",
    all of them) when diag's limit ran on diag's side (*given_s*) and the command had run on
    the host for less than half of it (the session or diag was slow to start it: the host
    never had its time); else ("unknown", [])."""
    first, second = looks(rows)
    was_blocked = [p for p in first if p.state[:1] in blocked_states]
    if second is None:
        seen = first
        if was_blocked:
            return "blocked", was_blocked
    else:
        seen = second
        still = {p.pid for p in second if p.state[:1] in blocked_states}
        blocked = [p for p in was_blocked if p.pid in still]
        if blocked:
            return "blocked", blocked
        # a process gone at the second look proves nothing alone (the remote time limit may
        # have ended it); one that left the kernel's wait, or one that started, is progress
        started = {p.pid for p in second} - {p.pid for p in first}
        if was_blocked or (first and started):
            return "moving", was_blocked or [p for p in second if p.pid in started]
    # CPU saturation explains a command that waits for a CPU (R), not one asleep waiting for
    # something else (S: a timer, a pipe, a device that does not answer)
    runnable = [p for p in seen if p.state[:1] == "R"]
    if host_saturated and (runnable or not seen):
        return "starved", runnable
    # ps's elapsed is whole seconds, cut down: one more is what it may have run
    if given_s and seen and max(p.elapsed_s for p in seen) + 1 < given_s / 2:
        return "late", seen
    # the operator's --timeout / --deadline cut the command below the time diag's own data
    # gives it (*needs_s*: the probe's time-out, the sweep's limit): it may not have been done
    # yet, so the time-out is diag's (a two-sample probe sleeps between its samples)
    if given_s and needs_s and given_s < needs_s:
        return "short", seen
    return "unknown", []


def explain(verdict: Verdict, shown: Sequence[Process], host: str,
            given_s: float | None = None) -> str:
    """The words a timed-out command's reason gains from its verdict ("" for unknown)."""
    said = "; ".join(p.words() for p in shown[:4]) or "ps printed no process states"
    if verdict == "blocked":
        return f"; blocked in the kernel: {said}"
    if verdict == "moving":
        return (f"; slow, not stuck: what it was doing on {host} changed within a second of "
                f"diag's limit ({said} at the first look; blocked in the kernel at both looks: "
                "none)")
    if verdict == "starved":
        return (f"; slow, not stuck: nothing of it was blocked in the kernel ({said}) and "
                f"{host}'s CPUs were saturated")
    if verdict == "late":
        ran = max((p.elapsed_s for p in shown), default=0)
        return (f"; diag's side, not the host's: it had run on {host} for {ran} s of the "
                f"{given_s:g} s diag allowed (diag or the session was slow to start it), and "
                f"nothing of it was blocked in the kernel ({said})")
    if verdict == "short":
        return (f"; diag's side, not the host's: diag allowed {given_s:g} s (--timeout / "
                f"--deadline), less than this probe is given by default, and nothing of it was "
                f"blocked in the kernel ({said})")
    return ""


def facts(verdict: Verdict, shown: Sequence[Process], rows: Sequence[str]) -> dict[str, Any]:
    """What a timed-out component's result keeps (recorded with the walk)."""
    return {"processes": list(rows), "hang_verdict": verdict,
            "hang_processes": [p.words() for p in shown]}
