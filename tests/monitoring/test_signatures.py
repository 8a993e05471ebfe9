"""Every metric signature over a real Prometheus: it fires on its planted window, on the right
host at the right time, and stays quiet on the healthy twin (utilization 98 %, power at its cap,
steady counters, a counter reset after a reboot) and on a calm host; a host with no series is
not measured."""

from __future__ import annotations

import pytest

from assistant.monitoring import signatures
from assistant.monitoring.client import PromClient
from assistant.monitoring.window import Window, counter_resets, evaluate
from tests.monitoring import history

SIGS = {s.id: s for s in signatures.load()}
WINDOW = Window(history.T0 + 300, history.END, history.STEP)
LABELS = {"dcgm-exporter": "Hostname", "node_exporter": "instance"}


def test_every_signature_has_a_planted_window() -> None:
    # a signature nobody planted would be tested by nothing (the training job's own metrics
    # are planted in tests/monitoring/test_training.py, under names the site chooses)
    from tests.monitoring.test_training import STARTS

    training = {s.id for s in SIGS.values() if s.exporter == "training"}
    assert set(SIGS) - training == set(history.PLANTS)
    assert len(training) == len(STARTS) == 3


@pytest.mark.parametrize("sig_id", sorted(history.PLANTS))
def test_signature_fires_on_its_window_only(prom_config, sig_id: str) -> None:  # type: ignore[no-untyped-def]
    sig = SIGS[sig_id]
    hosts = [*history.hosts(), history.DARK]
    with PromClient(prom_config) as client:
        result = evaluate(client, sig, WINDOW, LABELS[sig.exporter], hosts)
    assert result.error is None
    planted = history.PLANTED[sig_id]
    assert set(result.first_abnormal) == {planted}, result.first_abnormal
    start = history.fault_start(sig_id)
    # first seen at the fault's first sample, or within one rate window after it
    assert start <= result.first_abnormal[planted] <= start + 60 + history.STEP
    assert result.first_host == planted
    assert result.not_measured == [history.DARK]


def test_counter_reset_is_told_from_a_rise(prom_config) -> None:  # type: ignore[no-untyped-def]
    # the twin's counters fell to 0 at its reboot: a reset, and no signature read it as errors
    with PromClient(prom_config) as client:
        resets = counter_resets(client, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                                WINDOW, "Hostname", history.hosts())
    assert resets == {history.TWIN: 1}


def test_catalogue_refuses_a_query_not_aggregated_by_host(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "x.yaml"
    bad.write_text(
        "family: x\nsignatures:\n  - {id: a-b, exporter: node_exporter, metric: m, since: s,"
        " kind: gauge, query: 'm{$sel}', op: gt, threshold: 1, meaning: m, source: s,"
        " twin: t, severity: warning, scope: host}\n")
    with pytest.raises(signatures.SignatureError, match="aggregate 'by"):
        signatures.load(tmp_path)
