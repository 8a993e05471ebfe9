"""The monitoring step in a walk, over the session's real Prometheus: its findings are the
walk's evidence (and the store's rows), who changed first is said, utilization that swings is
found with its period and what moves with it; without a Prometheus, one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from assistant.monitoring.client import PromClient
from assistant.monitoring.oscillation import oscillating
from assistant.monitoring.step import NOT_CONFIGURED, MonitoredProvider, MonitoringStep
from assistant.monitoring.window import Window
from assistant.runbook.library import get_runbook
from assistant.runbook.rehearsal import RecordedProvider
from assistant.walks import build_walk
from tests.monitoring import history, promserver

HOSTS = [*history.hosts(), history.DARK]


def _walk(step: MonitoringStep | None, said: list[str]):  # type: ignore[no-untyped-def]
    provider = MonitoredProvider(RecordedProvider({}), step, said.append)
    walk = build_walk(get_runbook("hang"), HOSTS, provider)
    walk.run()
    return walk


def test_findings_join_the_walks_evidence(prom_config) -> None:  # type: ignore[no-untyped-def]
    said: list[str] = []
    step = MonitoringStep(prom_config, start=history.T0 + 300, end=history.END)
    walk = _walk(step, said)
    found = {f.code: f for f in walk.findings() if f.probe == "monitoring"}
    assert set(history.PLANTS) <= set(found)
    xid = found["metric-xid-new"]
    assert xid.hosts == (history.PLANTED["metric-xid-new"],)
    assert xid.evidence["first_host"] == history.PLANTED["metric-xid-new"]
    first = found["monitoring-first-change"]
    earliest = min(history.PLANTS, key=history.fault_start)
    assert first.hosts == (history.PLANTED[earliest],) and "changed first" in first.message
    # dark01 has no series: not measured, never healthy
    assert any(f.code == "not-measured" and history.DARK in f.hosts
               for f in walk.findings() if f.probe == "monitoring")
    assert said == []


def test_oscillating_utilization_with_its_period(prom_config) -> None:  # type: ignore[no-untyped-def]
    window = Window(history.T0 + 300, history.END, history.STEP)
    with PromClient(prom_config) as client:
        waves = oscillating(client, window, {"dcgm-exporter": "Hostname",
                                             "node_exporter": "instance"}, HOSTS)
    assert [w.host for w in waves] == [history.WAVE]
    assert abs(waves[0].period_s - history.WAVE_PERIOD) <= 30
    assert "I/O pressure" in waves[0].moves_with


def test_without_prometheus_one_line_and_the_walk_unchanged() -> None:
    said: list[str] = []
    walk = _walk(None, said)
    assert said == [NOT_CONFIGURED]
    assert not [f for f in walk.findings() if f.probe == "monitoring"]


def test_unreachable_server_one_line_and_the_walk_goes_on() -> None:
    from assistant.monitoring.config import PromConfig

    said: list[str] = []
    port = promserver.free_port()
    walk = _walk(MonitoringStep(PromConfig(url=f"http://127.0.0.1:{port}", timeout=2)), said)
    assert len(said) == 1 and "cannot be reached" in said[0] and "goes on" in said[0]
    assert walk.steps  # the sweep and the runbook's steps ran


def test_diag_run_records_the_window(prom, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # end to end: diag run with --prometheus and --from/--to; the hosts cannot be reached over
    # SSH (no such names), the monitoring findings are still in the JSON and the store
    (tmp_path / "diag").mkdir()
    (tmp_path / "pw").write_text(promserver.PASSWORD)
    (tmp_path / "diag" / "monitoring.yaml").write_text(
        f"prometheus:\n  username: {promserver.USER}\n  password_file: {tmp_path / 'pw'}\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "DIAG_CACHE_DIR": "off"}
    db = tmp_path / "diag.duckdb"
    run = subprocess.run(
        [sys.executable, "-m", "assistant.cli", "run", "hang", "--hosts",
         f"{history.PLANTED['metric-xid-new']},{history.TWIN}", "--auto", "--json",
         "--db", str(db), "--prometheus", prom.url, "--from", str(history.T0 + 300),
         "--to", str(history.END), "--connect-timeout", "1", "--deadline", "10"],
        capture_output=True, text=True, env=env, timeout=120)
    doc = json.loads(run.stdout)
    codes = json.dumps(doc)
    assert "metric-xid-new" in codes, run.stderr[-2000:]
    rows = subprocess.run(
        [sys.executable, "-m", "assistant.cli", "query", "--db", str(db),
         "select code from findings where probe = 'monitoring' order by 1"],
        capture_output=True, text=True, env=env, timeout=60)
    assert "metric-xid-new" in rows.stdout, rows.stderr

    # the post-mortem draft and the vendor bundle carry the window: the accused host's signal
    # as a sparkline with its range and when it went abnormal
    planted = history.PLANTED["metric-xid-new"]
    report = subprocess.run(
        [sys.executable, "-m", "assistant.cli", "report", "latest", "--db", str(db)],
        capture_output=True, text=True, env=env, timeout=60)
    section = report.stdout.split("## Monitoring window", 1)[-1].split("## Conclusion")[0]
    assert "## Monitoring window" in report.stdout, report.stdout[-3000:] + report.stderr
    xid_line = section.split("`metric-xid-new`", 1)[1].split("\n- ", 1)[0]
    assert f"  - {planted}: `" in xid_line and "abnormal from 20" in xid_line, xid_line
    assert any(block in xid_line for block in "▁▂▃▄▅▆▇█")
    as_json = json.loads(subprocess.run(
        [sys.executable, "-m", "assistant.cli", "report", "latest", "--format", "json",
         "--db", str(db)], capture_output=True, text=True, env=env, timeout=60).stdout)
    xid = next(s for s in as_json["monitoring"] if s["code"] == "metric-xid-new")
    assert xid["first_host"] == planted and xid["series"][planted]["points"] >= 50
    import tarfile

    bundle = tmp_path / "bundle.tar.gz"
    made = subprocess.run(
        [sys.executable, "-m", "assistant.cli", "bundle", "latest", "-o", str(bundle),
         "--db", str(db)], capture_output=True, text=True, env=env, timeout=60)
    assert made.returncode == 0, made.stderr
    with tarfile.open(bundle) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/report.md"))
        handle = tar.extractfile(member)
        assert handle is not None
        assert xid_line in handle.read().decode()


def test_stale_series_and_label_mismatch(prom_config) -> None:  # type: ignore[no-untyped-def]
    # gone01's exporters stopped at 01:30: stale, said with when; hosts named as Prometheus
    # does not name them: one line with the names it uses
    said: list[str] = []
    step = MonitoringStep(prom_config, start=history.T0 + 300, end=history.END)
    outcome = step.run([history.GONE, history.CALM], said.append)
    stale = [f for f in outcome.findings if f.code == "monitoring-series-stale"]
    assert stale and all(f.hosts == (history.GONE,) for f in stale)
    assert "01:30:00Z" in stale[0].message
    said.clear()
    outcome = step.run(["gpu001.example", "gpu002.example"], said.append)
    assert any("none of the 2 host(s) of the walk has a series under the label 'Hostname'"
               in line and "names hosts like" in line for line in said), said
    assert {f.code for f in outcome.findings} == {"not-measured"}


def test_exporter_not_deployed_is_not_measured() -> None:
    # node_exporter absent: every host's node signals not measured, never healthy
    from assistant.monitoring.step import findings

    out = findings([], [], {"dcgm-exporter": "Hostname"}, ["a", "b"],
                   Window(history.T0, history.END, 15))
    assert [(f.code, f.hosts, f.evidence["what"]) for f in out] == [
        ("not-measured", ("a", "b"), "node_exporter metrics")]


def test_two_signals_at_the_same_moment() -> None:
    # found by bench/monitoring.py: an XID and a CRC storm in the same scrape
    from assistant.monitoring import signatures
    from assistant.monitoring.step import findings
    from assistant.monitoring.window import SignalResult

    sigs = {s.id: s for s in signatures.load()}
    results = [SignalResult(sigs[i], {"h1": 100.0}, {"h1": 5.0})
               for i in ("metric-xid-new", "metric-nvlink-crc-rate")]
    out = findings(results, [], {"dcgm-exporter": "Hostname", "node_exporter": "instance"},
                   ["h1"], Window(0, 200, 15))
    first = next(f for f in out if f.code == "monitoring-first-change")
    assert first.evidence["gap_s"] == 0


def test_a_finding_carries_its_signal_over_the_window(prom_config) -> None:  # type: ignore[no-untyped-def]
    # for the JSON, the report and a sparkline: 60-odd points of the accused host's signal
    step = MonitoringStep(prom_config, start=history.T0 + 300, end=history.END)
    outcome = step.run([history.PLANTED["metric-gpu-hot"], history.CALM], lambda _: None)
    hot = next(f for f in outcome.findings if f.code == "metric-gpu-hot")
    values = hot.evidence["series"][history.PLANTED["metric-gpu-hot"]]
    assert 55 <= len(values) <= 62 and values[0] == 65 and values[-1] == 92
    assert hot.evidence["series_step_s"] >= history.STEP


def test_a_jobs_start_opens_the_window_unless_since_says_otherwise(prom_config) -> None:  # type: ignore[no-untyped-def]
    # --job: the window opens when the job started (Slurm's local time); --since wins
    from types import SimpleNamespace

    from assistant.monitoring.step import MonitoringPlan

    target = SimpleNamespace(job=SimpleNamespace(start_time="2026-01-01T01:00:00"))
    plan = MonitoringPlan(MonitoringStep(prom_config), lambda _: None)
    wrapped = plan.wrap(object(), target)
    from datetime import datetime
    assert wrapped._step.start == datetime.fromisoformat("2026-01-01T01:00:00").timestamp()  # type: ignore[union-attr]
    given = MonitoringPlan(MonitoringStep(prom_config, since_given=True), lambda _: None)
    assert given.wrap(object(), target)._step.start is None  # type: ignore[union-attr]


def test_watch_reads_the_window_it_watched(prom, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # diag watch over the planted history (--from/--to, as a watch replayed for a post-mortem
    # would): the cluster's monitoring joins the counters it sampled, in the JSON and the store;
    # the hosts cannot be reached over SSH (no such names), the window still speaks for them
    (tmp_path / "pw").write_text(promserver.PASSWORD)
    (tmp_path / "diag").mkdir()
    (tmp_path / "diag" / "monitoring.yaml").write_text(
        f"prometheus:\n  username: {promserver.USER}\n  password_file: {tmp_path / 'pw'}\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "DIAG_CACHE_DIR": "off"}
    db = tmp_path / "diag.duckdb"
    planted = history.PLANTED["metric-xid-new"]
    run = subprocess.run(
        [sys.executable, "-m", "assistant.cli", "watch", "--hosts", f"{planted},{history.CALM}",
         "--duration", "1s", "--interval", "1s", "--json", "--db", str(db),
         "--prometheus", prom.url, "--from", str(history.T0 + 300), "--to", str(history.END),
         "--connect-timeout", "1", "--deadline", "10"],
        capture_output=True, text=True, env=env, timeout=120)
    doc = json.loads(run.stdout)
    xid = [f for f in doc["findings"] if f["code"] == "metric-xid-new"]
    assert xid and xid[0]["hosts"] == [planted], run.stderr[-2000:]
    rows = subprocess.run(
        [sys.executable, "-m", "assistant.cli", "query", "--db", str(db),
         "select host from findings where code = 'metric-xid-new'"],
        capture_output=True, text=True, env=env, timeout=60)
    assert planted in rows.stdout, rows.stderr
