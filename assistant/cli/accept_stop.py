"""Stopping ``diag accept`` or ``diag watch`` on a signal: Ctrl-C, SIGTERM (``kill``, a job's
time limit) and SIGHUP (a closed terminal) all end the walk the same way (issue 29 item 14).

Every test running on a node is ended before diag exits: the transport kills its process group
on the node (``fleet.remoteproc``) when the walk's fan-out is stopped, and diag waits for those
kills (a few seconds at most) before it closes its connections, then says which tests it ended
on which nodes, marks the session interrupted and prints the line that resumes it. Left to
their default action SIGTERM and SIGHUP ended diag at once, and a Ctrl-C (exit 130 in 0.1 s)
closed the connections with ``all_reduce_perf`` still running on the nodes.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

KILL_WAIT_S = 10.0  # how long diag waits for the node-side kills before it exits anyway


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C's KeyboardInterrupt would be, so the walk or
    watch ends the same way: the session marked interrupted and the resume line printed."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


class TerminateAsInterrupt:
    """``with TerminateAsInterrupt():`` SIGTERM and SIGHUP raise :class:`Terminated` in the
    main thread; the handlers found are put back on the way out (off the main thread, where
    Python takes no handler, nothing changes)."""

    def __enter__(self) -> None:
        import signal

        self.found: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            self.found = {sig: signal.signal(sig, self._raise)
                          for sig in (signal.SIGTERM, signal.SIGHUP)}

    def __exit__(self, *exc: object) -> None:
        import signal

        for sig, handler in self.found.items():
            if handler is not None:  # None: set outside Python, cannot be put back
                signal.signal(sig, handler)

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise Terminated(signum)


class RunningTests:
    """A walk listener: which active tests (those that load a node) are running on which
    nodes right now."""

    def __init__(self) -> None:
        from probes.catalog import load_catalog

        self._active = {name for name, probe in load_catalog().probes.items() if probe.active}
        self._lock = threading.Lock()
        self.now: dict[tuple[str, str], None] = {}

    def __call__(self, event: Any) -> None:
        from assistant.runbook import events as ev

        if not isinstance(event, ev.ProbeStarted | ev.ProbeFinished) or (
                event.probe not in self._active):
            return
        with self._lock:
            if isinstance(event, ev.ProbeStarted):
                self.now[(event.probe, event.host)] = None
            else:
                self.now.pop((event.probe, event.host), None)

    def snapshot(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self.now)


def _wait_for_kills(seconds: float) -> None:
    """The fan-out's workers end once the transport has killed their command's process group
    on the node (or given up): wait for them, within *seconds*."""
    deadline = time.monotonic() + seconds
    for thread in threading.enumerate():
        if thread.name.startswith("fanout-") and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))


def stop_tests(stop: KeyboardInterrupt, provider: Any, running: RunningTests, walk: Any,
               recording: Any, db: str | None) -> int:
    """End every running test on its node, say which, mark the session interrupted and print
    the resume line; the exit status (130 for Ctrl-C, 128 + the signal otherwise)."""
    from .run import _interrupted

    tests = running.snapshot()
    provider.cancel.set()
    started = time.monotonic()
    _wait_for_kills(KILL_WAIT_S)
    how = f"terminated ({stop.name})" if isinstance(stop, Terminated) else "interrupted"
    if tests:
        by_test: dict[str, list[str]] = {}
        for test, host in tests:
            by_test.setdefault(test, []).append(host)
        ended = "; ".join(f"{test} on {', '.join(sorted(hosts))}"
                          for test, hosts in sorted(by_test.items()))
        print(f"diag: {how}: ended the running test(s) — killed their process groups on the "
              f"nodes ({time.monotonic() - started:.1f}s): {ended}", file=sys.stderr)
    else:
        print(f"diag: {how}: no test was running on a node", file=sys.stderr)
    code = _interrupted(walk if recording is not None else None, recording, db)
    return 128 + stop.signum if isinstance(stop, Terminated) else code
