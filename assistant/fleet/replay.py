"""The replay transport: answers from a scenario instead of a network.

It is product code, not a test trick: drills, ``--demo`` and rehearsal-by-scenario run on it.
A small per-command delay (the scenario's ``delay_s``) lets a demo show probes arriving live.
Outputs are held like a real host's: cut at the per-stream limit and drawn from the fan-out's
output budget.
"""

from __future__ import annotations

import threading
import time

from .local import MAX_OUTPUT, BoundedBuffer
from .scenario import Scenario
from .transport import CommandResult


class ReplayTransport:
    name = "replay"

    def __init__(self, scenario: Scenario, delay_s: float | None = None) -> None:
        self.scenario = scenario
        self.delay_s = scenario.delay_s if delay_s is None else delay_s
        self.commands: list[tuple[str, str | None]] = []  # (host, label) in the order asked

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        self.commands.append((host, label))
        started = time.monotonic()
        if self.delay_s:
            if cancel is None:
                time.sleep(self.delay_s)
            elif cancel.wait(self.delay_s):
                return CommandResult(host, "cancelled", reason="cancelled",
                                     duration_s=time.monotonic() - started)
        if host not in self.scenario.hosts:
            return CommandResult(host, "unreachable", reason="not in the scenario's fleet")
        state = self.scenario.states.get(host)
        if state is not None and state.applies_to(label):
            # A probe that hung after login left what it printed so far: the scenario's output
            # for this host (never the baseline, which is a whole run).
            partial = self.scenario.outputs.get(label or "", {}).get(host, "") \
                if state.phase == "command" else ""
            return CommandResult(host, state.state, stdout=partial,
                                 reason=state.reason or state.state, phase=state.phase,
                                 duration_s=time.monotonic() - started)
        output = self.scenario.output(host, label or "")
        if output is None:
            return CommandResult(host, "ok", stdout="", stderr=f"no recorded output for {label}",
                                 exit_status=127, duration_s=time.monotonic() - started)
        held = BoundedBuffer(MAX_OUTPUT)  # the fan-out's budget, as for a real host's output
        held.add(output.encode("utf-8"))
        return CommandResult(host, "ok", stdout=held.text("stdout"), exit_status=0,
                             duration_s=time.monotonic() - started)

    def close(self) -> None:
        pass
