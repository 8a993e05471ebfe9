"""The signal beside a monitoring finding in the TUI's evidence pane, as a sparkline."""

from __future__ import annotations

from assistant.monitoring.spark import sparkline
from probes.model import Finding


def test_sparkline_scales_to_the_series_and_shows_gaps() -> None:
    # a GPU at 65 C that went to 92 C, one scrape missing
    assert sparkline([65, 65, None, 92, 92]) == "▁▁ ██"
    assert sparkline([5, 5, 5]) == "▁▁▁"      # flat: no scale to invent
    assert sparkline([None, None]) == ""       # nothing measured draws nothing


def test_evidence_pane_draws_the_signal_not_its_numbers() -> None:
    from assistant.tui.widgets.findings_view import evidence_text

    finding = Finding("metric-gpu-hot", "warning", ("p09",), "A GPU reached 85 C.",
                      "monitoring", {"series": {"p09": [65, 65, 92, 92]},
                                     "series_step_s": 120, "series_from": "2026-01-01T00:05:00Z",
                                     "threshold": 85})
    text = evidence_text(finding).plain
    assert "p09 ▁▁██" in text and "120 s a point" in text and "threshold: 85" in text
    assert "65" not in text.split("threshold")[0].split("point:")[1]
