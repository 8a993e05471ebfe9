"""The incident window as the post-mortem shows it: each monitoring signature that fired, with
its accused hosts' signal over the window (the points the walk recorded in the finding's
evidence), when each host first went abnormal, and a sparkline a reader can see at a glance.

The report's evidence list cuts each finding's evidence to one line, which hides the series;
this is the part of the report (and so of the bundle's report.md / report.json) that keeps
them, summarised: lowest, highest and last value per host beside the line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assistant.monitoring.spark import sparkline

PROBE = "monitoring"
HOSTS_SHOWN = 4


def window_summaries(findings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per recorded monitoring finding that carries its signal, in the order the
    report lists the evidence."""
    out = []
    for finding in findings:
        evidence = finding.get("evidence") or {}
        series = evidence.get("series")
        if finding.get("probe") != PROBE or not isinstance(series, dict) or not series:
            continue
        first = evidence.get("first_abnormal") or {}
        hosts = {}
        for host, values in list(series.items())[:HOSTS_SHOWN]:
            seen = [v for v in values or () if isinstance(v, (int, float))]
            hosts[host] = {
                "first_abnormal": first.get(host),
                "min": min(seen) if seen else None, "max": max(seen) if seen else None,
                "last": seen[-1] if seen else None, "points": len(values or ()),
                "missing": sum(1 for v in values or () if v is None),
                "sparkline": sparkline(values or ())}
        out.append({"code": finding.get("code"), "severity": finding.get("severity"),
                    "metric": evidence.get("metric"), "hosts": list(finding.get("hosts") or ()),
                    "first_host": evidence.get("first_host"),
                    "threshold": evidence.get("threshold"), "op": evidence.get("op"),
                    "from": evidence.get("series_from"), "step_s": evidence.get("series_step_s"),
                    "series": hosts})
    return out


def _number(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def markdown(summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report's "Monitoring window" section (empty when no signature fired with a
    recorded signal)."""
    if not summaries:
        return []
    out = ["", "## Monitoring window", "",
           "What Prometheus recorded over the incident window for each signature that fired "
           "(the accused hosts' signal, lowest to highest over the window; a gap is a time "
           "with no sample, not a healthy one)."]
    for s in summaries:
        rule = f" (abnormal when {s['op']} {_number(s['threshold'])})" if s.get("op") else ""
        out += ["", f"- `{s['code']}` [{s['severity'] or '-'}] {s['metric'] or ''}{rule}, "
                    f"from {s['from'] or '-'} one point every {_number(s['step_s'])} s"]
        for host, one in s["series"].items():
            since = f"abnormal from {one['first_abnormal']}" if one.get("first_abnormal") \
                else "not abnormal"
            out.append(f"  - {host}: `{one['sparkline'] or '(no sample)'}` min "
                       f"{_number(one['min'])}, max {_number(one['max'])}, last "
                       f"{_number(one['last'])}; {since}")
    return out
