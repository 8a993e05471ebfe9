"""``fio --output-format=json``: per-job IOPS and completion-latency p99.

fio may print warnings ("note: both iodepth >= 1 and synchronous I/O engine ...") before the
JSON document, so the first decodable object that looks like fio's is used. Latencies are
converted to microseconds from ``clat_ns`` (fio >= 3) or taken from ``clat`` (older fio,
already in usec). A direction that did no I/O has no percentiles: its p99 is null.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._common import fail

WHAT = "fio JSON"

_OBJECT_START = re.compile(r"^\s*\{", re.MULTILINE)
_MAX_ATTEMPTS = 20


def _document(text: str) -> dict[str, Any]:
    decoder = json.JSONDecoder()
    last_error = "no JSON object found"
    for attempt, m in enumerate(_OBJECT_START.finditer(text)):
        if attempt >= _MAX_ATTEMPTS:
            break
        start = text.index("{", m.start())
        try:
            doc, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            last_error = f"invalid or truncated JSON ({exc.msg} at char {exc.pos})"
            continue
        except ValueError as exc:  # not a syntax error: an integer too long to convert
            last_error = f"invalid JSON ({exc})"
            continue
        if isinstance(doc, dict) and ("jobs" in doc or "fio version" in doc):
            return doc
        last_error = "JSON object has no 'jobs' or 'fio version' key"
    fail(WHAT, last_error)


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _p99_us(section: dict[str, Any]) -> float | None:
    for key, scale in (("clat_ns", 1e-3), ("clat", 1.0)):
        clat = section.get(key)
        if not isinstance(clat, dict):
            continue
        percentiles = clat.get("percentile")
        if isinstance(percentiles, dict):
            value = _number(percentiles.get("99.000000"))
            if value is not None:
                return round(value * scale, 3)
    return None


def _mean_us(section: dict[str, Any], key: str) -> float | None:
    for name, scale in ((f"{key}_ns", 1e-3), (key, 1.0)):
        stats = section.get(name)
        if isinstance(stats, dict):
            value = _number(stats.get("mean"))
            if value is not None:
                return round(value * scale, 3)
    return None


def _job(job: dict[str, Any]) -> dict[str, Any]:
    name = job.get("jobname")
    out: dict[str, Any] = {"name": name if isinstance(name, str) else None}
    for direction in ("read", "write"):
        section = job.get(direction)
        section = section if isinstance(section, dict) else {}
        out[f"{direction}_iops"] = _number(section.get("iops"))
        out[f"{direction}_clat_p99_us"] = _p99_us(section)
        out[f"{direction}_clat_mean_us"] = _mean_us(section, "clat")
        out[f"{direction}_bw_bytes"] = _number(section.get("bw_bytes"))
        out[f"{direction}_io_bytes"] = _number(section.get("io_bytes"))
    out["error"] = _number(job.get("error"))
    return out


def parse(text: str) -> dict[str, Any]:
    """fio version and one entry per job (or per client in client/server mode)."""
    doc = _document(text)
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        stats = doc.get("client_stats")
        jobs = stats if isinstance(stats, list) else []
    version = doc.get("fio version")
    return {
        "fio_version": version if isinstance(version, str) else None,
        "jobs": [_job(job) for job in jobs if isinstance(job, dict)],
    }
