"""Give a loopback fleet only the CPU the client leaves idle, as remote hosts would.

On a real cluster the probed hosts run their scripts on their own cores; on loopback every
"host" (its sshd, the session sshd it forks per connection, the probe script) shares this
machine's cores with the client being measured. Linux schedules those session processes badly
for a client's latency: sshd starts each session with ``setsid``, and with autogroup scheduling
on (the default on desktop and many server kernels) every new session is its own scheduling
group with as much weight as the client's whole process tree, so 64 concurrent probe scripts
take ~64/65 of the CPU from the TUI whatever ``nice`` says inside a group. (Renicing the sshd,
or SCHED_IDLE on them, was tried and made no difference: both only act inside a group.)

A cgroup does cross that line: sessions stay in the cgroup their sshd was in, whatever
``setsid`` does. So the fleet's sshd processes are moved into one cgroup marked idle
(``cpu.idle`` = 1: the group runs only when nothing else wants the CPU). The client still pays
for all of its own work, the probe worker's included; what it no longer pays is the remote
side's. Both figures are printed by the benches that use this: the loopback fleet at equal share
is the worst case, not the deployment.

Needs root and the cpu controller (cgroup v2 with ``cpu.idle``, kernel 5.15+, or v1's cpu
hierarchy); when either is missing, ``confine`` says why and changes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path

NAME = "diag-bench-hosts"
V2_ROOT = Path("/sys/fs/cgroup")
V1_ROOT = Path("/sys/fs/cgroup/cpu")


def _roots() -> list[Path]:
    """Where a cpu cgroup can be made: the v2 root if it delegates ``cpu``, else v1's cpu."""
    found = []
    controllers = V2_ROOT / "cgroup.subtree_control"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        found.append(V2_ROOT)
    if (V1_ROOT / "cpu.shares").exists():
        found.append(V1_ROOT)
    return found


class IdleGroup:
    """One cgroup for the fleet; ``confine(pids)`` moves processes in, ``release`` out."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.root: Path | None = None
        self.reason = ""
        roots = _roots()
        if not roots:
            self.reason = "no cpu cgroup controller is mounted"
            return
        root = roots[0]
        path = root / NAME
        try:
            path.mkdir(exist_ok=True)
            (path / "cpu.idle").write_text("1")
        except OSError as exc:
            self.reason = f"cannot make the idle cgroup {path}: {exc.strerror or exc}"
            with contextlib.suppress(OSError):
                path.rmdir()
            return
        self.path, self.root = path, root

    def confine(self, pids: Iterable[int]) -> str:
        """Move *pids* (and so every process they fork later) into the idle group; '' on
        success, else why not (the fleet then shares the CPU as before)."""
        if self.path is None:
            return self.reason
        return self._move(pids, self.path)

    def release(self, pids: Iterable[int]) -> str:
        """Back to the root group: the fleet shares the CPU with the client again."""
        if self.root is None:
            return self.reason
        return self._move(pids, self.root)

    def _move(self, pids: Iterable[int], group: Path) -> str:
        for pid in pids:
            try:
                (group / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:
                continue
            except OSError as exc:
                return f"cannot move pid {pid} into {group}: {exc.strerror or exc}"
        return ""

    def remove(self) -> None:
        """Drop the group (its processes must be gone or released first)."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.rmdir()


def fleet_pids(fleet: object) -> list[int]:
    """The sshd daemons of a tests.fleet.sshfleet fleet (each session forks from one)."""
    members = getattr(fleet, "members", {})
    return [host.proc.pid for host in members.values()
            if host.proc is not None and host.proc.poll() is None]
