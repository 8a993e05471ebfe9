"""An Alertmanager webhook payload (version 4) read into what a walk needs: the runbook (by the
alerts' names, through alert_runbooks.yaml), the hosts (from the labels that name them, a
scrape target's port stripped) and the incident window (from the earliest firing alert).
Pure: no I/O but the shipped map."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from assistant import yamlfile

from .check import HOST_LABELS, strip_port

MAP_FILE = Path(__file__).with_name("alert_runbooks.yaml")
MAX_PAYLOAD = 4 * 1024 * 1024
LEAD = 15 * 60  # the window opens this long before the first alert started


class AlertError(ValueError):
    """A payload diag cannot walk; the message is one line."""


@dataclass(frozen=True)
class AlertWalk:
    group_key: str
    runbook: str
    hosts: tuple[str, ...]
    alerts: tuple[str, ...]
    start: float | None  # the window's start (unix seconds)
    status: str


def load_map(path: Path = MAP_FILE) -> tuple[str, list[tuple[re.Pattern[str], str]]]:
    data = yamlfile.load_file(path).data
    if not isinstance(data, dict) or not isinstance(data.get("map"), list):
        raise AlertError(f"{path}: expected 'default:' and a 'map:' list")
    rules = []
    for entry in data["map"]:
        try:
            rules.append((re.compile(str(entry["match"])), str(entry["runbook"])))
        except (KeyError, TypeError, re.error) as exc:
            raise AlertError(f"{path}: a map entry is not {{match, runbook}}: {exc}") from None
    return str(data.get("default", "hang")), rules


def runbook_for(names: list[str], path: Path = MAP_FILE) -> str:
    default, rules = load_map(path)
    for name in names:
        for pattern, runbook in rules:
            if pattern.search(name):
                return runbook
    return default


def _time(text: object) -> float | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def parse(raw: bytes | str, map_path: Path = MAP_FILE) -> AlertWalk:
    if len(raw) > MAX_PAYLOAD:
        raise AlertError(f"the alert payload is over {MAX_PAYLOAD // 2**20} MiB")
    try:
        doc: Any = json.loads(raw)
    except ValueError as exc:
        raise AlertError(f"the alert payload is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("alerts"), list):
        raise AlertError("not an Alertmanager webhook payload (no 'alerts' list)")
    if str(doc.get("version", "")) != "4":
        raise AlertError(f"Alertmanager webhook version {doc.get('version')!r}: diag reads "
                         "version 4")
    firing = [a for a in doc["alerts"] if isinstance(a, dict)
              and a.get("status", "firing") == "firing"] or \
        [a for a in doc["alerts"] if isinstance(a, dict)]
    names, hosts = [], []
    for alert in firing:
        labels = alert.get("labels") or {}
        if labels.get("alertname"):
            names.append(str(labels["alertname"]))
        host = next((labels[k] for k in HOST_LABELS if labels.get(k)), None)
        if host:
            hosts.append(strip_port(str(host)))
    if not hosts:
        raise AlertError("no alert names a host (labels " + ", ".join(HOST_LABELS) + ")")
    starts = [t for t in (_time(a.get("startsAt")) for a in firing) if t]
    return AlertWalk(group_key=str(doc.get("groupKey", "")),
                     runbook=runbook_for(list(dict.fromkeys(names)), map_path),
                     hosts=tuple(sorted(set(hosts))), alerts=tuple(dict.fromkeys(names)),
                     start=min(starts) - LEAD if starts else None,
                     status=str(doc.get("status", "firing")))
