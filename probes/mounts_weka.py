"""WekaFS client containers for the mounts probe, read from ``weka local ps --json``.

A wekafs mount is served by the node's WEKA client container (the frontend the wekafs kernel
module talks to, /proc/wekafs/interface "Container=<name> ... Connected frontend"): with the
container stopped, I/O on the mount fails or waits. ``weka local ps`` asks the local agent only
(no cluster login; read-only), and ``--json`` prints a list of containers, each with its
``name`` and ``runStatus`` ("Running", "Stopped": weka/weka-operator's node agent,
isContainerRunning, reads exactly these keys; its shell tools read ``weka local ps --no-header``
column 2 as "Stopped"). Protocol containers (envoy, ganesha, samba, smbw, s3: stopped by design
on nodes that serve no protocol, as WEKA's own tools skip them when they walk the containers)
are not judged. The section runs only where a wekafs file system is mounted.

Facts (None: no wekafs mount, or not read): ``weka_containers`` (``{name, run_status}``),
``weka_stopped`` (sorted names of the stopped client containers), ``weka_stopped_count``.
"""

from __future__ import annotations

import json
from typing import Any

WEKA_TIMEOUT_S = 5
PROTOCOL_CONTAINERS = frozenset({"envoy", "ganesha", "samba", "smbw", "s3"})
WEKA_COMMAND = (
    "if grep -q ' - wekafs ' /proc/self/mountinfo 2>/dev/null; then "
    "if command -v weka >/dev/null 2>&1; then "
    f"o=$(timeout {WEKA_TIMEOUT_S} weka local ps --json 2>&1 </dev/null); r=$?; "
    "printf '%s\\n' \"$o\" | head -c 65536; echo; echo \"weka_rc $r\"; "
    "else echo 'weka missing'; fi; else echo 'no wekafs mounts'; fi"
)
WEKA_FACTS = ("weka_containers", "weka_stopped", "weka_stopped_count")


def parse_weka(text: str, facts: dict[str, Any]) -> None:
    """Fill *facts* from the weka section (facts['errors']['weka'] when it was not read)."""
    body = text.strip()
    if body.startswith("no wekafs mounts"):
        return
    if body.startswith("weka missing"):
        facts["errors"]["weka"] = "wekafs is mounted but the weka CLI is not installed"
        return
    lines = [ln for ln in body.splitlines() if not ln.startswith("weka_rc ")]
    if "weka_rc 124" in body.splitlines():
        facts["errors"]["weka"] = (f"weka local ps did not answer within {WEKA_TIMEOUT_S} s "
                                   "(diag's limit): not measured")
        return
    payload = "\n".join(lines).strip()
    try:
        data = json.loads(payload)
    except ValueError:
        first = next((ln.strip() for ln in lines if ln.strip()), "weka printed nothing")
        facts["errors"]["weka"] = first[:200]
        return
    if not isinstance(data, list) or not all(isinstance(c, dict) for c in data):
        facts["errors"]["weka"] = "weka local ps --json printed no container list"
        return
    containers = [{"name": str(c.get("name") or ""), "run_status": c.get("runStatus")}
                  for c in data]
    stopped = sorted(c["name"] for c in containers
                     if c["run_status"] == "Stopped" and c["name"] not in PROTOCOL_CONTAINERS)
    facts.update(weka_containers=containers, weka_stopped=stopped,
                 weka_stopped_count=len(stopped))
