"""``nvidia-smi --query-gpu=... --format=csv``: one CSV row per GPU.

Rows are keyed by the query field without its unit (``memory.used [MiB]`` -> ``memory.used``)
so checks do not depend on whether the probe asked for ``nounits``. Numbers become numbers,
except fields that are identifiers or versions (driver_version, compute_cap, serial, pci.*),
which stay strings: "10.3" is a compute capability, not a float, and "535.129.03" is no number.
"""

from __future__ import annotations

import re
from typing import Any

from ._common import fail, text_lines, to_float, to_int

WHAT = "nvidia-smi --query-gpu --format=csv"

_FIELD = re.compile(r"^(?P<name>[a-z][a-z0-9_.]*)(?:\s*\[(?P<unit>[^\]]*)\])?$")
_VALUE = re.compile(r"^(?P<num>-?\d+(?:\.\d+)?)(?:\s*(?P<unit>%|[A-Za-z/]+))?$")
_STRING_FIELDS = {
    "name",
    "gpu_name",
    "serial",
    "gpu_serial",
    "uuid",
    "gpu_uuid",
    "gpu_bus_id",
    "compute_cap",
    "timestamp",
    "board_id",
    "display_mode",
    "display_active",
}


def _is_string_field(field: str) -> bool:
    return (
        field in _STRING_FIELDS
        or field.startswith(("pci.", "inforom.", "driver_", "vbios"))
        or field.endswith("version")
    )


def _value(field: str, raw: str) -> str | int | float | None:
    raw = raw.strip()
    if raw in ("", "N/A") or (raw.startswith("[") and raw.endswith("]")):
        return None  # [N/A], [Not Supported], [Unknown Error], [GPU requires reset] ...
    if _is_string_field(field):
        return raw
    m = _VALUE.match(raw)
    if not m:
        return raw
    number = m.group("num")
    return to_int(number) if "." not in number else to_float(number)


def parse(text: str) -> dict[str, Any]:
    """Header-keyed rows; rows whose cell count differs from the header are skipped."""
    lines = [line.strip() for line in text_lines(text) if line.strip()]
    if not lines:
        fail(WHAT, "empty input")
    fields: list[str] = []
    units: dict[str, str | None] = {}
    for cell in lines[0].split(","):
        m = _FIELD.match(cell.strip())
        if not m:
            fail(WHAT, f"first line is not a CSV header of query fields ({cell.strip()[:40]!r})")
        fields.append(m.group("name"))
        units[m.group("name")] = m.group("unit")
    rows: list[dict[str, Any]] = []
    skipped = 0
    for line in lines[1:]:
        cells = line.split(",")
        if len(cells) != len(fields):
            skipped += 1
            continue
        rows.append({field: _value(field, cell) for field, cell in zip(fields, cells, strict=True)})
    if not rows:
        fail(WHAT, "header found but no data row with a matching number of cells")
    return {"fields": fields, "units": units, "rows": rows, "skipped_lines": skipped}
