"""The report's monitoring window: each fired signature's recorded signal summarised per
host (range, last value, when it went abnormal, a sparkline); a host with no sample in the
window says so instead of drawing a flat, healthy-looking line."""

from __future__ import annotations

from assistant.store.window_summary import markdown, window_summaries


def finding(code: str, probe: str, series: dict[str, list[float | None]]) -> dict:
    return {"probe": probe, "code": code, "severity": "error", "hosts": list(series),
            "evidence": {"metric": "DCGM_FI_DEV_GPU_TEMP", "first_host": next(iter(series)),
                         "threshold": 87, "op": ">", "series_from": "2026-01-01T00:05:00Z",
                         "series_step_s": 300.0,
                         "first_abnormal": {"gpu07": "2026-01-01T01:40:00Z"},
                         "series": series}}


def test_fired_signatures_keep_their_signal_per_host() -> None:
    found = [finding("metric-gpu-hot", "monitoring", {"gpu07": [65, 70, None, 92.5],
                                                      "gpu09": [None, None]}),
             finding("gpu-hot", "gpu", {"gpu07": [1, 2]}),  # a probe's, not the window's
             {"probe": "monitoring", "code": "not-measured", "hosts": ["gpu11"],
              "evidence": {"what": "node_exporter metrics"}}]
    (hot,) = window_summaries(found)
    assert hot["code"] == "metric-gpu-hot" and hot["first_host"] == "gpu07"
    assert hot["series"]["gpu07"] == {"first_abnormal": "2026-01-01T01:40:00Z", "min": 65,
                                      "max": 92.5, "last": 92.5, "points": 4, "missing": 1,
                                      "sparkline": "▁▂ █"}
    assert hot["series"]["gpu09"]["sparkline"] == "" and hot["series"]["gpu09"]["min"] is None
    text = "\n".join(markdown([hot]))
    assert "## Monitoring window" in text
    assert ("  - gpu07: `▁▂ █` min 65, max 92.5, last 92.5; abnormal from "
            "2026-01-01T01:40:00Z") in text
    assert "  - gpu09: `(no sample)` min -, max -, last -; not abnormal" in text
    assert "(abnormal when > 87), from 2026-01-01T00:05:00Z one point every 300 s" in text


def test_no_window_no_section() -> None:
    assert window_summaries([finding("gpu-hot", "gpu", {"a": [1.0]})]) == []
    assert markdown([]) == []
