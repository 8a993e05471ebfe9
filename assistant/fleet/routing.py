"""Which transport runs what: client-side probes, and each host to its own transport.

- :class:`ClientSideTransport` runs probes that read something cluster-wide, such as the
  *scheduler* (``runs_on="client"`` in the probe's ``Probe``), once, on this machine, where
  the Slurm client is — whichever transport reaches the nodes.
- :class:`RoutingTransport` sends each host to its own transport: SSH for the hosts the
  inventory knows, srun for the rest (the default with ``--job``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from assistant.fleet.local import LocalTransport
from assistant.fleet.transport import CommandResult, Transport
from probes.base import Probe, get_probe

_POLL_S = 0.05


def client_probe(label: str | None) -> Probe | None:
    """The probe named *label* when it reads something cluster-wide once, here
    (``runs_on="client"``, e.g. ``scheduler``); None for every other command."""
    if not label:
        return None
    try:
        probe = get_probe(label)
    except (KeyError, ImportError):
        return None
    return probe if probe.runs_on == "client" else None


@dataclass
class _Reading:
    reader: str
    done: threading.Event = field(default_factory=threading.Event)
    result: CommandResult | None = None


class ClientSideTransport:
    """Wraps the transport that reaches the nodes; client-side probes run here, once.

    For a probe whose ``Probe`` says ``runs_on="client"`` the first host of a fan-out that asks
    gets the command run on this machine (the local transport, so the same timeout and cancel
    rules), every other host of that fan-out the probe's ``shared_output(reader)`` naming the
    reader. A fan-out is recognised by the cancel event ``fan_out`` gives every worker; a call
    without one runs the command itself. If the reading fails, every host gets its state.
    """

    def __init__(self, inner: Transport, local: Transport | None = None) -> None:
        self.inner = inner
        self.local = local or LocalTransport()
        self.name = inner.name
        self._lock = threading.Lock()
        self._readings: dict[tuple[str, int], tuple[threading.Event, _Reading]] = {}

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        probe = client_probe(label)
        if probe is None:
            return self.inner.run(host, command, timeout=timeout, label=label, cancel=cancel)
        if cancel is None:
            return self._read(host, command, timeout, label, cancel)
        key = (command, id(cancel))
        with self._lock:
            for stale in [k for k, (ev, _) in self._readings.items() if ev.is_set()]:
                del self._readings[stale]  # fan-outs that returned (their event is set)
            entry = self._readings.get(key)
            first = entry is None
            if first:
                entry = (cancel, _Reading(host))
                self._readings[key] = entry
        assert entry is not None
        reading = entry[1]
        if first:
            try:
                reading.result = self._read(host, command, timeout, label, cancel)
            finally:
                reading.done.set()
            return reading.result
        start = time.monotonic()
        while not reading.done.wait(_POLL_S):
            if cancel.is_set():
                return CommandResult(host, "cancelled", reason="cancelled",
                                     duration_s=time.monotonic() - start)
        source = reading.result
        assert source is not None
        if source.state != "ok":
            return CommandResult(host, source.state, reason=source.reason,
                                 duration_s=time.monotonic() - start)
        assert probe.shared_output is not None  # Probe requires it of a client-side probe
        return CommandResult(host, "ok", stdout=probe.shared_output(reading.reader),
                             exit_status=0, duration_s=time.monotonic() - start)

    def _read(self, host: str, command: str, timeout: float, label: str | None,
              cancel: threading.Event | None) -> CommandResult:
        result = self.local.run(host, command, timeout=timeout, label=label, cancel=cancel)
        result.host = host
        return result

    def close(self) -> None:
        self.inner.close()
        self.local.close()


class RoutingTransport:
    """Each host to its own transport (e.g. SSH for inventory hosts, srun for the others)."""

    def __init__(self, routes: Mapping[str, Transport], default: Transport) -> None:
        self.routes = dict(routes)
        self.default = default
        kinds = {t.name for t in [*self.routes.values(), default]}
        self.name = "+".join(sorted(kinds)) if len(kinds) > 1 else default.name

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        transport = self.routes.get(host, self.default)
        return transport.run(host, command, timeout=timeout, label=label, cancel=cancel)

    def close(self) -> None:
        seen: set[int] = set()
        for transport in [*self.routes.values(), self.default]:
            if id(transport) not in seen:
                seen.add(id(transport))
                transport.close()
