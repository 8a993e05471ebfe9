"""nvlink: NVLink link state and error counters, sampled twice so rising counters stand out.

NCCL moves most of a node's all-reduce traffic over NVLink. A link that went inactive pushes that
traffic onto PCIe; a link that keeps corrupting flits is replayed and retrained (recovered) in
hardware, slowing every collective that crosses it until it drops. One script reads:

- ``nvidia-smi --query-gpu=index,pci.bus_id,mig.mode.current`` to give every GPU its bus id and
  MIG mode (NVML reports every link of a MIG-enabled GPU down: no fault);
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
counter that went down between the samples was reset: its delta is the second value. Each
sample carries the time it was taken, and rates are over the time between them (the sleep plus
the first nvidia-smi's own run time, seconds on 8 GPUs without persistence mode).

Facts (probes/catalog.yaml): ``links`` (one entry per GPU link: ``name`` ("GPU3 link 7"),
``gpu``, ``bus_id``, ``link``, ``active``, ``speed_gb_s``, ``speed_max_gb_s`` (the host's
fastest active link), ``all_links_inactive``, ``gpu_links_active`` (active links of the same
GPU), ``addin_card`` (a PCIe / NVL / workstation board, whose NVLink is an optional bridge),
each counter and its ``_delta``, ``crc_delta`` and ``crc_rate_per_s``, ``mig_enabled``),
``nvlink_present`` (False on a node whose GPUs have no NVLink: that is no fault;
None when NVML could not read it), ``gpus_unreadable`` (GPUs NVML answered with an error other
than "Not Supported": not measured), ``links_counters_unmeasured`` (active links without one
known counter in both samples: not measured), ``links_total``,
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
from probes.parsers._common import to_float

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

# Traffic counts and the pre-FEC / corrected counters of NVLink 5 ("Raw Errors Lane N", "Raw BER",
# "FEC Errors - N": errors FEC corrected, non-zero on a healthy link) are dropped on the host:
# 18 links x 8 GPUs of them would push the error counters past the line budget.
_DROP = "Tx packets|Tx bytes|Rx packets|Rx bytes|BER|FEC|Raw Errors"


def _bounded(command: str, lines: int) -> str:
    """*command* with its output cut to *lines* lines of 300 characters, keeping its status."""
    return (f"out=$({command} 2>&1); rc=$?; printf '%s\\n' \"$out\" | grep -v -E '{_DROP}' "
            f"| cut -c1-300 | head -n {lines}; (exit $rc)")


_TIME = "echo \"diag-time $(date +%s.%N 2>/dev/null)\"; "
# "diag-time <seconds.nanoseconds>"; a date without %N (or sub-second digits) gives no time
_TIME_LINE = re.compile(r"^diag-time\s*(\d+\.\d+)?\S*\s*$", re.M)

# mig.mode.current is not a field of drivers before R450: then the query without it
GPU_ROWS_SH = _bounded("q=$(timeout 5 nvidia-smi --query-gpu=index,pci.bus_id,mig.mode.current "
                       "--format=csv 2>/dev/null) && printf '%s\\n' \"$q\" || timeout 5 "
                       "nvidia-smi --query-gpu=index,pci.bus_id --format=csv", 80)
_SECTIONS = [
    ("gpus", GPU_ROWS_SH),
    ("status", _bounded("timeout 5 nvidia-smi nvlink -s", 600)),
    # each sample starts with the time it was taken: nvidia-smi itself can take seconds (8 GPUs
    # without persistence mode), so the samples are further apart than the sleep
    ("errors_1", _TIME + _bounded("timeout 5 nvidia-smi nvlink -e", 2500)),
    ("errors_2", f"sleep {SAMPLE_INTERVAL_S}; " + _TIME
                 + _bounded("timeout 5 nvidia-smi nvlink -e", 2500)),
]
_REQUIRES = {name: "nvidia-smi" for name, _ in _SECTIONS}

_GPU_LINE = re.compile(r"^\s*GPU\s+(\d+):", re.M)
# NVML's answer for a GPU whose NVLink could not be read: "NVML: Unable to retrieve NVLink
# information: <nvmlErrorString>". "Not Supported" is a board without NVLink and "... as all links
# are inActive" a GPU whose links are down; any other error string ("Unknown Error", "GPU is
# lost", "GPU requires reset", "Insufficient Permissions") says nothing about the links: that GPU
# is not measured. A GPU NVML cannot open at all is printed as "Unable to determine the device
# handle for GPU <bus id>: <error>" in place of its "GPU n:" line.
_NO_NVLINK = re.compile(r"not supported", re.I)
_NO_HANDLE = re.compile(r"Unable to determine the device handle for GPU\s*([0-9A-Fa-f:.]+)"
                        r"\s*:\s*(.*)$", re.M)
# Names of add-in boards whose NVLink is an optional bridge: "NVIDIA A100-PCIE-40GB",
# "NVIDIA A100 80GB PCIe", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", and the
# workstation boards (A40, RTX, Quadro, TITAN), and "NVIDIA A30", a PCIe card whose name says
# no "PCIe" and whose third-generation NVLink (200 GB/s) is a two-card bridge (NVIDIA A30 Tensor
# Core GPU datasheet, nvidia.com/en-us/data-center/products/a30-gpu). SXM / HGX / Grace parts
# ("A100-SXM4-80GB", "H100 80GB HBM3", "H200", "B200", "GB200", "GH200 480GB") do not match.
_ADDIN = re.compile(r"PCIe|\bNVL\b|\bA40\b|\bA30X?\b|\bRTX\b|Quadro|TITAN", re.I)


def command(params: Mapping[str, Any]) -> str:
    return script(_SECTIONS, _REQUIRES)


# --- parsing ---------------------------------------------------------------------------------

def gpu_rows(text: str) -> tuple[dict[int, str], dict[int, bool]]:
    """Bus id and MIG mode (True when "Enabled") of every GPU index (GPU_ROWS_SH's output)."""
    try:
        rows = parse_kind("nvidia-smi-query", text)["rows"]
    except ParseError:
        return {}, {}
    indexed = [row for row in rows if isinstance(row.get("index"), int)]
    mig = {row["index"]: str(row["mig.mode.current"]).strip().lower() == "enabled"
           for row in indexed if isinstance(row.get("mig.mode.current"), str)}
    return {row["index"]: str(row["pci.bus_id"]) for row in indexed
            if row.get("pci.bus_id")}, mig


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


def _counter_key(name: str) -> str | None:
    """The fact key of a printed counter name: the names above, in the singular too ("CRC FLIT
    Error", as dcgmi nvlink -e prints them), and the two CRC counters in either word order
    ("Flit CRC Errors", "Data CRC Errors")."""
    words = " ".join(name.lower().split())
    key = COUNTERS.get(words) or COUNTERS.get(words + "s")
    if key is None and "crc" in words.split():
        key = "crc_data" if "data" in words else "crc_flit" if "flit" in words else None
    return key


def _counters(gpus: list[dict[str, Any]]) -> dict[tuple[int | None, int], dict[str, int]]:
    out: dict[tuple[int | None, int], dict[str, int]] = {}
    for gpu in gpus:
        for link in gpu.get("links") or []:
            values = out.setdefault((gpu.get("index"), link["link"]), {})
            for name, value in (link.get("counters") or {}).items():
                key = _counter_key(name)
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


# Links a fully bridged add-in card has active, where NVIDIA uses fewer than the GPU lists: an H100
# PCIe / NVL lists 18 and its three bridges carry 12 ("the H100 PCIE cards only support 12 out of
# the 18 available links ... The inactive links are by design", Azure/azurehpc-health-checks
# issue 162, NCv5); an A100 PCIe all 12 of its links over three bridges (NVIDIA A100 PCIe product
# brief PB-10137, "NVLink Bridge Support", Table 6). Other add-in cards: what the host's best
# bridged card of the same name has (an unknown bridge layout is never a fault on its own).
_BRIDGED_LINKS = ((re.compile(r"\bH100\b.*(PCIe|\bNVL\b)", re.I), 12),
                  (re.compile(r"\bA100\b.*PCIe", re.I), 12))


def addin_expected(status: list[dict[str, Any]]) -> dict[str, int]:
    """Links an add-in card of each name has active when fully bridged (see _BRIDGED_LINKS)."""
    out: dict[str, int] = {}
    for gpu in status:
        name, listed = str(gpu.get("name") or ""), gpu.get("links") or []
        if not listed or not addin_card(name):
            continue
        up = sum(1 for link in listed if link.get("active") is True)
        known = next((n for rx, n in _BRIDGED_LINKS if rx.search(name)), 0)
        out[name] = max(out.get(name, 0), up, min(known, len(listed)))
    return out


def _unreadable(status: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """GPUs whose NVLink NVML could not read (an error other than Not Supported / inactive)."""
    out = [{"gpu": g.get("index"), "why": str(g["nvml_error"]).rpartition(":")[2].strip()[:200]
            or str(g["nvml_error"])[:200]} for g in status
           if g.get("nvml_error") and not g.get("links") and not g.get("all_links_inactive")
           and not _NO_NVLINK.search(str(g["nvml_error"]))]
    out += [{"gpu": m.group(1), "why": m.group(2).strip()[:200] or "no device handle"}
            for m in _NO_HANDLE.finditer(text)]
    return out


def _links(status: list[dict[str, Any]], buses: dict[int, str],
           mig: dict[int, bool]) -> list[dict[str, Any]]:
    listed = [g for g in status if g.get("links")]
    most = max((len(g["links"]) for g in listed), default=0)
    expected = addin_expected(status)
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
                          "addin_card": addin_card(gpu.get("name")),
                          "gpu_links_expected": expected.get(str(gpu.get("name") or "")),
                          # NVML reports the links of a MIG-enabled GPU down (DCGM
                          # DcgmHealthWatch.cpp MonitorNVLinkStatus, bug 200682374)
                          "mig_enabled": mig.get(index) if index is not None else None})
    return links


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if not {"status", "errors_1"} & set(sections):
        raise ParseError("nvlink: neither a status nor an errors section")
    facts: dict[str, Any] = {
        "nvlink_present": None, "gpu_count": None, "links": [], "links_total": None,
        "links_active": None, "links_inactive": None, "gpus_all_inactive": None,
        "sample_interval_s": None, "missing": [], "errors": {}, "gpus_unreadable": [],
        "links_counters_unmeasured": None, "counters_nvml_error": None,
        **{f"{key}_delta": None for key in HOST_DELTAS},
    }
    gpus_text = _read(sections, "gpus", facts)
    buses, mig = gpu_rows(gpus_text) if gpus_text else ({}, {})
    status_text = _read(sections, "status", facts)
    status = _nvlink_gpus(status_text) if status_text is not None else None
    if status_text is not None and status is None:
        facts["errors"]["status"] = failure_text(status_text, 0)
    samples, times = [], []
    for name in ("errors_1", "errors_2"):
        sec = sections.get(name)
        stamp = _TIME_LINE.search(sec.text) if sec is not None else None
        times.append(to_float(stamp.group(1)) if stamp and stamp.group(1) else None)
        if sec is not None and stamp:
            sec.text = _TIME_LINE.sub("", sec.text, count=1).lstrip("\n")
        sample_text = _read(sections, name, facts)
        parsed = _nvlink_gpus(sample_text) if sample_text is not None else None
        if sample_text is not None and parsed is None:
            facts["errors"][name] = failure_text(sample_text, 0)
        samples.append(_counters(parsed) if parsed is not None else None)
        for gpu in parsed or []:  # "NVML: Unable to retrieve NVLink information: Not Supported"
            if gpu.get("nvml_error") and not gpu.get("links"):
                facts["counters_nvml_error"] = str(gpu["nvml_error"])[:200]
    if status is None:
        return facts

    links = _links(status, buses, mig)
    facts["gpu_count"] = len(status)
    facts["gpus_unreadable"] = _unreadable(status, status_text or "")
    # no link listed because NVML failed is not "no NVLink on this board": not measured
    facts["nvlink_present"] = True if links else (None if facts["gpus_unreadable"] else False)
    facts["gpus_all_inactive"] = sorted({e["gpu"] for e in links if e["all_links_inactive"]
                                         and e["gpu"] is not None})
    facts["links_total"] = len(links)
    facts["links_active"] = sum(1 for e in links if e["active"] is True)
    facts["links_inactive"] = sum(1 for e in links if e["active"] is False)
    speeds = [e["speed_gb_s"] for e in links if e["active"] and e["speed_gb_s"] is not None]
    first, second = samples
    interval = float(SAMPLE_INTERVAL_S)
    if times[0] is not None and times[1] is not None and times[1] - times[0] > interval:
        interval = round(times[1] - times[0], 3)  # the sleep plus the first nvidia-smi's time
    if first is not None and second is not None:
        facts["sample_interval_s"] = interval
    for entry in links:
        entry["speed_max_gb_s"] = max(speeds) if speeds else None
        before = (first or {}).get((entry["gpu"], entry["link"]), {})
        after = (second or {}).get((entry["gpu"], entry["link"]), {})
        for key in COUNTER_KEYS:
            entry[key] = after.get(key, before.get(key))
            entry[f"{key}_delta"] = _delta(before.get(key), after.get(key))
        crc = [entry["crc_flit_delta"], entry["crc_data_delta"]]
        entry["crc_delta"] = _sum(crc)
        entry["crc_rate_per_s"] = (round(entry["crc_delta"] / interval, 2)
                                   if entry["crc_delta"] is not None else None)
    for key in HOST_DELTAS:
        facts[f"{key}_delta"] = _sum([e[f"{key}_delta"] for e in links])
    if first is not None and second is not None:
        # an active link without a single known counter in both samples (the output was cut at
        # the line budget, or the driver renamed them all) is not measured, never "no errors"
        facts["links_counters_unmeasured"] = sum(
            1 for e in links if e["active"] is True
            and all(e[f"{key}_delta"] is None for key in COUNTER_KEYS))
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
    unreadable = facts.get("gpus_unreadable") or []
    if facts.get("nvlink_present") is None and not unreadable:
        findings.append(not_measured(NAME, host, "NVLink link state",
                                     errors.get("status", "no nvidia-smi nvlink -s output")))
    for gpu in unreadable:
        findings.append(not_measured(NAME, host, f"NVLink state of GPU {gpu.get('gpu')}",
                                     str(gpu.get("why"))))
    if facts.get("nvlink_present") is not False and facts.get("sample_interval_s") is None:
        why = errors.get("errors_1") or errors.get("errors_2") or "no second sample"
        findings.append(not_measured(NAME, host, "NVLink error counters (nvidia-smi nvlink -e)",
                                     why))
    elif unmeasured := facts.get("links_counters_unmeasured"):
        findings.append(not_measured(
            NAME, host, f"NVLink error counters of {unmeasured} active links",
            facts.get("counters_nvml_error")
            or "nvidia-smi nvlink -e printed no known counter for them (output cut or renamed)"))
    return findings


PROBE = Probe(NAME, command, parse, check, timeout_s=45.0)
