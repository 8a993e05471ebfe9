"""The training job's own metrics (optional; named by the site under prometheus.training):
a loss or gradient norm that stops being a finite number and a step time that slows to below
0.7 of its best are found on their host with the time they started, over a real Prometheus;
a healthy job's noisy step time, finite gradient spikes and falling loss raise nothing."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.monitoring.config import ConfigError, PromConfig, resolve
from assistant.monitoring.step import MonitoringStep, iso
from probes.model import Finding
from tests.monitoring import promserver

T0, STEP = 1_767_225_600, 15
END = T0 + 2 * 3600
NAN_LOSS, INF_GRAD, SLOW, TWIN, CALM = "t01", "t02", "t03", "t04", "t05"
STARTS = {NAN_LOSS: T0 + 3600, INF_GRAD: T0 + 3900, SLOW: T0 + 4200}
NAMES = {"loss": "my_loss", "grad_norm": "my_grad_norm", "step_time": "my_step_seconds"}


def _value(metric: str, host: str, i: int, t: int) -> float:
    broken = host in STARTS and t >= STARTS[host]
    if metric == "my_loss":
        return math.nan if broken and host == NAN_LOSS else 2.5 - 0.5 * i / 480 + 0.02 * (i % 3)
    if metric == "my_grad_norm":
        if broken and host == INF_GRAD:
            return math.inf
        return 8.0 if i % 40 == 0 else 1.0 + 0.1 * (i % 5)  # clipped spikes, finite
    if broken and host == SLOW:
        return 2.1
    return 1.2 if i % 10 == 0 else (0.9 if i % 2 else 1.1)  # logging steps, jitter


def openmetrics() -> str:
    lines = []
    for metric in NAMES.values():
        lines.append(f"# TYPE {metric} gauge")
        for host in (NAN_LOSS, INF_GRAD, SLOW, TWIN, CALM):
            for i, t in enumerate(range(T0, END + 1, STEP)):
                value = _value(metric, host, i, t)
                text = "NaN" if value != value else ("+Inf" if value == math.inf else f"{value:g}")
                lines.append(f'{metric}{{instance="{host}:8000",job="train"}} {text} {t}')
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def train_prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    reason = promserver.unavailable_reason()
    if reason:
        promserver.skip_or_fail(reason)
    server = promserver.PromServer(openmetrics())
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        server.stop()
        promserver.skip_or_fail(f"Prometheus did not start: {exc}")
    password = tmp_path_factory.mktemp("train") / "password"
    password.write_text(promserver.PASSWORD)
    try:
        yield server.url, password
    finally:
        server.stop()


def run(url: str, password: Path, training: dict[str, str]) -> list[Finding]:
    config = PromConfig(url=url, username=promserver.USER, password_file=str(password),
                        timeout=10, training=training)
    said: list[str] = []
    outcome = MonitoringStep(config, start=T0 + 300, end=END).run(
        [NAN_LOSS, INF_GRAD, SLOW, TWIN, CALM], said.append)
    assert said == []
    return outcome.findings


def test_the_jobs_own_signals_fire_on_their_host_and_time(train_prom: tuple[str, Path]) -> None:
    found = run(*train_prom, NAMES)
    fired = {f.code: f for f in found if f.code.startswith("training-")}
    assert set(fired) == {"training-loss-not-finite", "training-grad-norm-not-finite",
                          "training-step-time-slowdown"}
    for code, host in (("training-loss-not-finite", NAN_LOSS),
                       ("training-grad-norm-not-finite", INF_GRAD),
                       ("training-step-time-slowdown", SLOW)):
        finding = fired[code]
        assert finding.hosts == (host,), (code, finding.hosts)
        assert finding.evidence["first_abnormal"] == {host: iso(STARTS[host])}
        assert finding.evidence["metric"] in NAMES.values()
    # every host's job metrics were read (this server has no dcgm/node exporter: those are
    # "not measured", as they should be)
    assert [f.evidence["what"] for f in found if f.code == "not-measured"] == [
        "dcgm-exporter metrics", "node_exporter metrics"]


def test_without_names_the_job_is_not_read(train_prom: tuple[str, Path]) -> None:
    found = run(*train_prom, {})
    assert not [f for f in found if f.code.startswith("training-")]
    # only the loss named: only the loss is judged
    found = run(*train_prom, {"loss": "my_loss"})
    assert [f.code for f in found if f.code.startswith("training-")] == [
        "training-loss-not-finite"]


def test_a_name_that_is_not_a_metric_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "monitoring.yaml"
    path.write_text("prometheus:\n  url: http://127.0.0.1:9\n  training:\n"
                    "    loss: 'my_loss{job=\"x\"} or vector(1)'\n")
    with pytest.raises(ConfigError, match=r"training\.loss: .* is not a Prometheus metric"):
        resolve(path=path)
    path.write_text("prometheus:\n  url: http://127.0.0.1:9\n  training:\n    los: my_loss\n")
    with pytest.raises(ConfigError, match="training is a mapping of"):
        resolve(path=path)
    path.write_text("prometheus:\n  url: http://127.0.0.1:9\n  training:\n    loss: my_loss\n")
    chosen = resolve(path=path)
    assert chosen is not None and chosen.training == {"loss": "my_loss"}
