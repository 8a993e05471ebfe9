"""A time-out before login is confirmed by a second try before a host is called unreachable
(over real sshd on loopback): the first connection of a healthy host held silent, as a busy
login node or a lost SYN leaves it, must not make "the node may be down"."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.fleet.ssh import SSHTransport
from assistant.runbook.provider import FleetProvider
from tests.fleet import sshfleet
from tests.fleet.fleet_hosts import HEALTHY, MUTE

pytestmark = pytest.mark.ssh

CONNECT_TIMEOUT = 1.0


class _SilentOnce:
    """A TCP front of a healthy sshd: its first connection is accepted and held silent (no
    banner), every later one is passed through to the sshd."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.held: list[socket.socket] = []
        self.stopping = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            if self.accepted == 1:
                self.held.append(conn)
                continue
            upstream = socket.create_connection(self.upstream)
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        self.stopping.set()
        for conn in [*self.held, self.sock]:
            with contextlib.suppress(OSError):
                conn.close()


@pytest.fixture
def silent_once(fleet: sshfleet.SSHFleet) -> Iterator[_SilentOnce]:
    member = fleet.members[HEALTHY[0]]
    front = _SilentOnce((member.address, member.port))
    try:
        yield front
    finally:
        front.stop()


def test_a_healthy_host_silent_once_is_not_unreachable(
        fleet: sshfleet.SSHFleet, silent_once: _SilentOnce, tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    shutil.copy(fleet.known_hosts, known_hosts)
    spec = fleet.spec(HEALTHY[0], address="127.0.0.1", port=silent_once.port)
    with SSHTransport({spec.name: spec}, known_hosts=known_hosts, accept_new_host_keys=True,
                      use_agent=False, look_for_keys=False,
                      connect_timeout=CONNECT_TIMEOUT) as transport:
        provider = FleetProvider(transport, concurrency=4, deadline=60)
        outcome = provider.run_probe("versions", [spec.name], {}, lambda event: None)
    assert outcome.hosts[spec.name].state == "ok", outcome.hosts[spec.name]
    assert silent_once.accepted == 2 and not provider.dead


def test_a_host_silent_twice_is_unreachable_and_says_it_was_confirmed(
        fleet: sshfleet.SSHFleet) -> None:
    with fleet.transport([MUTE], connect_timeout=CONNECT_TIMEOUT) as transport:
        provider = FleetProvider(transport, concurrency=4, deadline=60)
        outcome = provider.run_probe("versions", [MUTE], {}, lambda event: None)
    result = outcome.hosts[MUTE]
    assert result.state == "timeout" and "no SSH banner" in result.reason
    assert "second try confirmed it" in result.reason
