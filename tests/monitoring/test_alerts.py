"""Alerts start walks: a webhook payload read into runbook, hosts and window; and a real
Alertmanager (Debian's prometheus-alertmanager) sending a real webhook to ``diag alerts serve``,
whose walk lands in the store as an incident that ``diag history`` lists."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from assistant.monitoring.alerts import AlertError, parse
from tests.monitoring import promserver

PAYLOAD = {
    "version": "4", "groupKey": '{}:{alertname="GPUXidError"}', "status": "firing",
    "receiver": "diag", "groupLabels": {"alertname": "GPUXidError"},
    "commonLabels": {"alertname": "GPUXidError"}, "commonAnnotations": {},
    "externalURL": "http://am:9093", "truncatedAlerts": 0,
    "alerts": [
        {"status": "firing", "labels": {"alertname": "GPUXidError", "Hostname": "node0005",
                                        "gpu": "3"},
         "annotations": {}, "startsAt": "2026-01-01T02:09:41Z",
         "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": "a"},
        {"status": "firing", "labels": {"alertname": "GPUXidError",
                                        "instance": "node0007:9400"},
         "annotations": {}, "startsAt": "2026-01-01T02:10:12Z",
         "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": "b"}],
}


def test_payload_to_runbook_hosts_and_window() -> None:
    walk = parse(json.dumps(PAYLOAD))
    assert walk.runbook == "hang" and walk.hosts == ("node0005", "node0007")
    assert walk.start == 1767233381 - 15 * 60  # the first alert, less the lead


@pytest.mark.parametrize(("change", "message"), [
    ({"version": "3"}, "diag reads version 4"),               # an old Alertmanager
    ({"alerts": "x"}, "no 'alerts' list"),                    # not a webhook payload
    ({"alerts": [{"labels": {"alertname": "X"}}]}, "no alert names a host"),
])
def test_bad_payload_is_one_line(change: dict[str, object], message: str) -> None:
    with pytest.raises(AlertError, match=message):
        parse(json.dumps({**PAYLOAD, **change}))


def _wait(predicate, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_real_alertmanager_webhook_starts_a_recorded_walk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("prometheus-alertmanager") is None:
        promserver.skip_or_fail("prometheus-alertmanager not found")
    token = tmp_path / "token"
    token.write_text("a-test-token-of-32-characters-00\n")
    port, am_port = promserver.free_port(), promserver.free_port()
    db = tmp_path / "diag.duckdb"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "DIAG_CACHE_DIR": "off"}
    env.pop("DIAG_PROMETHEUS_URL", None)
    serve = subprocess.Popen(
        [sys.executable, "-m", "assistant.cli", "alerts", "serve", "--listen",
         f"127.0.0.1:{port}", "--token-file", str(token), "--db", str(db)],
        stderr=subprocess.PIPE, text=True, env=env)
    (tmp_path / "am.yml").write_text(
        "route:\n  receiver: diag\n  group_by: [alertname]\n  group_wait: 1s\n"
        "  group_interval: 1m\n  repeat_interval: 4h\n"
        "receivers:\n  - name: diag\n    webhook_configs:\n"
        f"      - url: http://127.0.0.1:{port}/\n        send_resolved: false\n"
        "        http_config:\n          authorization:\n            type: Bearer\n"
        f"            credentials_file: {token}\n")
    am = subprocess.Popen(
        ["prometheus-alertmanager", f"--config.file={tmp_path / 'am.yml'}",
         f"--storage.path={tmp_path / 'am'}", f"--web.listen-address=127.0.0.1:{am_port}",
         "--cluster.listen-address="], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lines: list[str] = []
    try:
        base = f"http://127.0.0.1:{am_port}"
        _wait(lambda: _ok(f"{base}/-/ready"), 20, "Alertmanager")
        # an unauthenticated webhook is refused
        _wait(lambda: _status(f"http://127.0.0.1:{port}/") == 401, 20, "diag alerts serve")
        alert = [{"labels": {"alertname": "GPUXidError", "Hostname": "diag-test-no-such-host"},
                  "annotations": {"summary": "XID 79"}}]
        assert httpx.post(f"{base}/api/v2/alerts", json=alert, timeout=5).status_code == 200

        def walked() -> bool:
            line = serve.stderr.readline()  # type: ignore[union-attr]
            lines.append(line)
            return "alerts: walked" in line
        _wait(walked, 90, "the walk")
    finally:
        for proc in (am, serve):
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
            if proc.poll() is None:
                proc.kill()
    text = "".join(lines)
    assert "GPUXidError on diag-test-no-such-host: runbook hang queued" in text
    history = subprocess.run([sys.executable, "-m", "assistant.cli", "history", "--db",
                              str(db), "--json"], capture_output=True, text=True, env=env,
                             timeout=60)
    assert "diag-test-no-such-host" in history.stdout, history.stderr
    assert "diag-cannot-reach" in history.stdout  # the walk concluded (no such host here)
    # the TUI's first screen lists it (the home screen's own store read)
    from assistant.tui.hooks import recent_incidents

    monkeypatch.setenv("DIAG_DB", str(db))
    assert any("diag-test-no-such-host" in repr(row) for row in recent_incidents())


def _ok(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, timeout=1).status_code == 200
    return False


def _status(url: str) -> int:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.post(url, content=b"{}", timeout=1).status_code
    return 0
