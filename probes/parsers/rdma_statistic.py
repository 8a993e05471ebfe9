"""``rdma statistic show`` (iproute2): per-port RDMA hardware counters.

Prints ``link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 ...`` as one long line per port,
or one counter per line with ``-p``; both are a stream of name/value pairs after
``link <dev>/<port>``, so the parser tokenises instead of reading lines. ``-j`` JSON is
accepted too. Non-numeric pairs (``qp-type RC``, ``comm ib_write_bw`` in ``statistic qp``
output) go to ``attributes``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._common import fail, strip_prefix, text_lines

WHAT = "rdma statistic show"

_LINK = re.compile(r"^[^\s/]+/\d+$")
_INT = re.compile(r"^-?\d+$")
_ATTRIBUTE_KEYS = {"cntn", "pid", "lqpn", "qp-type", "comm"}


def _from_json(text: str) -> list[dict[str, Any]] | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, list):
        return None
    ports = []
    for item in doc:
        if not isinstance(item, dict) or "ifname" not in item:
            continue
        counters = {k: v for k, v in item.items() if isinstance(v, int) and not isinstance(v, bool)}
        port = counters.pop("port", item.get("port"))
        ports.append({"link": f"{item['ifname']}/{port}", "counters": counters, "attributes": {}})
    return ports or None


def parse(text: str) -> dict[str, Any]:
    """Ports in printed order with their integer counters."""
    stripped = text.strip()
    if stripped.startswith("["):
        from_json = _from_json(stripped)
        if from_json:
            return {"ports": from_json}
    tokens = " ".join(strip_prefix(line) for line in text_lines(text)).split()
    ports: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "link" and i + 1 < len(tokens) and _LINK.match(tokens[i + 1]):
            current = {"link": tokens[i + 1], "counters": {}, "attributes": {}}
            ports.append(current)
            i += 2
            continue
        if current is None or i + 1 >= len(tokens):
            i += 1
            continue
        key, value = token.rstrip(":"), tokens[i + 1]
        if _INT.match(value) and key.lower() not in _ATTRIBUTE_KEYS:
            current["counters"][key] = int(value)
        else:
            current["attributes"][key] = value.strip("<>")
        i += 2
    if not ports:
        fail(WHAT, "no 'link <device>/<port>' entry found")
    return {"ports": ports}
