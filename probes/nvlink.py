"""nvlink: NVLink link state and error counters, sampled twice so rising counters stand out.

NCCL moves most of a node's all-reduce traffic over NVLink. A link that went inactive pushes that
traffic onto PCIe; a link that keeps corrupting flits is replayed and retrained (recovered) in
hardware, slowing every collective that crosses it until it drops. One script reads:

- ``nvidia-smi --query-gpu=index,pci.bus_id`` to give every GPU its bus id;
- ``nvidia-smi nvlink -s``: per GPU, each link's speed in GB/s or ``<inactive>``; NVML's own line
  "Unable to retrieve NVLink information as all links are inActive" for a GPU whose links are all
  down, and "...: Not Supported" (or nothing) on a PCIe board without NVLink;
- ``nvidia-smi nvlink -e`` twice, ``SAMPLE_INTERVAL_S`` apart: the per-link error counters. Their
  names differ across generations: "Replay Errors", "Recovery Errors", "CRC Errors" (NVLink 2-4;
  older drivers split "CRC FLIT Errors" / "CRC Data Errors"), and on NVLink 5 (Blackwell, R570 on)
  the NVML ``NVML_FI_DEV_NVLINK_COUNT_*`` set ("Rx Errors", "Local link integrity Errors", "Link
  recovery failed events", "Effective Errors", "Symbol Errors", ...). Packet/byte counts, BER and
  FEC histograms are dropped on the host (they are thousands of lines on an NVL72 tray).

Counters are totals since the driver loaded (or ``nvidia-smi nvlink -re``): a non-zero total that
does not move during the sample is history, so every counter also gets a ``<name>_delta``. A
counter that went down between the samples was reset: its delta is the second value.

Facts (probes/catalog.yaml): ``links`` (one entry per GPU link: ``name`` ("GPU3 link 7"),
``gpu``, ``bus_id``, ``link``, ``active``, ``speed_gb_s``, ``speed_max_gb_s`` (the host's
fastest active link), ``all_links_inactive``, ``gpu_links_active`` (active links of the same
GPU), ``addin_card`` (a PCIe / NVL / workstation board, whose NVLink is an optional bridge),
each counter and its ``_delta``, ``crc_delta`` and ``crc_rate_per_s``),
``nvlink_present`` (False on a node whose GPUs have no NVLink: that is no fault), ``links_total``,
``links_active``, ``links_inactive``, ``gpus_all_inactive``, the host's summed ``*_delta``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    failure_text,
    guard_parse,
    not_measured,
    script,
    split_sections,
)
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "nvlink"
SAMPLE_INTERVAL_S = 2

# nvidia-smi's counter names (lower case) -> fact key. "CRC Errors" is the flow-control (FLIT) CRC
# counter, NVML_NVLINK_ERROR_DL_CRC_FLIT; the data CRC counter is printed apart when supported.
COUNTERS = {
    "replay errors": "replay",
    "recovery errors": "recovery",
    "crc errors": "crc_flit",
    "crc flit errors": "crc_flit",
    "crc data errors": "crc_data",
    "rx errors": "rx_errors",
    "rx remote errors": "rx_remote_errors",
    "rx general errors": "rx_general_errors",
    "local link integrity errors": "local_link_integrity_errors",
    "malformed packet errors": "malformed_packet_errors",
    "buffer overrun errors": "buffer_overrun_errors",
    "tx discards": "tx_discards",
    "link recovery successful events": "recovery_successful",
    "link recovery failed events": "recovery_failed",
    "total link recovery events": "recovery_events",
    "effective errors": "effective_errors",
    "symbol errors": "symbol_errors",
}
COUNTER_KEYS = tuple(dict.fromkeys(COUNTERS.values()))
# Host-level sums of these deltas are facts of their own.
HOST_DELTAS = ("replay", "recovery", "crc_flit", "crc_data", "effective_errors",
               "recovery_failed")

_DROP = "Tx packets|Tx bytes|Rx packets|Rx bytes|BER|FEC"


def _bounded(command: str, lines: int) -> str:
    """*command* with its output cut to *lines* lines of 300 characters, keeping its status."""
    return (f"out=$({command} 2>&1); rc=$?; printf '%s\\n' \"$out\" | grep -v -E '{_DROP}' "
            f"| cut -c1-300 | head -n {lines}; (exit $rc)")


_SECTIONS = [
    ("gpus", _bounded("timeout 5 nvidia-smi --query-gpu=index,pci.bus_id --format=csv", 80)),
    ("status", _bounded("timeout 5 nvidia-smi nvlink -s", 600)),
    ("errors_1", _bounded("timeout 5 nvidia-smi nvlink -e", 2500)),
    ("errors_2", f"sleep {SAMPLE_INTERVAL_S}; "
                 + _bounded("timeout 5 nvidia-smi nvlink -e", 2500)),
]
_REQUIRES = {name: "nvidia-smi" for name, _ in _SECTIONS}

_GPU_LINE = re.compile(r"^\s*GPU\s+(\d+):", re.M)
# Names of add-in boards whose NVLink is an optional bridge: "NVIDIA A100-PCIE-40GB",
# "NVIDIA A100 80GB PCIe", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", and the
# workstation boards (A40, RTX, Quadro, TITAN). SXM / HGX / Grace parts ("A100-SXM4-80GB",
# "H100 80GB HBM3", "H200", "B200", "GB200", "GH200 480GB") do not match.
_ADDIN = re.compile(r"PCIe|\bNVL\b|\bA40\b|\bRTX\b|Quadro|TITAN", re.I)


def command(params: Mapping[str, Any]) -> str:
    return script(_SECTIONS, _REQUIRES)


# --- parsing ---------------------------------------------------------------------------------

def _bus_ids(text: str) -> dict[int, str]:
    try:
        rows = parse_kind("nvidia-smi-query", text)["rows"]
    except ParseError:
        return {}
    return {row["index"]: str(row["pci.bus_id"]) for row in rows
            if isinstance(row.get("index"), int) and row.get("pci.bus_id")}


def _nvlink_gpus(text: str) -> list[dict[str, Any]] | None:
    """The GPUs of an ``nvidia-smi nvlink -s/-e`` output; [] when it lists no link (no NVLink),
    None when it is not that command's output at all."""
    try:
        return list(parse_kind("nvidia-smi-nvlink", text)["gpus"])
    except ParseError:
        if not text.strip():
            return []  # drivers that print nothing for boards without NVLink
        indices = [int(i) for i in _GPU_LINE.findall(text)]
        if indices:  # GPU lines and no link at all: PCIe boards
            return [{"index": i, "links": []} for i in indices]
        return None


def _counters(gpus: list[dict[str, Any]]) -> dict[tuple[int | None, int], dict[str, int]]:
    out: dict[tuple[int | None, int], dict[str, int]] = {}
    for gpu in gpus:
        for link in gpu.get("links") or []:
            values = out.setdefault((gpu.get("index"), link["link"]), {})
            for name, value in (link.get("counters") or {}).items():
                key = COUNTERS.get(" ".join(name.lower().split()))
                if key and isinstance(value, int):
                    values[key] = value
    return out


def _delta(first: int | None, second: int | None) -> int | None:
    if first is None or second is None:
        return None
    return second - first if second >= first else second  # reset between the samples


def _sum(values: list[Any]) -> int | None:
    known = [v for v in values if isinstance(v, int)]
    return sum(known) if known else None


def _read(sections: dict[str, Any], name: str, facts: dict[str, Any]) -> str | None:
    sec = sections.get(name)
    if sec is None or sec.missing:
        facts["missing"].append(name)
        return None
    if sec.rc != 0 and not _GPU_LINE.search(sec.text):
        facts["errors"][name] = failure_text(sec.text, sec.rc)
        return None
    return str(sec.text)


def addin_card(name: Any) -> bool | None:
    """Whether the GPU is an add-in card whose NVLink is an optional bridge (A100/H100 PCIe,
    H100/H200 NVL, workstation boards), by the name nvidia-smi prints; None when unnamed.

    Such a card with no bridge installed reports every link down (NVSentinel PR #1481: an A100
    80GB PCIe without a bridge, all 12 links "down" on driver 570.133.20, a false
    DCGM_FR_NVLINK_DOWN), while on SXM / HGX / Grace boards the links are part of the board.
    """
    if not isinstance(name, str) or not name.strip():
        return None
    return bool(_ADDIN.search(name))


def _links(status: list[dict[str, Any]], buses: dict[int, str]) -> list[dict[str, Any]]:
    listed = [g for g in status if g.get("links")]
    most = max((len(g["links"]) for g in listed), default=0)
    links: list[dict[str, Any]] = []
    for gpu in status:
        index = gpu.get("index")
        entries = [(link["link"], link.get("active"), link.get("speed_gb_s"), False)
                   for link in gpu.get("links") or []]
        if not entries and gpu.get("all_links_inactive"):
            # NVML reports no link at all: as many links down as the host's other GPUs have
            entries = [(n, False, None, True) for n in range(most)] or [(None, False, None, True)]
        up = sum(1 for _, active, _, _ in entries if active is True)
        for number, active, speed, all_down in entries:
            links.append({"name": f"GPU{index if index is not None else '?'} link "
                                  f"{number if number is not None else 'all'}",
                          "gpu": index, "bus_id": buses.get(index) if index is not None else None,
                          "link": number, "active": active, "speed_gb_s": speed,
                          "all_links_inactive": all_down, "gpu_links_active": up,
                          "addin_card": addin_card(gpu.get("name"))})
    return links


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if not {"status", "errors_1"} & set(sections):
        raise ParseError("nvlink: neither a status nor an errors section")
    facts: dict[str, Any] = {
        "nvlink_present": None, "gpu_count": None, "links": [], "links_total": None,
        "links_active": None, "links_inactive": None, "gpus_all_inactive": None,
        "sample_interval_s": None, "missing": [], "errors": {},
        **{f"{key}_delta": None for key in HOST_DELTAS},
    }
    gpus_text = _read(sections, "gpus", facts)
    buses = _bus_ids(gpus_text) if gpus_text else {}
    status_text = _read(sections, "status", facts)
    status = _nvlink_gpus(status_text) if status_text is not None else None
    if status_text is not None and status is None:
        facts["errors"]["status"] = failure_text(status_text, 0)
    samples = []
    for name in ("errors_1", "errors_2"):
        sample_text = _read(sections, name, facts)
        parsed = _nvlink_gpus(sample_text) if sample_text is not None else None
        if sample_text is not None and parsed is None:
            facts["errors"][name] = failure_text(sample_text, 0)
        samples.append(_counters(parsed) if parsed is not None else None)
    if status is None:
        return facts

    links = _links(status, buses)
    facts["gpu_count"] = len(status)
    facts["nvlink_present"] = bool(links)
    facts["gpus_all_inactive"] = sorted({e["gpu"] for e in links if e["all_links_inactive"]
                                         and e["gpu"] is not None})
    facts["links_total"] = len(links)
    facts["links_active"] = sum(1 for e in links if e["active"] is True)
    facts["links_inactive"] = sum(1 for e in links if e["active"] is False)
    speeds = [e["speed_gb_s"] for e in links if e["active"] and e["speed_gb_s"] is not None]
    first, second = samples
    if first is not None and second is not None:
        facts["sample_interval_s"] = float(SAMPLE_INTERVAL_S)
    for entry in links:
        entry["speed_max_gb_s"] = max(speeds) if speeds else None
        before = (first or {}).get((entry["gpu"], entry["link"]), {})
        after = (second or {}).get((entry["gpu"], entry["link"]), {})
        for key in COUNTER_KEYS:
            entry[key] = after.get(key, before.get(key))
            entry[f"{key}_delta"] = _delta(before.get(key), after.get(key))
        crc = [entry["crc_flit_delta"], entry["crc_data_delta"]]
        entry["crc_delta"] = _sum(crc)
        entry["crc_rate_per_s"] = (round(entry["crc_delta"] / SAMPLE_INTERVAL_S, 2)
                                   if entry["crc_delta"] is not None else None)
    for key in HOST_DELTAS:
        facts[f"{key}_delta"] = _sum([e[f"{key}_delta"] for e in links])
    facts["links"] = links
    return facts


parse = guard_parse(NAME, _parse)


# --- checks: only what could not be read (the faults are in probes/faults/nvlink.yaml) ------

def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    missing, errors = facts.get("missing") or [], facts.get("errors") or {}
    if "status" in missing or "errors_1" in missing:
        return [not_measured(NAME, host, "NVLink state and error counters",
                             "nvidia-smi is not installed")]
    if facts.get("nvlink_present") is None:
        findings.append(not_measured(NAME, host, "NVLink link state",
                                     errors.get("status", "no nvidia-smi nvlink -s output")))
    if facts.get("nvlink_present") is not False and facts.get("sample_interval_s") is None:
        why = errors.get("errors_1") or errors.get("errors_2") or "no second sample"
        findings.append(not_measured(NAME, host, "NVLink error counters (nvidia-smi nvlink -e)",
                                     why))
    return findings


PROBE = Probe(NAME, command, parse, check, timeout_s=45.0)
