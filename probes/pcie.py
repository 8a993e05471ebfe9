"""pcie: GPU and NIC PCIe links trained below their maximum, and GPU PCIe replays rising.

A GPU or RDMA NIC whose link trained at x8 instead of x16, or at Gen3 in a Gen5 slot, moves
half the data or less: GPUDirect RDMA through that NIC and the host-device copies of that GPU
slow every collective that crosses it. One script reads:

- ``nvidia-smi -q`` (the ``nvidia-smi-q`` parser's PCIe keys): per GPU the link generation and
  width, current and maximum ("Max" is what the link can train to: the lower of the GPU's and
  the host port's maximum), the replay counter and the GPU's utilization; after
  ``pcie_sample_interval_s`` the replay counters again, so replays are judged as a rate;
- sysfs for every NVIDIA GPU and every RDMA device's PCI function: ``current_link_speed`` /
  ``current_link_width`` against ``max_link_speed`` / ``max_link_width`` of the device and of
  the port above it (a Gen5 NIC in a Gen4 slot can only train at Gen4: that is its maximum).

The rules (issue 11): a NIC's link below its maximum width or generation is always a finding
(NICs hold their speed); a GPU's only while it is busy, because an idle NVIDIA GPU lowers its
link to save power and raises it under load (nvidia-smi --help-query-gpu: the current link
generation and width "may be reduced when the GPU is not in use"; the real Titan V and RTX 4090
samples in fixtures/real sit at Gen1 idle, the R580 RTX 5080 one at Gen1 x8 of x16). An idle
GPU's narrow link is still named, as a warning to re-check under load; ``pcie_gen_busy_pct``
says how busy is busy. Replays are the link's own
retransmissions of corrupted TLPs: DCGM's PCIe plugin expects fewer than 8 per minute.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    default_thresholds,
    finding,
    guard_parse,
    not_measured,
    script,
    split_sections,
)
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "pcie"

_FIELDS = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
_SYSFS = (
    "show() { d=$1; p=$(dirname \"$(readlink -f \"$d\")\"); printf '%s %s %s' \"$2\" \"$3\" "
    "\"${d##*/}\"; for f in " + " ".join(_FIELDS) + "; do printf ' | %s' "
    "\"$(cat \"$d/$f\" 2>/dev/null)\"; done; for f in max_link_speed max_link_width; do "
    "printf ' | %s' \"$(cat \"$p/$f\" 2>/dev/null)\"; done; echo; }; "
    "for d in /sys/bus/pci/devices/*; do "
    "case \"$(cat \"$d/vendor\" 2>/dev/null)$(cat \"$d/class\" 2>/dev/null)\" in "
    "0x10de0x03*) show \"$d\" gpu \"${d##*/}\";; esac; done; "
    "for r in /sys/class/infiniband/*; do [ -e \"$r/device\" ] || continue; "
    "show \"$(readlink -f \"$r/device\")\" nic \"${r##*/}\"; done; true"
)
# The AER error counters of each GPU and RDMA NIC (Documentation/ABI/testing/sysfs-bus-pci-
# devices-aer-stats: aer_dev_correctable / _fatal / _nonfatal, their TOTAL_ERR_* lines), read
# before and after the sample: "kind name bus COR FATAL NONFATAL", "-" where the kernel keeps
# none (AER not enabled, or a kernel before 4.19). Counted whatever the kernel log kept (its
# AER lines are rate-limited, and rotate away). Also the port above each one ("port NAME BUS",
# NAME the device below it): errors on the link that the port's own receiver detects (RxErr,
# BadTLP from a marginal GPU transmitter; Surprise Down when the device drops) are counted on
# the port, not on the device (drivers/pci/pcie/aer.c counts them on the reporting function).
_AER = (
    "aer() { printf '%s %s %s' \"$1\" \"$2\" \"${3##*/}\"; for f in correctable:TOTAL_ERR_COR "
    "fatal:TOTAL_ERR_FATAL nonfatal:TOTAL_ERR_NONFATAL; do n=$(sed -n \"s/^${f#*:} //p\" "
    "\"$3/aer_dev_${f%%:*}\" 2>/dev/null); printf ' %s' \"${n:--}\"; done; echo; }; "
    "up() { u=$(dirname \"$(readlink -f \"$2\")\"); [ -e \"$u/aer_dev_correctable\" ] && "
    "aer port \"$1\" \"$u\"; true; }; "
    "for d in /sys/bus/pci/devices/*; do "
    "case \"$(cat \"$d/vendor\" 2>/dev/null)$(cat \"$d/class\" 2>/dev/null)\" in "
    "0x10de0x03*) aer gpu \"${d##*/}\" \"$d\"; up \"${d##*/}\" \"$d\";; esac; done; "
    "for r in /sys/class/infiniband/*; do [ -e \"$r/device\" ] || continue; "
    "aer nic \"${r##*/}\" \"$(readlink -f \"$r/device\")\"; "
    "up \"${r##*/}\" \"$(readlink -f \"$r/device\")\"; done; true"
)
# -i: the R3xx drivers print "Replays since reset"
_REPLAYS = ("timeout 30 nvidia-smi -q | grep -iE "
            "'^GPU [0-9a-fA-F]|Replays Since Reset|Replay Number Rollovers'")
_REQUIRES = {"smi_1": "nvidia-smi", "smi_2": "nvidia-smi"}
_MAX_INTERVAL_S = 20

_SYSFS_LINE = re.compile(r"^(?P<kind>gpu|nic) (?P<name>\S+) (?P<addr>\S+)"
                         + r"\s*\|\s?([^|]*)" * 6 + r"\s*$")
_GT_S = re.compile(r"(\d+(?:\.\d+)?)\s*GT/s")
# PCIe transfer rate per lane -> generation (PCI-SIG): 2.5, 5, 8, 16, 32, 64 GT/s.
_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
_GPU_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
_REPLAY_LINE = re.compile(r"^\s*(Replays Since Reset|Replay Number Rollovers)\s*:\s*(\d+)",
                          re.I)


def _interval(params: Mapping[str, Any]) -> float:
    value = params.get("interval_s")
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return float(default_thresholds()["pcie_sample_interval_s"])


def command(params: Mapping[str, Any]) -> str:
    interval = min(max(1, round(_interval(params))), _MAX_INTERVAL_S)
    return script([("smi_1", "timeout 30 nvidia-smi -q"), ("sysfs", _SYSFS), ("aer_1", _AER),
                   ("interval", f"echo {interval}"), ("sleep", f"sleep {interval}"),
                   ("smi_2", _REPLAYS), ("aer_2", _AER)], _REQUIRES)


# --- parsing ---------------------------------------------------------------------------------

def bus_key(bus_id: str | None) -> str | None:
    """'00000000:9B:00.0' and '0000:9b:00.0' both become '0000:9b:00.0'."""
    m = re.search(r"(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])",
                  bus_id or "")
    if not m:
        return None
    return f"{(m.group(1) or '0000')[-4:]}:{m.group(2)}:{m.group(3)}.{m.group(4)}".lower()


def _gen(speed: str) -> int | None:
    m = _GT_S.search(speed)
    return _GEN.get(float(m.group(1))) if m else None


def _width(text: str) -> int | None:
    m = re.match(r"\s*x?(\d+)\s*$", text)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None


def _lowest(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _port_cap(port_max: int | None, current: int | None) -> int | None:
    """The port's maximum as a cap on the link, unless the link already runs above it.

    A link trains to no more than both of its ends support, so a port whose maximum is below
    the link's current speed or width is not the link's real other end: a virtual machine's
    emulated root port (QEMU's pcie-root-port advertises 16 GT/s x32, and 2.5 GT/s x1 on
    pc-q35-3.1 and older: hw/pci-bridge/gen_pcie_root_port.c x-speed/x-width, hw/core/machine.c
    hw_compat_3_1) in front of a passed-through GPU or NIC that trained at Gen5 on the host.
    """
    if port_max is not None and current is not None and port_max < current:
        return None
    return port_max


def parse_sysfs(text: str) -> list[dict[str, Any]]:
    links = []
    for line in text.splitlines():
        m = _SYSFS_LINE.match(line.rstrip())
        if not m:
            continue
        cur_s, cur_w, max_s, max_w, up_s, up_w = (m.group(i).strip() for i in range(4, 10))
        gen, width = _gen(cur_s), _width(cur_w)
        links.append({
            "kind": m.group("kind"), "name": m.group("name"), "bus_id": bus_key(m.group("addr")),
            "gen_current": gen, "width_current": width,
            "gen_device_max": _gen(max_s), "width_device_max": _width(max_w),
            "gen_max": _lowest(_gen(max_s), _port_cap(_gen(up_s), gen)),
            "width_max": _lowest(_width(max_w), _port_cap(_width(up_w), width))})
    return links


def parse_replays(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """(replays, replay-counter rollovers) per GPU bus id from the filtered second sample."""
    replays: dict[str, int] = {}
    rollovers: dict[str, int] = {}
    current = None
    for line in text.splitlines():
        if m := _GPU_HEADER.match(line.strip()):
            current = bus_key(m.group(1))
        elif current and (m := _REPLAY_LINE.match(line)):
            target = replays if m.group(1).lower().startswith("replays") else rollovers
            target[current] = int(m.group(2))
    return replays, rollovers


_AER_LINE = re.compile(r"^(gpu|nic|port) (\S+) (\S+) (\d+|-) (\d+|-) (\d+|-)\s*$")
_AER_KINDS = ("correctable", "fatal", "nonfatal")


def parse_aer(text: str) -> dict[str, dict[str, Any]]:
    """bus id -> {kind, name, bus_id, correctable, fatal, nonfatal} (None: not kept); kind
    "port" is the port above the GPU or NIC *name*."""
    counters: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        m = _AER_LINE.match(line.strip())
        if not m or not (bus := bus_key(m.group(3))):
            continue
        name = m.group(2) if m.group(1) != "port" else f"{m.group(2)} link (port {bus})"
        counters[bus] = {"kind": m.group(1), "name": name, "bus_id": bus, **{
            kind: None if value == "-" else int(value)
            for kind, value in zip(_AER_KINDS, m.group(4, 5, 6), strict=True)}}
    return counters


def _aer(sections: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Each device's AER totals and their rise during the sample (None: a counter not kept in
    either read, or one that went down, i.e. the device was reset)."""
    first, second = sections.get("aer_1"), sections.get("aer_2")
    if first is None or first.missing:
        return None
    before = parse_aer(first.text)
    after = parse_aer(second.text) if second is not None and not second.missing else {}
    devices = []
    for bus, now in (after or before).items():
        then = before.get(bus, {})
        device = dict(now)
        for kind in _AER_KINDS:
            a, b = then.get(kind), now.get(kind)
            device[f"{kind}_delta"] = b - a if isinstance(a, int) and isinstance(b, int) \
                and b >= a and after else None
        devices.append(device)
    return devices


def _parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if not {"smi_1", "sysfs"} & set(sections):
        raise ParseError("pcie: neither an nvidia-smi nor a sysfs section")
    facts: dict[str, Any] = {"gpus": [], "nics": [], "links_degraded": None,
                             "replays_delta": None, "sample_interval_s": None, "aer": None,
                             "missing": [], "errors": {}}
    for name, sec in sections.items():
        if sec.missing:
            facts["missing"].append(name)
    interval = sections.get("interval")
    if interval is not None and re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", interval.text):
        facts["sample_interval_s"] = float(interval.text)
    sysfs = parse_sysfs(sections["sysfs"].text) if "sysfs" in sections else []
    facts["nics"] = [link for link in sysfs if link["kind"] == "nic"]
    by_bus = {link["bus_id"]: link for link in sysfs if link["kind"] == "gpu"}
    smi = sections.get("smi_1")
    if smi is not None and not smi.missing:
        if smi.rc == 0 and "GPU " in smi.text:
            for gpu in parse_kind("nvidia-smi-q", smi.text)["gpus"]:
                bus = bus_key(gpu.get("bus_id"))
                # the port above the GPU (a PCIe switch's downstream port on HGX boards) caps
                # what the link can train to, whatever the root port behind it allows (NVML's
                # max is "possible with this GPU and system"; sysfs reads the port itself)
                port = by_bus.pop(bus, None) or {}
                facts["gpus"].append({
                    "name": gpu.get("name"), "bus_id": bus, "source": "nvidia-smi",
                    "utilization_pct": gpu.get("utilization_pct"),
                    "gen_current": gpu.get("pcie_gen_current"),
                    "gen_max": _lowest(gpu.get("pcie_gen_max"), port.get("gen_max")),
                    "width_current": gpu.get("pcie_width_current"),
                    "width_max": _lowest(gpu.get("pcie_width_max"), port.get("width_max")),
                    "replays": gpu.get("pcie_replays"),
                    "replay_rollovers": gpu.get("pcie_replay_rollovers"), "replays_delta": None})
        else:
            facts["errors"]["smi"] = (smi.text.strip().splitlines() or
                                      [f"nvidia-smi exited {smi.rc}"])[0][:200]
    for link in by_bus.values():  # GPUs nvidia-smi did not describe: sysfs only
        facts["gpus"].append({**link, "source": "sysfs", "utilization_pct": None,
                              "replays": None, "replays_delta": None})
    second = sections.get("smi_2")
    if second is not None and not second.missing and facts["gpus"]:
        later, rollovers = parse_replays(second.text)
        for gpu in facts["gpus"]:
            now, then = later.get(gpu["bus_id"]), gpu.get("replays")
            if now is None or then is None:
                continue
            # the counter restarted (it rolled over): count from 0 again
            rolled = rollovers.get(gpu["bus_id"], 0) > (gpu.get("replay_rollovers") or 0)
            gpu["replays_delta"] = now - then if now >= then and not rolled else now
        deltas = [g["replays_delta"] for g in facts["gpus"] if g["replays_delta"] is not None]
        facts["replays_delta"] = sum(deltas) if deltas else None
    facts["aer"] = _aer(sections)
    facts["links_degraded"] = sum(1 for link in facts["gpus"] + facts["nics"]
                                  if _below(link)[0] or _below(link)[1])
    return facts


parse = guard_parse(NAME, _parse)


# --- checks ----------------------------------------------------------------------------------

def _below(link: Mapping[str, Any]) -> tuple[bool, bool]:
    """(width below its maximum, generation below its maximum), unknowns never below."""
    def lower(cur: Any, most: Any) -> bool:
        return isinstance(cur, int) and isinstance(most, int) and cur < most
    return (lower(link.get("width_current"), link.get("width_max")),
            lower(link.get("gen_current"), link.get("gen_max")))


def _label(link: Mapping[str, Any]) -> str:
    return f"{link.get('name') or link['kind']} ({link.get('bus_id')})" \
        if link.get("kind") == "nic" else f"GPU {link.get('bus_id')}"


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    if not facts.get("gpus") and not facts.get("nics"):
        why = facts.get("errors", {}).get("smi") or "no NVIDIA GPU or RDMA device in sysfs"
        return [not_measured(NAME, host, "PCIe links", why)]
    busy_pct = ctx.threshold("pcie_gen_busy_pct")
    slow: dict[str, dict[str, Any]] = {}
    idle_narrow: dict[str, dict[str, Any]] = {}
    for link in facts.get("gpus", []) + facts.get("nics", []):
        narrow, slower = _below(link)
        is_gpu = link.get("kind") != "nic"
        busy = (link.get("utilization_pct") or 0) >= busy_pct
        entry = {"width": f"x{link.get('width_current')} of x{link.get('width_max')}",
                 "gen": f"Gen{link.get('gen_current')} of Gen{link.get('gen_max')}",
                 "utilization_pct": link.get("utilization_pct") if is_gpu else None}
        label = _label({**link, "kind": "gpu" if is_gpu else "nic"})
        if is_gpu and not busy:
            # nvidia-smi --help-query-gpu, pcie.link.gen.current and pcie.link.width.current:
            # "These may be reduced when the GPU is not in use" (an idle RTX 5080 at x8 of x16,
            # fixtures/real): an idle GPU's narrow link is re-checked under load, not accused
            if narrow:
                idle_narrow[label] = entry
            narrow = slower = False
        if narrow or slower:
            slow[label] = entry
    if slow:
        findings.append(finding(
            "pcie-link-degraded", [host],
            f"{host}: PCIe link(s) below their maximum: " + ", ".join(
                f"{k} {v['width']}, {v['gen']}" for k, v in slow.items()),
            NAME, links=slow))
    if idle_narrow:
        findings.append(finding(
            "pcie-gpu-link-narrow-idle", [host],
            f"{host}: idle GPU PCIe link(s) narrower than their maximum: " + ", ".join(
                f"{k} {v['width']}" for k, v in idle_narrow.items())
            + "; an idle GPU may reduce its link (nvidia-smi): re-check under load",
            NAME, links=idle_narrow))
    interval = facts.get("sample_interval_s") or ctx.threshold("pcie_sample_interval_s")
    limit = ctx.threshold("pcie_replays_per_min")
    # A sample of seconds is no rate: one replay in 5 s is not "12/min". DCGM's allowance is per
    # minute, so a short sample must hold more than a whole minute's allowance to count.
    least = limit * max(interval, 60.0) / 60.0
    rising = {g["bus_id"]: g["replays_delta"] for g in facts.get("gpus", [])
              if (g.get("replays_delta") or 0) > least}
    if rising:
        findings.append(finding(
            "pcie-replays", [host],
            f"{host}: PCIe replays rising on GPU " + ", ".join(
                f"{b} (+{n} in {interval:g} s, {n * 60.0 / interval:.0f}/min)"
                for b, n in rising.items()) + f"; DCGM expects under {limit:g}/min",
            NAME, replays=rising, interval_s=interval, threshold_per_min=limit))
    return findings


PROBE = Probe(NAME, command, parse, check, timeout_s=90.0)
