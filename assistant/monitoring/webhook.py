"""``diag alerts serve``'s receiver: Alertmanager's webhook over HTTP on the address given
(loopback unless told otherwise), a bearer token required on every request, alerts grouped
into incidents by Alertmanager's group key, one read-only walk per *new* group, run by a single
worker from a bounded queue (a flood of groups is refused with 503, said in one line, never
queued without end). The walk itself is the caller's (``walk(alert, payload)``): it records the
incident; this module only receives, groups and queues. It never runs an action."""

from __future__ import annotations

import hmac
import queue
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .alerts import MAX_PAYLOAD, AlertError, AlertWalk, parse

Walker = Callable[[AlertWalk, bytes], None]


class AlertReceiver:
    def __init__(self, host: str, port: int, token: str, walk: Walker,
                 say: Callable[[str], None], queue_size: int = 16) -> None:
        self.token = token
        self.walk = walk
        self.say = say
        self.queue: queue.Queue[tuple[AlertWalk, bytes] | None] = queue.Queue(queue_size)
        self.groups: dict[str, str] = {}  # group key -> state (queued, walking, walked, failed)
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, port), _handler(self))
        self.worker = threading.Thread(target=self._work, name="diag-alert-walks", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.server_address[:2]
        return str(host), int(port)

    def serve_forever(self) -> None:
        self.worker.start()
        self.server.serve_forever(poll_interval=0.2)

    def shutdown(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.queue.put(None)

    def receive(self, body: bytes) -> tuple[int, str]:
        try:
            alert = parse(body)
        except AlertError as exc:
            return 400, str(exc)
        key = alert.group_key or ",".join(alert.alerts) + "@" + ",".join(alert.hosts)
        with self.lock:
            if key in self.groups:
                return 200, f"group already {self.groups[key]}"
            if alert.status != "firing":
                return 200, "resolved: nothing to walk"
            try:
                self.queue.put_nowait((alert, body))
            except queue.Full:
                self.say(f"alerts: queue full ({self.queue.maxsize} groups waiting): "
                         f"refused {', '.join(alert.alerts)} on {', '.join(alert.hosts[:4])}")
                return 503, "queue full"
            self.groups[key] = "queued"
        self.say(f"alerts: {', '.join(alert.alerts)} on {', '.join(alert.hosts[:8])}: "
                 f"runbook {alert.runbook} queued")
        return 202, "queued"

    def _work(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            alert, body = item
            key = alert.group_key or ",".join(alert.alerts) + "@" + ",".join(alert.hosts)
            with self.lock:
                self.groups[key] = "walking"
            try:
                self.walk(alert, body)
                state = "walked"
            except Exception as exc:  # a walk that fails is said; the receiver goes on
                self.say(f"alerts: the walk for {', '.join(alert.alerts)} failed: {exc}")
                state = "failed"
            with self.lock:
                self.groups[key] = state


def _handler(receiver: AlertReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "diag-alerts"

        def log_message(self, format: str, *args: object) -> None:  # quiet: lines are ours
            return

        def _reply(self, code: int, text: str) -> None:
            data = (text + "\n").encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply(405, "POST Alertmanager's webhook here")

        def do_POST(self) -> None:
            given = self.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {receiver.token}".encode()):
                self._reply(401, "a bearer token is required")
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if length < 0 or length > MAX_PAYLOAD:
                self._reply(413, "payload too large")
                return
            code, text = receiver.receive(self.rfile.read(length))
            self._reply(code, text)

    return Handler
