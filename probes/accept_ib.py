"""ib-loopback (acceptance L2, active): RDMA write bandwidth and latency of every HCA.

As Azure's health checks do (customTests/azure_ib_write_bw_gdr.nhc), each InfiniBand port that
ibstat lists as Active runs ``ib_write_bw`` against itself (server and client on the node, 8 MiB
messages, ``--use_cuda`` from the GPU paired with it when nvidia_peermem is loaded, so
GPUDirect RDMA is part of the test), then ``ib_write_lat`` for the latency percentiles. The
bandwidth is judged per port rate (375 Gb/s on NDR 400, 185 on HDR 200); no public checker
publishes a latency limit, so latency is recorded and a port far above its peers is reported.
A node the site declares without RDMA (``rdma: false``) has nothing to test here.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from probes import active
from probes.base import Context, Probe, finding, guard_parse, split_sections
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "ib-loopback"
LEVEL = 2
_IBSTAT = ("diag_ibstat=$(timeout 20 ibstat 2>&1); rc=$?; "
           "printf '%s\\n' \"$diag_ibstat\"; (exit $rc)")
_PEERMEM = "grep -E '^(nvidia_peermem|nv_peer_mem) ' /proc/modules || true"
# For every CA with an Active InfiniBand port: bandwidth (8 MiB) and latency, each a server in
# the background and a client against it on this node, each bounded.
_LOOP = r"""diag_cas=$(printf '%s\n' "$diag_ibstat" | awk '
  /^CA .*'"'"'/ { ca = $2; gsub(/'"'"'/, "", ca); st = "" }
  /State:/ { st = $2 }
  /Link layer:/ { if (st == "Active" && $3 == "InfiniBand" && !seen[ca]++) print ca }')
diag_cuda_ok=$(grep -cE '^(nvidia_peermem|nv_peer_mem) ' /proc/modules 2>/dev/null)
i=0
for d in $diag_cas; do
  cuda=""; [ "${diag_cuda_ok:-0}" -gt 0 ] && [ "$i" -lt "${diag_ngpu:-0}" ] && cuda="--use_cuda=$i"
  p=$((18515 + 2 * i))
  echo "=== diag:section bw-$d"
  { timeout 90 ib_write_bw -d "$d" -s MSG -F --report_gbits -p "$p" $cuda >/dev/null 2>&1 &
    sleep 1; timeout 60 ib_write_bw -d "$d" -s MSG -F --report_gbits -p "$p" $cuda localhost
    rc=$?; wait; (exit $rc); } 2>&1
  echo "=== diag:rc bw-$d $?"
  echo "=== diag:section lat-$d"
  { timeout 90 ib_write_lat -d "$d" -s 2 -F -p "$((p + 1))" >/dev/null 2>&1 &
    sleep 1; timeout 60 ib_write_lat -d "$d" -s 2 -F -p "$((p + 1))" localhost
    rc=$?; wait; (exit $rc); } 2>&1
  echo "=== diag:rc lat-$d $?"
  i=$((i + 1))
done
true
"""


def command(params: Mapping[str, Any]) -> str:
    if params.get("rdma") is False:
        return active.active_script([("rdma", "echo 'declared without RDMA'")])
    size = int(active.merged(params.get("criteria")).get(NAME, "message_bytes").value)
    ngpu = "diag_ngpu=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
    return active.active_script(
        [("ibstat", _IBSTAT), ("peermem", _PEERMEM)], {"ibstat": "ibstat"}
    ) + ngpu + "\n" + _LOOP.replace("MSG", str(size))


def parse(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {**active.parse_guard(text), "ports": {}, "rdma": True,
                             "gpudirect": False, "missing": False, "run_error": None}
    if facts["refused"]:
        return facts
    sections = split_sections(text)
    if "rdma" in sections:
        facts["rdma"] = False
        return facts
    ibstat = sections.get("ibstat")
    if ibstat is None or ibstat.missing:
        facts["missing"] = True
        return facts
    facts["gpudirect"] = "peermem" in sections and bool(sections["peermem"].text.strip())
    try:
        cas = parse_kind("ibstat", ibstat.text)["cas"]
    except ParseError:
        facts["run_error"] = active.first_line(ibstat.text) or "ibstat printed nothing"
        return facts
    for ca in cas:
        bw, lat = sections.get(f"bw-{ca['name']}"), sections.get(f"lat-{ca['name']}")
        if bw is None:
            continue
        active_port = next((p for p in ca["ports"] if p["state"] == "Active"), None)
        port: dict[str, Any] = {"rate_gbit_s": active_port and active_port["rate_gbit_s"],
                                "bw_gbit_s": None, "use_cuda": False, "p99_us": None,
                                "t_typical_us": None, "error": None}
        try:
            rows = parse_kind("ib-write-bw", bw.text)
            port["use_cuda"] = rows["use_cuda"]
            best = max(rows["rows"], key=lambda r: r["size_bytes"]) if rows["rows"] else None
            port["bw_gbit_s"] = best and best["bw_avg_gbit_s"]
        except ParseError:
            port["error"] = active.first_line(bw.text) or f"exit status {bw.rc}"
        if lat is not None:
            try:
                rows = parse_kind("ib-write-lat", lat.text)["rows"]
                if rows:
                    port["p99_us"], port["t_typical_us"] = rows[0]["p99_us"], \
                        rows[0]["t_typical_us"]
            except ParseError:
                pass
        facts["ports"][ca["name"]] = port
    return facts


def figures(host: str, facts: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    crit = active.criteria(ctx)
    out = []
    for device, port in sorted((facts.get("ports") or {}).items()):
        floor = crit.per(NAME, "bw_min_gbit_s", port.get("rate_gbit_s"))
        out.append(active.figure(
            LEVEL, NAME, "write_bw", port["bw_gbit_s"], unit="Gb/s", op=">=" if floor else None,
            threshold=floor.value if floor else None, source=floor.source if floor else "",
            device=device, rate_gbit_s=port.get("rate_gbit_s"), use_cuda=port.get("use_cuda")))
        for metric in ("p99_us", "t_typical_us"):
            if port.get(metric) is not None:
                out.append(active.figure(LEVEL, NAME, f"write_lat_{metric[:-3]}", port[metric],
                                         unit="us", device=device))
    return out


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    found = active.guard_findings(NAME, host, facts)
    if facts.get("refused") or facts.get("rdma") is False:
        return found
    if facts.get("missing"):
        return [*found, active.tool_missing(NAME, host, "ibstat", "ib-loopback-incomplete")]
    figs = [f for f in facts.get("figures") or [] if f["metric"] == "write_bw"]
    if facts.get("run_error") or not figs:
        why = facts.get("run_error") or "no Active InfiniBand port to test"
        return [*found, finding("ib-loopback-incomplete", [host],
                                f"ib_write_bw on {host} tested nothing: {why}", NAME, why=why)]
    failed = [f for f in figs if f["verdict"] in ("fail", "not-run")]
    if failed:
        found.append(finding(
            "ib-loopback-bw-low", [host],
            f"RDMA write bandwidth on {host} below the floor or not measured: " + ", ".join(
                f"{f['detail']['device']} "
                + (f"{f['value']:.0f} < {f['threshold']:g} Gb/s" if f["value"] is not None
                   else "no result") for f in failed), NAME,
            ports=[f["detail"]["device"] for f in failed],
            source=next((f["source"] for f in failed if f["source"]), "")))
    unjudged = [f for f in figs if f["verdict"] == "recorded"]
    if unjudged:
        found.append(active.not_judged(NAME, host, "RDMA write bandwidth",
                                       f"{unjudged[0]['detail'].get('rate_gbit_s')} Gb/s ports",
                                       "bw_min_gbit_s"))
    return found


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    """A port whose p99 write latency is far above the peers' median (recorded, not failed)."""
    factor = float(active.criteria(ctx).get(NAME, "latency_peer_factor").value)
    p99 = {(h, d): p["p99_us"] for h, f in facts_by_host.items()
           for d, p in (f.get("ports") or {}).items() if p.get("p99_us") is not None}
    if len(p99) < 4:
        return []
    median = statistics.median(p99.values())
    slow = {k: v for k, v in p99.items() if v > factor * median}
    if not slow:
        return []
    return [finding("ib-latency-outlier", sorted({h for h, _ in slow}),
                    "RDMA write p99 latency far above the peers' median "
                    f"{median:.2f} us: " + ", ".join(f"{h} {d} {v:.2f} us"
                                                     for (h, d), v in sorted(slow.items())),
                    NAME, median_us=median, factor=factor)]


PROBE = Probe(NAME, command, guard_parse(NAME, parse), check, check_fleet, timeout_s=1800.0,
              active=True, figures=figures)
