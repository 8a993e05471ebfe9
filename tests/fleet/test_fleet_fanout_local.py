"""The local transport and the fan-out contract, with real processes (no SSH server needed)."""

from __future__ import annotations

import threading
import time

import pytest

from assistant.fleet.fanout import fan_out
from assistant.fleet.local import LocalTransport
from assistant.fleet.transport import TRANSPORT_STATES, CommandResult

local = LocalTransport()


def test_local_runs_commands() -> None:
    result = local.run("gpu001", 'echo "$DIAG_HOST"; echo oops >&2; exit 3', timeout=5)
    assert (result.state, result.stdout, result.stderr, result.exit_status) == (
        "ok", "gpu001\n", "oops\n", 3)


def test_local_timeout_kills_a_command_that_never_ends() -> None:
    start = time.monotonic()
    # The background child keeps stdout open: waiting for EOF alone would hang.
    result = local.run("h", "echo started; sleep 30 & sleep 30", timeout=0.5)
    assert result.state == "timeout" and result.stdout == "started\n"
    assert result.exit_status is None
    assert time.monotonic() - start < 2


def test_local_cancel_and_bounds() -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    start = time.monotonic()
    assert local.run("h", "sleep 30", timeout=10, cancel=cancel).state == "cancelled"
    assert time.monotonic() - start < 1.5
    small = LocalTransport(max_output=100)
    result = small.run("h", "head -c 5000 /dev/zero | tr '\\0' a; printf '\\377\\n' >&2",
                       timeout=5)
    assert result.stdout.startswith("a" * 100) and "truncated: 4900 bytes" in result.stdout
    assert result.stderr == "\ufffd\n"  # invalid UTF-8 is replaced, not an error


def test_fan_out_every_host_one_state_and_deadline() -> None:
    seen: list[CommandResult] = []
    lock = threading.Lock()

    def record(result: CommandResult) -> None:
        with lock:
            seen.append(result)

    hosts = [f"h{i:02d}" for i in range(12)]
    start = time.monotonic()
    results = fan_out(local, [*hosts, "h00"],
                      lambda h: "sleep 30" if h in ("h03", "h07") else f"echo {h}",
                      concurrency=4, timeout=20, deadline=1.5, on_result=record)
    elapsed = time.monotonic() - start
    assert elapsed < 1.5 + 0.5, elapsed
    assert list(results) == hosts  # input order, duplicates removed
    assert sorted(r.host for r in seen) == sorted(hosts)  # on_result: once per host
    for host, result in results.items():
        assert result.state in TRANSPORT_STATES
        if host in ("h03", "h07"):
            assert (result.state, result.reason) == ("timeout", "deadline")
        else:
            assert (result.state, result.stdout) == ("ok", f"{host}\n")


def test_fan_out_cancel_keeps_finished_results() -> None:
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    start = time.monotonic()
    results = fan_out(local, ["fast", "slow1", "slow2"],
                      lambda h: "true" if h == "fast" else "sleep 30",
                      timeout=20, deadline=20, cancel=cancel)
    assert time.monotonic() - start < 1.5
    assert results["fast"].state == "ok"
    assert {results["slow1"].state, results["slow2"].state} == {"cancelled"}


class _Recorder:
    """A scripted transport, to check the fan-out's own logic (concurrency, bad transports)."""

    name = "recorder"

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.lock = threading.Lock()

    def run(self, host: str, command: str, *, timeout: float, label: str | None = None,
            cancel: threading.Event | None = None) -> CommandResult:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            if host == "broken":
                raise RuntimeError("boom")
            if host == "stuck":  # ignores cancel entirely: fan_out must not wait for it
                time.sleep(3)
            time.sleep(0.05)
            return CommandResult(host=host, state="ok", stdout=command)
        finally:
            with self.lock:
                self.running -= 1

    def close(self) -> None:
        pass


def test_fan_out_bounds_concurrency_and_survives_bad_transports() -> None:
    recorder = _Recorder()
    hosts = [f"n{i}" for i in range(20)] + ["broken"]
    results = fan_out(recorder, hosts, "cmd", concurrency=3, label="probe")
    assert recorder.peak == 3
    assert results["broken"].state == "unreachable" and "boom" in results["broken"].reason
    assert all(results[h].state == "ok" for h in hosts[:-1])
    start = time.monotonic()
    results = fan_out(recorder, ["stuck", "n1"], "cmd", deadline=0.5)
    assert time.monotonic() - start < 1.0
    assert results["stuck"].state == "timeout" and results["n1"].state == "ok"


def test_fan_out_edge_cases() -> None:
    assert fan_out(local, [], "true") == {}
    with pytest.raises(ZeroDivisionError):  # a broken command builder fails before anything runs
        fan_out(local, ["a"], lambda h: str(1 / 0))
