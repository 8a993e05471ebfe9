"""Metric signatures as data (probes/faults/metrics/*.yaml, docs/monitoring.md): what a metric's
history means, as a PromQL template aggregated by host on the server, a threshold with its
published source, and the healthy twin that must not match. Loaded strictly: an unknown key, a
missing one, an unknown operator or a template without its host aggregation is refused with
the file and the signature."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from string import Template

from assistant import yamlfile

OPS: dict[str, Callable[[float, float], bool]] = {
    "gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le}
EXPORTERS = ("dcgm-exporter", "node_exporter", "training")
REQUIRED = ("id", "exporter", "metric", "since", "kind", "query", "op", "threshold",
            "meaning", "source", "twin", "severity", "scope")
OPTIONAL = ("prefilter",)
# What a training signature's query may name besides $host/$sel/$range: the job's own metrics,
# named by the site in monitoring.yaml (prometheus.training).
TRAINING_NAMES = ("loss", "grad_norm", "step_time")
_PLACEHOLDER = re.compile(r"\$(\w+)")
ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class SignatureError(ValueError):
    pass


@dataclass(frozen=True)
class MetricSignature:
    id: str
    exporter: str
    metric: str
    since: str
    kind: str
    query: str
    op: str
    threshold: float
    meaning: str
    source: str
    twin: str
    severity: str
    scope: str
    family: str
    # A cheap necessary condition read without a subquery (raw *_over_time over the window):
    # (query, op, threshold). Only hosts that pass it get the per-step query.
    prefilter: tuple[str, str, float] | None = None

    def promql(self, host_label: str, selector: str, rate_range: str) -> str:
        return Template(self.query).substitute(host=host_label, sel=selector, range=rate_range)

    def abnormal(self, value: float) -> bool:
        return OPS[self.op](value, self.threshold)

    def names(self) -> set[str]:
        """The job's metric names the query needs (a training signature's)."""
        return {n for n in _PLACEHOLDER.findall(self.query + self.metric)
                if n in TRAINING_NAMES}

    def bound(self, names: dict[str, str]) -> MetricSignature:
        """This signature with the site's metric names in its query and metric."""
        from dataclasses import replace

        return replace(self, query=Template(self.query).safe_substitute(names),
                       metric=Template(self.metric).safe_substitute(names))


def load(directory: Path | None = None) -> list[MetricSignature]:
    import probes.faults as faults_pkg

    base = directory or Path(faults_pkg.__file__).parent / "metrics"
    out: list[MetricSignature] = []
    seen: set[str] = set()
    for path in sorted(base.glob("*.yaml")):
        try:
            data = yamlfile.load_file(path).data
        except yamlfile.YamlFileError as exc:
            raise SignatureError(str(exc)) from None
        family = data.get("family") if isinstance(data, dict) else None
        items = data.get("signatures") if isinstance(data, dict) else None
        if not isinstance(family, str) or not isinstance(items, list):
            raise SignatureError(f"{path}: expected 'family:' and a 'signatures:' list")
        for item in items:
            sig = _one(path, family, item)
            if sig.id in seen:
                raise SignatureError(f"{path}: {sig.id}: the id is used twice")
            seen.add(sig.id)
            out.append(sig)
    return out


def _one(path: Path, family: str, item: object) -> MetricSignature:
    if not isinstance(item, dict):
        raise SignatureError(f"{path}: a signature is not a mapping")
    name = f"{path.name}: {item.get('id', '?')}"
    unknown = sorted(set(item) - set(REQUIRED) - set(OPTIONAL))
    missing = [k for k in REQUIRED if k not in item]
    if unknown or missing:
        raise SignatureError(f"{name}: " + "; ".join(
            ([f"unknown key(s) {', '.join(unknown)}"] if unknown else [])
            + ([f"missing {', '.join(missing)}"] if missing else [])))
    if not ID.match(str(item["id"])):
        raise SignatureError(f"{name}: the id must be lowercase-with-dashes")
    if item["exporter"] not in EXPORTERS:
        raise SignatureError(f"{name}: exporter must be one of {', '.join(EXPORTERS)}")
    if item["op"] not in OPS:
        raise SignatureError(f"{name}: op must be one of {', '.join(OPS)}")
    if item["kind"] not in ("gauge", "counter"):
        raise SignatureError(f"{name}: kind must be gauge or counter")
    query = str(item["query"])
    if "by ($host)" not in query or "$sel" not in query:
        raise SignatureError(f"{name}: the query must aggregate 'by ($host)' on the server "
                             "and select hosts with $sel")
    if item["kind"] == "counter" and "$range" not in query:
        raise SignatureError(f"{name}: a counter's query takes a rate over $range")
    try:
        Template(query).substitute(host="h", sel="s", range="1m",
                                   **({n: n for n in TRAINING_NAMES}
                                      if item["exporter"] == "training" else {}))
        threshold = float(item["threshold"])
    except (KeyError, ValueError) as exc:
        raise SignatureError(f"{name}: {exc}") from None
    prefilter = _prefilter(name, item.get("prefilter"))
    return MetricSignature(
        id=str(item["id"]), exporter=str(item["exporter"]), metric=str(item["metric"]),
        since=str(item["since"]), kind=str(item["kind"]), query=query, op=str(item["op"]),
        threshold=threshold, meaning=str(item["meaning"]), source=str(item["source"]),
        twin=str(item["twin"]), severity=str(item["severity"]), scope=str(item["scope"]),
        family=family, prefilter=prefilter)


def _prefilter(name: str, spec: object) -> tuple[str, str, float] | None:
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) != {"query", "op", "threshold"}:
        raise SignatureError(f"{name}: prefilter is {{query, op, threshold}}")
    query = str(spec["query"])
    if "by ($host)" not in query or "$window" not in query or "$sel" not in query:
        raise SignatureError(f"{name}: a prefilter aggregates 'by ($host)' over $window")
    if spec["op"] not in OPS:
        raise SignatureError(f"{name}: prefilter op must be one of {', '.join(OPS)}")
    try:
        return query, str(spec["op"]), float(spec["threshold"])
    except (TypeError, ValueError):
        raise SignatureError(f"{name}: prefilter threshold must be a number") from None
