"""soak (acceptance L4, and ``diag watch``): XIDs, ECC, link and retransmit counters sampled
again and again over a set duration, summarised per node at the end.

Each round is one read-only script per node (one sample); the provider repeats it every
``interval_s`` until ``duration_s`` has passed and gives the checks each node's summary: what
rose between its first and last sample (a counter reset in between counts only its rises).
Counters that must not rise fail the node (a new XID, an uncorrectable ECC error, a pending row
remap, an IB error or retransmit counter, probes/acceptance.yaml); corrected ECC errors and TCP
retransmits rise on healthy busy hosts and are only shown. A node that stops answering during
the soak is reported with the samples it missed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from probes import active
from probes.base import (
    Context,
    Probe,
    finding,
    guard_parse,
    not_measured,
    script,
    section_reader,
    split_sections,
)
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "soak"
LEVEL = 4
IB_ROOT = "/sys/class/infiniband"
_IB = re.compile(r"/([^/\s]+)/ports/(\d+)/(?:hw_)?counters/([a-z_0-9]+):(\d+)\s*$")
_XID_LINE = "NVRM: Xid"


def command(params: Mapping[str, Any]) -> str:
    root = shlex.quote(str(params.get("ib_sysfs") or IB_ROOT))
    names = "|".join(str(n) for n in _ib_names(params))
    xid = ("out=$(timeout 10 dmesg 2>&1); rc=$?; if [ $rc != 0 ]; then "
           "printf '%s\\n' \"$out\" | head -n 1; exit $rc; fi; "
           f"printf '%s\\n' \"$out\" | grep '{_XID_LINE}' | tail -n 500; true")
    # the names are identifiers (probes.criteria refuses the rest) and quoted all the same
    ib = (f"timeout 10 grep -H . {root}/*/ports/*/counters/* {root}/*/ports/*/hw_counters/* "
          f"2>/dev/null | grep -E {shlex.quote(f'/({names}):')}; true")
    return script([("xid", xid), ("ecc", "timeout 20 nvidia-smi -q -d ECC,ROW_REMAPPER"),
                   ("ib", ib), ("tcp", "grep '^Tcp:' /proc/net/snmp")],
                  {"xid": "dmesg", "ecc": "nvidia-smi"})


def _ib_names(params: Mapping[str, Any]) -> list[str]:
    crit = active.merged(params.get("criteria"))
    gpu = {"xid_events", "ecc_uncorrected", "remapped_rows_pending", "ecc_corrected_volatile",
           "tcp_retrans"}
    return [n for key in ("counters_must_not_rise", "counters_recorded")
            for n in crit.get(NAME, key).value if n not in gpu]


def parse(text: str) -> dict[str, Any]:
    """One sample: counters by name (absent when not measured, never 0 for "unknown")."""
    sections = split_sections(text)
    missing: list[str] = []
    read = section_reader(sections, missing, need_output=False, errors={})
    counters: dict[str, int] = {}
    xid_lines: list[str] = []
    if (xid := read("xid")) is not None:
        xid_lines = [ln for ln in xid.splitlines() if _XID_LINE in ln]
        counters["xid_events"] = len(xid_lines)
    else:
        missing.append("xid")
    if (ecc := read("ecc")) is not None:
        try:
            gpus = parse_kind("nvidia-smi-q", ecc).get("gpus") or []
            volatile = [(g.get("ecc") or {}).get("volatile") or {} for g in gpus]
            counters["ecc_uncorrected"] = sum(int(v) for vol in volatile
                                              for k, v in vol.items()
                                              if "Uncorrectable" in k and isinstance(v, int))
            counters["ecc_corrected_volatile"] = sum(
                int(v) for vol in volatile for k, v in vol.items()
                if "Correctable" in k and "Un" not in k and isinstance(v, int))
            counters["remapped_rows_pending"] = sum(1 for g in gpus
                                                    if g.get("remapped_rows_pending"))
        except ParseError:
            missing.append("ecc")
    for line in (read("ib") or "").splitlines():
        if m := _IB.search(line):
            counters[f"{m.group(1)}/{m.group(2)} {m.group(3)}"] = int(m.group(4))
    if (tcp := read("tcp")) is not None:
        rows = [ln.split()[1:] for ln in tcp.splitlines() if ln.startswith("Tcp:")]
        if len(rows) == 2 and "RetransSegs" in rows[0]:
            value = rows[1][rows[0].index("RetransSegs")]
            if value.isdigit():
                counters["tcp_retrans"] = int(value)
    return {"counters": counters, "missing": sorted(set(missing)),
            "xid_lines": xid_lines[-5:]}


def base_name(counter: str) -> str:
    """'mlx5_0/1 symbol_error' -> 'symbol_error'; GPU and host counters are their own name."""
    return counter.rsplit(" ", 1)[-1]


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """A node's samples (in order) as the facts the checks judge: how far each counter rose
    between its first and last sample (resets in between count only the rises)."""
    ok = [s for s in samples if s.get("state") == "ok"]
    missed = [{k: s.get(k) for k in ("seq", "state", "reason")} for s in samples
              if s.get("state") != "ok"]
    deltas: dict[str, dict[str, int]] = {}
    last: dict[str, int] = {}
    first: dict[str, int] = {}
    rise: dict[str, int] = {}
    for sample in ok:
        for name, value in (sample.get("counters") or {}).items():
            if name in last and value > last[name]:
                rise[name] = rise.get(name, 0) + value - last[name]
            first.setdefault(name, value)
            last[name] = value
    for name, value in first.items():
        deltas[name] = {"first": value, "last": last[name], "delta": rise.get(name, 0)}
    return {"samples": len(samples), "ok_samples": len(ok), "missed": missed[:50],
            "first_ts": samples[0]["ts"] if samples else None,
            "last_ts": samples[-1]["ts"] if samples else None, "deltas": deltas,
            "missing": sorted({m for s in ok for m in s.get("missing") or []}),
            "xid_lines": next((s.get("xid_lines") for s in reversed(ok)
                               if s.get("xid_lines")), [])}


def figures(host: str, facts: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    crit = active.criteria(ctx)
    watched = crit.get(NAME, "counters_must_not_rise")
    out = []
    for name, d in sorted((facts.get("deltas") or {}).items()):
        judged = base_name(name) in watched.value
        out.append(active.figure(LEVEL, NAME, name, d["delta"], unit="rise",
                                 op="<=" if judged else None, threshold=0 if judged else None,
                                 source=watched.source if judged else "",
                                 first=d["first"], last=d["last"]))
    return out


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    found: list[Finding] = []
    rose = {f["metric"]: f for f in facts.get("figures") or [] if f["verdict"] == "fail"}
    xid = rose.pop("xid_events", None)
    span = f"over {facts.get('samples', 0)} samples"
    if xid:
        found.append(finding("soak-xid", [host],
                             f"{xid['value']} new XID line(s) on {host} {span}: "
                             + "; ".join(facts.get("xid_lines") or [])[:300], NAME,
                             rise=xid["value"], lines=facts.get("xid_lines") or []))
    if rose:
        found.append(finding("soak-counter-rose", [host], f"counters rose on {host} {span}: "
                             + ", ".join(f"{n} +{f['value']}" for n, f in sorted(rose.items())),
                             NAME, rose={n: f["value"] for n, f in rose.items()}))
    if facts.get("missed"):
        found.append(finding("soak-samples-missed", [host],
                             f"{host} missed {len(facts['missed'])} of {facts['samples']} "
                             f"samples ({facts['missed'][0]['state']}: "
                             f"{facts['missed'][0]['reason']})", NAME, missed=facts["missed"]))
    missing = list(facts.get("missing") or [])
    if ctx.params.get("rdma") is not False and facts.get("ok_samples") and not any(
            "/" in name for name in facts.get("deltas") or {}):
        missing.append("InfiniBand counters (no RDMA device under "
                       f"{ctx.params.get('ib_sysfs') or IB_ROOT})")
    for what in missing:
        found.append(not_measured(NAME, host, f"soak: {what}", "tool missing or unreadable"))
    return found


PROBE = Probe(NAME, command, guard_parse(NAME, parse), check, timeout_s=60.0, figures=figures,
              summarize=summarize)
