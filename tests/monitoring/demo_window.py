"""The demo's incident window, recorded from a real Prometheus (fixtures/scenarios/demo/
monitoring.yaml): ``python -m tests.monitoring.demo_window`` writes it again.

The story is the demo's (fixtures/scenarios/demo/scenario.yaml): sixteen H100 nodes in a hung
pretraining job; gpu013's cable on mlx5_6 is marginal, so from 35 minutes before the window's
end that port keeps retraining (link_downed +1 every two minutes, symbol and receive errors
piling up). NCCL busy-waits, so every GPU stays busy (97 % utilization, as the tests' healthy
hosts) and no GPU signal moves: only the link does. Metric names and labels as node_exporter's
infiniband collector and dcgm-exporter publish them; the history goes into a real Prometheus
through promtool, and the monitoring step reads it exactly as a walk would
(tests/monitoring/test_demo_window.py checks the recorded file against a fresh recording).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.monitoring import history

T0 = 1_780_300_800  # 2026-06-01T08:00:00Z: two hours before the demo's page
STEP = 15
POINTS = 2 * 3600 // STEP + 1
END = T0 + (POINTS - 1) * STEP
FLAP_HOST, FLAP_DEVICE = "gpu013", "mlx5_6"
FLAP_START = END - 35 * 60
HOSTS = [f"gpu{i:03d}" for i in range(1, 17)]
DEVICES = [f"mlx5_{i}" for i in range(8)]
FILE = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios" / "demo" / "monitoring.yaml"
RECORDED = ("python -m tests.monitoring.demo_window: the demo's story (gpu013 mlx5_6 flapping "
            "from 35 min before the end) as node_exporter and dcgm-exporter publish it, loaded "
            "into a real Prometheus with promtool, read by the monitoring step")


def _flaps(t: int) -> int:
    """Link-down events on the marginal port up to *t*: one every two minutes."""
    return 0 if t < FLAP_START else (t - FLAP_START) // 120 + 1


def _series(host: str) -> Iterator[tuple[str, str, Callable[[int], float]]]:
    """(metric, labels, value at t) for every series of *host*: every metric the signatures
    read, steady as the tests' healthy hosts have them (tests/monitoring/history.py), and the
    InfiniBand counters per port, the marginal one rising with each link-down event."""
    for metric, (exporter, level, _) in history.GAUGES.items():
        yield metric, history._labels(metric, exporter, host), lambda t, v=level: v
    for metric, (exporter, per_step, _) in history.COUNTERS.items():
        if metric.startswith("node_infiniband"):
            continue
        yield metric, history._labels(metric, exporter, host), (
            lambda t, i=per_step: history.BASE + i * (t - T0) / STEP)
    node = f'instance="{host}:9100",job="node"'
    for device in DEVICES:
        bad = host == FLAP_HOST and device == FLAP_DEVICE
        for metric, per_flap, base in (("node_infiniband_link_downed_total", 1, 2),
                                       ("node_infiniband_symbol_error_total", 180, 14),
                                       ("node_infiniband_port_errors_received_total", 40, 0)):
            yield metric, f'device="{device}",port="1",{node}', (
                lambda t, b=base, r=per_flap if bad else 0: b + r * _flaps(t))


def openmetrics() -> str:
    by_metric: dict[str, list[str]] = {}
    for host in HOSTS:
        for metric, labels, value in _series(host):
            by_metric.setdefault(metric, []).extend(
                f"{metric}{{{labels}}} {value(t):.12g} {t}" for t in range(T0, END + 1, STEP))
    lines: list[str] = []
    for metric, rows in by_metric.items():
        lines.append(f"# TYPE {metric} gauge")
        lines.extend(rows)
    return "\n".join([*lines, "# EOF"]) + "\n"


def record() -> str:
    """The recorded window's YAML, read now from a real Prometheus over this history."""
    from assistant.monitoring.config import PromConfig
    from assistant.monitoring.recorded import dump
    from assistant.monitoring.step import MonitoringStep, iso
    from tests.monitoring import promserver

    server = promserver.PromServer(openmetrics())
    try:
        server.start()
        secret = server.dir / "password"
        secret.write_text(promserver.PASSWORD)
        config = PromConfig(url=server.url, username=promserver.USER,
                            password_file=str(secret), timeout=20)
        said: list[str] = []
        outcome = MonitoringStep(config, start=T0, end=END).run(HOSTS, said.append)
        if said:
            raise RuntimeError("; ".join(said))
    finally:
        server.stop()
    return dump(outcome, {"from": iso(T0), "to": iso(END)}, RECORDED)


if __name__ == "__main__":
    text = record()
    FILE.write_text(text, encoding="utf-8")
    print(f"wrote {FILE} ({len(text)} bytes)", file=sys.stderr)
