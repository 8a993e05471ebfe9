"""The TCP connect under every SSH connection: non-blocking and polled in small steps, so a
cancel is honoured within ``POLL_S`` and the failure is told precisely (refused, no route,
connect timeout, DNS) for the host's state (``unreachable``).
"""

from __future__ import annotations

import errno
import os
import select
import socket
import threading

from assistant.fleet.inventory import HostSpec
from assistant.fleet.lagclock import LagClock
from assistant.fleet.transport import HostFailure

POLL_S = 0.05  # granularity at which cancel and deadlines are noticed


def is_set(event: threading.Event | None) -> bool:
    return event is not None and event.is_set()


def _errno_reason(err: int) -> str:
    return {
        errno.ECONNREFUSED: "connection refused",
        errno.EHOSTUNREACH: "no route to host",
        errno.ENETUNREACH: "network unreachable",
        errno.ETIMEDOUT: "connect timed out",
        errno.ECONNRESET: "connection reset",
    }.get(err, os.strerror(err).lower())


def tcp_connect(spec: HostSpec, connect_timeout: float,
                cancel: threading.Event | None) -> socket.socket:
    """Non-blocking connect polled in small steps, so cancel is honoured and the reason is
    precise (refused / no route / timeout / DNS)."""
    try:
        infos = socket.getaddrinfo(spec.address, spec.port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise HostFailure("unreachable", f"DNS lookup failed: {exc.strerror}") from None
    except UnicodeError:  # getaddrinfo's IDNA step rejects e.g. a label over 63 characters
        raise HostFailure("unreachable", "DNS lookup failed: invalid host name") from None
    clock = LagClock(POLL_S)  # for every address in turn, as the limit was before
    reason = "no address"
    for family, kind, proto, _, sockaddr in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            err = sock.connect_ex(sockaddr)
            if err in (errno.EINPROGRESS, errno.EAGAIN):
                poller = select.poll()
                poller.register(sock, select.POLLOUT)
                while True:
                    if is_set(cancel):
                        raise HostFailure("cancelled", "cancelled")
                    if clock.past(connect_timeout):
                        raise HostFailure("unreachable", f"connect timeout after "
                                          f"{connect_timeout:g}s{clock.note(connect_timeout)}")
                    if poller.poll(POLL_S * 1000):
                        break
                    clock.tick()
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err == 0:
                sock.setblocking(True)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
            reason = _errno_reason(err)
        except HostFailure:
            sock.close()
            raise
        except OSError as exc:
            reason = _errno_reason(exc.errno or 0)
        sock.close()
    raise HostFailure("unreachable", reason)
