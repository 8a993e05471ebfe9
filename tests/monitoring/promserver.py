"""A real Prometheus (Debian's ``prometheus``) on loopback over a TSDB built from OpenMetrics
text with ``promtool tsdb create-blocks-from openmetrics``: deterministic history, no mock of
the HTTP API. It runs with basic auth (``--web.config.file``, a bcrypt hash), so every test
talks to it the way diag talks to a site's protected server.

Where it cannot start (binaries missing) the tests skip — unless ``DIAG_REQUIRE_PROMETHEUS``
is set (scripts/check sets it when it installed the packages as root), where that is a failure.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

USER, PASSWORD = "diag", "s3cret-for-tests"
PACKAGES = "prometheus prometheus-alertmanager"


def unavailable_reason() -> str | None:
    missing = [b for b in ("prometheus", "promtool") if shutil.which(b) is None]
    if missing:
        return f"{', '.join(missing)} not found: apt-get install {PACKAGES}"
    return None


def skip_or_fail(reason: str) -> None:
    import pytest

    if os.environ.get("DIAG_REQUIRE_PROMETHEUS"):
        pytest.fail(f"DIAG_REQUIRE_PROMETHEUS is set but Prometheus cannot start: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


class PromServer:
    def __init__(self, openmetrics: str, tls: tuple[Path, Path, Path] | None = None) -> None:
        """*tls*: (CA certificate, server certificate, server key): serve HTTPS only."""
        self.dir = Path(tempfile.mkdtemp(prefix="diag-prom-"))
        self.port = free_port()
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.openmetrics = openmetrics
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        import bcrypt

        source = self.dir / "history.om"
        source.write_text(self.openmetrics, encoding="utf-8")
        data = self.dir / "data"
        built = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics",
                                str(source), str(data)], capture_output=True, timeout=120)
        if built.returncode:
            raise RuntimeError(f"promtool: {built.stderr.decode()[-500:]}")
        source.unlink()
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        web = f"basic_auth_users:\n  {USER}: '{hashed}'\n"
        if self.tls:
            web += (f"tls_server_config:\n  cert_file: {self.tls[1]}\n"
                    f"  key_file: {self.tls[2]}\n")
        (self.dir / "web.yml").write_text(web)
        (self.dir / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 15s\n"
            "scrape_configs:\n"
            "  - job_name: dcgm\n    static_configs: []\n"
            "  - job_name: node\n    scrape_interval: 30s\n    static_configs: []\n")
        log = (self.dir / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.dir / 'prometheus.yml'}",
             f"--web.config.file={self.dir / 'web.yml'}", f"--storage.tsdb.path={data}",
             "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                verify = (ssl.create_default_context(cafile=str(self.tls[0])) if self.tls
                          else True)
                if httpx.get(f"{self.url}/-/ready", auth=(USER, PASSWORD), timeout=2,
                             verify=verify).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"prometheus not ready after {timeout:g} s: {self.log_tail()}")

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.dir / "prometheus.log").read_text(errors="replace")[-800:]
        return ""

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)
