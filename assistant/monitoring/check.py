"""``diag monitoring check``: what the configured Prometheus holds for diag — is it reachable,
which exporters' metrics are there (and which metric-name generation), which label names the
host on each exporter's series, and at what interval they are scraped. Every question is one
aggregated query (no series are dumped)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .client import PromClient, PromError

# exporter -> (a metric every deployment of it exports, the pattern of its metric names)
EXPORTERS = {
    "dcgm-exporter": ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_.+"),
    "node_exporter": ("node_uname_info",
                      "node_(uname_info|exporter_build_info|infiniband|network|netstat_Tcp|disk"
                      "|pressure|filesystem)_.*"),
}
# Where each exporter writes the host by default: dcgm-exporter its `Hostname` label,
# node_exporter only the scrape target (`instance`, with its port).
HOST_LABELS = ("Hostname", "node", "host", "instance")
PORT = re.compile(r":\d+$")


def strip_port(value: str) -> str:
    """``node0001:9100`` -> ``node0001`` (an IPv6 target ``[::1]:9100`` -> ``[::1]``)."""
    return PORT.sub("", value)


@dataclass
class ExporterState:
    name: str
    metrics: list[str] = field(default_factory=list)
    host_label: str | None = None
    hosts: int = 0
    generation: str = ""


@dataclass
class CheckReport:
    url: str
    version: str = ""
    exporters: dict[str, ExporterState] = field(default_factory=dict)
    scrape_interval: str = ""
    job_intervals: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"url": self.url, "version": self.version, "scrape_interval": self.scrape_interval,
                "job_intervals": self.job_intervals, "problems": self.problems,
                "exporters": {n: {"metrics": len(e.metrics), "host_label": e.host_label,
                                  "hosts": e.hosts, "generation": e.generation}
                              for n, e in self.exporters.items()}}


def host_label(client: PromClient, metric: str, configured: str | None = None,
               at: float | None = None) -> tuple[str | None, int]:
    """The label of *metric*'s series that names hosts, and how many hosts it names."""
    for label in ([configured] if configured else []) + [x for x in HOST_LABELS if x != configured]:
        rows = client.query(f"count(count by ({label}) ({metric}{{{label}!=\"\"}}))", at=at)
        count = int(rows[0].points[0][1]) if rows and rows[0].points else 0
        if count:
            return label, count
    return None, 0


def generation(name: str, metrics: list[str]) -> str:
    if name == "dcgm-exporter":
        if "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in metrics:
            return "DCGM 3.3+ names (DCGM_FI_DEV_CLOCKS_EVENT_REASONS)"
        if "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in metrics:
            return "pre-3.3 names (DCGM_FI_DEV_CLOCK_THROTTLE_REASONS)"
    if name == "node_exporter" and any(m.startswith("node_pressure_") for m in metrics):
        return "node_exporter 0.18+ (pressure collector)"
    return ""


def check(client: PromClient, configured: dict[str, str] | None = None,
          at: float | None = None) -> CheckReport:
    """What the server holds at *at* (now by default). Raises PromError only when the server
    cannot be asked at all."""
    report = CheckReport(url=client.config.url)
    report.version = str(client.buildinfo().get("version", ""))
    for name, (marker, pattern) in EXPORTERS.items():
        rows = client.query(f'count by (__name__) ({{__name__=~"{pattern}"}})', at=at)
        state = ExporterState(name, sorted(r.labels.get("__name__", "") for r in rows))
        state.generation = generation(name, state.metrics)
        if state.metrics:
            state.host_label, state.hosts = host_label(client, marker,
                                                       (configured or {}).get(name), at)
            if state.host_label is None:
                report.problems.append(f"{name}: no series of {marker} carries a host label "
                                       f"({', '.join(HOST_LABELS)}); set host_label")
        else:
            report.problems.append(f"{name}: no metrics (exporter not deployed or not scraped)")
        report.exporters[name] = state
    try:
        report.scrape_interval, report.job_intervals = intervals(client.config_yaml())
    except PromError as exc:
        report.problems.append(f"scrape interval unknown: {exc}")
    return report


def intervals(config_text: str) -> tuple[str, dict[str, str]]:
    try:
        config = yaml.safe_load(config_text) or {}
    except yaml.YAMLError:
        return "", {}
    default = str((config.get("global") or {}).get("scrape_interval", "1m"))
    jobs = {str(job.get("job_name")): str(job.get("scrape_interval", default))
            for job in config.get("scrape_configs") or [] if isinstance(job, dict)}
    return default, jobs
