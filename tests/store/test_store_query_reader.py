"""``diag query`` stays a reader, on a real DuckDB store file: it cannot write a file, read one,
reach a URL or change its own settings; a statement has a time limit; Ctrl-C is a clean stop."""

from __future__ import annotations

import contextlib
import http.server
import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from assistant.cli import main
from assistant.store import Store

ROOT = Path(__file__).resolve().parents[2]
# CPU-bound and long (minutes): DuckDB cannot shortcut a filtered count.
LONG = "SELECT count(*) FROM range(100000000000) t(x) WHERE x % 7 = 3"


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "diag.duckdb")
    store.open_session("hang", ["gpu001"], {"gpu001": {"rack": "r01"}})
    return store


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.requests.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"a,b\n1,2\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def web() -> Iterator[tuple[str, list[str]]]:
    """A web server on loopback that records every request it gets."""
    _Recorder.requests = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.requests
    finally:
        server.shutdown()
        server.server_close()


def test_an_ordinary_query_still_reads_the_store(store: Store) -> None:
    code, out, err = _cli(["query", "--db", str(store.path),
                           "SELECT runbook, hosts_n FROM sessions"])
    assert code == 0 and "hang" in out, err


def test_nothing_outside_the_store_can_be_written_or_read(store: Store, tmp_path: Path,
                                                          web: tuple[str, list[str]]) -> None:
    url, requests = web
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT\n")
    other = Store(tmp_path / "other.duckdb")
    other.open_session("oom", ["gpu009"])
    attacks = {
        "COPY TO": f"COPY (SELECT * FROM sessions) TO '{tmp_path}/out.csv'",
        "EXPORT DATABASE": f"EXPORT DATABASE '{tmp_path}/exported'",
        "read_text": f"SELECT content FROM read_text('{secret}')",
        "/etc/shadow": "SELECT content FROM read_text('/etc/shadow')",
        "read_csv remote": f"SELECT * FROM read_csv('{url}/x.csv')",
        "ATTACH": f"ATTACH '{other.path}' AS other (READ_ONLY)",
        "glob": f"SELECT * FROM glob('{tmp_path}/*')",
        "settings back on": "SET enable_external_access = true",
        "install": "INSTALL httpfs",
    }
    for name, sql in attacks.items():
        code, out, err = _cli(["query", "--db", str(store.path), sql])
        assert code == 2, (name, out, err)
        assert "query reads the store and nothing else" in err and err.count("\n") == 1, \
            (name, err)
        assert "TOP-SECRET" not in out + err and "root:" not in out, name
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "exported").exists()
    assert requests == []


def test_a_statement_stops_at_its_time_limit(store: Store) -> None:
    started = time.monotonic()
    code, _, err = _cli(["query", "--db", str(store.path), "--timeout", "1", LONG])
    assert code == 2 and "query stopped after 1 s" in err and err.count("\n") == 1, err
    assert time.monotonic() - started < 30  # it ran for minutes before


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_ctrl_c_is_a_clean_one_line_stop(store: Store) -> None:
    """Before, SIGINT was not seen until the statement ended (minutes); stopping it from
    Python then killed the process under DuckDB (abort, exit -6)."""
    proc = subprocess.Popen([sys.executable, "-m", "assistant.cli", "query", "--db",
                             str(store.path), LONG], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _cpu_seconds(proc.pid) < 4 and time.monotonic() < deadline:  # the query runs
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (proc.returncode, err)
    assert err == "diag: interrupted\n" and out == ""
