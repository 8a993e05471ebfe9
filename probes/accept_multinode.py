"""nccl-multinode (acceptance L3, active, launched from this machine): the nodes together.

One script runs here and launches every run across the nodes with the site's launcher:
``srun -N n -w NODES --ntasks-per-node=G`` (inside a reservation or allocation the site names
in ``srun_args``, e.g. ``--reservation=accept``: hold the nodes in a MAINT reservation and
resume them for L3, since Slurm starts no job step on a drained node, even inside a
reservation) or ``mpirun -H a:G,b:G``. In order:

1. pairs of nodes (or each node with a known-good ``reference`` node): a slow or failing pair
   isolates a node, its cable or its switch port;
2. for sets of 32 GPUs and more, the single-node (8-GPU) figure and the 32-GPU (and 64-GPU)
   subsets, for the scaling targets of the source documents (>= 0.9 from 8 to 32 GPUs, <= 10 %
   drop from 32 to 64);
3. the whole set.

Every run is bracketed by the IB error and retransmit counters of its nodes, read through the
same launcher before and after: a counter that rose during a run fails the node it rose on even
when the bandwidth looked fine (a link can pass a test while it accumulates symbol errors).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from probes import active
from probes.accept_nccl import judge_run, run_facts, run_findings
from probes.base import Context, Probe, finding, guard_parse, not_measured, split_sections
from probes.model import Finding

NAME = "nccl-multinode"
LEVEL = 3
IB_ROOT = "/sys/class/infiniband"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=:,/+-]*$")
# A launcher option (--reservation=accept, -p batch): the same characters after its dashes.
_SAFE_ARG = re.compile(r"^-{0,2}[A-Za-z0-9][A-Za-z0-9._=:,/+-]*$")
_COUNTER = re.compile(r"/([^/\s]+)/ports/(\d+)/(?:hw_)?counters/([a-z_0-9]+):(\d+)\s*$")
_RUN_LIMIT_S = 1800


def _args(params: Mapping[str, Any], key: str) -> list[str]:
    raw = params.get(key) or []
    tokens = shlex.split(raw) if isinstance(raw, str) else [str(t) for t in raw]
    return [t for t in tokens if _SAFE_ARG.match(t)]


def groups(hosts: list[str], params: Mapping[str, Any], gpus: int) -> list[tuple[str, list[str]]]:
    """The runs, in order: (id, nodes)."""
    ref = params.get("reference")
    runs: list[tuple[str, list[str]]] = []
    if ref:
        runs += [(f"pair-{i + 1}", [h, str(ref)]) for i, h in enumerate(hosts) if h != ref]
    else:
        runs += [(f"pair-{i // 2 + 1}", hosts[i:i + 2]) for i in range(0, len(hosts) - 1, 2)]
        if len(hosts) % 2 and len(hosts) > 1:  # the odd one out pairs with the first
            runs.append((f"pair-{len(hosts) // 2 + 1}", [hosts[-1], hosts[0]]))
    total = len(hosts) * gpus
    if total >= 32:
        runs.append(("base", hosts[:1]))
        runs.append(("sub32", hosts[:max(1, 32 // gpus)]))
    if total >= 64:
        runs.append(("sub64", hosts[:max(1, 64 // gpus)]))
    if len(hosts) > 2 or (ref and len(hosts) > 1):
        runs.append(("set", list(hosts)))
    return runs


def command(params: Mapping[str, Any]) -> str:
    hosts = [str(h) for h in params.get("peers") or [] if _SAFE.match(str(h))]
    gpus = int(params.get("gpus_per_node") or 8)
    launcher = str(params.get("launcher") or "srun")
    names = "|".join(active.merged(params.get("criteria")).get(
        NAME, "counters_must_not_rise").value)
    # the sysfs root is quoted; its one placeholder, {node}, becomes the node being sampled
    # (passed to the sample as $1), so a test can give each node its own counters without the
    # root ever reaching the shell unquoted
    root = '"$1"'.join(shlex.quote(part) for part in
                       str(params.get("ib_sysfs") or IB_ROOT).split("{node}"))
    # the names are identifiers (probes.criteria refuses the rest) and quoted all the same: the
    # sample runs on every node of the run
    sample = (f"grep -H . {root}/*/ports/*/counters/* {root}/*/ports/*/hw_counters/* "
              f"2>/dev/null | grep -E {shlex.quote(f'/({names}):')}; true")
    if launcher == "mpirun":
        extra = " ".join(shlex.quote(a) for a in _args(params, "mpirun_args"))
        launch = ('launch() { n=$1; t=$2; nodes=$3; lim=$4; shift 4; '
                  'timeout "$lim" mpirun ' + extra + ' -np $((n * t)) '
                  '-H "$(printf "%s" "$nodes" | sed "s/,/:$t,/g"):$t" "$@"; }')
    else:
        extra = " ".join(shlex.quote(a) for a in _args(params, "srun_args"))
        launch = ('launch() { n=$1; t=$2; nodes=$3; lim=$4; shift 4; '
                  f'timeout "$lim" srun {extra} -N "$n" -w "$nodes" --ntasks-per-node="$t" "$@"; '
                  '}')
    lines = ["export LC_ALL=C", launch,
             "counters() { for node in $(printf '%s' \"$1\" | tr , ' '); do "
             "echo \"--- $node\"; launch 1 1 \"$node\" 60 sh -c "
             + shlex.quote(sample) + " diag-sample \"$node\"; done; }"]
    lines.append(f"if ! command -v {shlex.quote(launcher)} >/dev/null 2>&1; then "
                 f"echo '=== diag:missing launcher'; exit 0; fi")
    lines.append(f"echo '=== diag:section launcher'; echo {shlex.quote(launcher)}; "
                 "echo '=== diag:rc launcher 0'")
    for gid, nodes in groups(hosts, params, gpus):
        csv = ",".join(nodes)
        lines += [
            f"echo '=== diag:section group-{gid}'; echo {shlex.quote(csv)}; "
            f"echo '=== diag:rc group-{gid} 0'",
            f"echo '=== diag:section before-{gid}'; counters {shlex.quote(csv)} 2>&1; "
            f"echo '=== diag:rc before-{gid} 0'",
            f"echo '=== diag:section nccl-{gid}'; {{ launch "
            f"{len(nodes)} {gpus} {shlex.quote(csv)} {_RUN_LIMIT_S} "
            "all_reduce_perf -b 8 -e 8G -f 2 -g 1; } "
            f"2>&1; echo \"=== diag:rc nccl-{gid} $?\"",
            f"echo '=== diag:section after-{gid}'; counters {shlex.quote(csv)} 2>&1; "
            f"echo '=== diag:rc after-{gid} 0'",
        ]
    return "\n".join(lines) + "\n"


def limit_s(params: Mapping[str, Any]) -> float:
    hosts = [h for h in params.get("peers") or []]
    runs = groups([str(h) for h in hosts], params, int(params.get("gpus_per_node") or 8))
    return float(len(runs) * (_RUN_LIMIT_S + 300) + 60)


def _counters(text: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    node = None
    for line in text.splitlines():
        if line.startswith("--- "):
            node = line[4:].strip()
            out.setdefault(node, {})
        elif node and (m := _COUNTER.search(line)):
            out[node][f"{m.group(1)}/{m.group(2)} {m.group(3)}"] = int(m.group(4))
    return out


def parse(text: str) -> dict[str, Any]:
    facts: dict[str, Any] = {**active.parse_guard(text), "launcher": None, "runs": [],
                             "counters": {}, "missing": False}
    if facts["refused"]:
        return facts
    sections = split_sections(text)
    if "launcher" not in sections:
        facts["missing"] = True
        return facts
    facts["launcher"] = sections["launcher"].text.strip()
    for name, section in sections.items():
        if not name.startswith("group-"):
            continue
        gid = name[len("group-"):]
        nodes = section.text.strip().split(",")
        nccl = sections.get(f"nccl-{gid}")
        run = run_facts(nccl.text, nccl.rc) if nccl is not None else None
        before = _counters(sections[f"before-{gid}"].text) if f"before-{gid}" in sections else {}
        after = _counters(sections[f"after-{gid}"].text) if f"after-{gid}" in sections else {}
        rose = {node: {c: after[node][c] - v for c, v in before.get(node, {}).items()
                       if c in after.get(node, {}) and after[node][c] > v}
                for node in nodes}
        read = {node: bool(before.get(node)) and bool(after.get(node)) for node in nodes}
        facts["runs"].append({"id": gid, "nodes": nodes, "run": run})
        facts["counters"][gid] = {"rose": rose, "read": read}
    return facts


def _busbw(run: Mapping[str, Any] | None, min_bytes: int) -> float | None:
    from probes.accept_nccl import busbw_at_size

    return busbw_at_size(run or {}, min_bytes)[0]


def figures(host: str, facts: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    crit = active.criteria(ctx)
    fabric = ctx.params.get("fabric") or (ctx.attrs.get(host) or {}).get("fabric")
    floor = crit.per(NAME, "pair_busbw_min_gb_s", fabric)
    min_bytes = int(crit.get(NAME, "min_bytes").value)
    watched = crit.get(NAME, "counters_must_not_rise")
    out: list[dict[str, Any]] = []
    by_id = {r["id"]: r for r in facts.get("runs") or []}
    for run in facts.get("runs") or []:
        if host not in run["nodes"] or run["id"] in ("base", "sub32", "sub64"):
            continue
        out += judge_run(LEVEL, NAME, run["run"], floor, min_bytes, crit.get(NAME, "max_wrong"),
                         run=run["id"], nodes=run["nodes"], fabric=fabric)
        counters = (facts.get("counters") or {}).get(run["id"]) or {}
        rose = (counters.get("rose") or {}).get(host) or {}
        read = (counters.get("read") or {}).get(host)
        out.append(active.figure(LEVEL, NAME, "counters_rose",
                                 sum(rose.values()) if read else None, unit="rise", op="<=",
                                 threshold=0, source=watched.source, run=run["id"],
                                 counters=rose))
    scaling = _scaling(by_id, min_bytes)
    for metric, value in scaling.items():
        key = ("scaling_min_efficiency_8_to_32" if metric == "efficiency_8_32"
               else "scaling_max_drop_32_to_64")
        target = crit.get(NAME, key)
        out.append(active.figure(LEVEL, NAME, metric, value,
                                 op=">=" if metric == "efficiency_8_32" else "<=",
                                 threshold=target.value, source=target.source))
    return out


def _scaling(by_id: Mapping[str, Any], min_bytes: int) -> dict[str, float]:
    out = {}
    base = _busbw((by_id.get("base") or {}).get("run"), min_bytes)
    sub32 = _busbw((by_id.get("sub32") or {}).get("run"), min_bytes)
    sub64 = _busbw((by_id.get("sub64") or {}).get("run"), min_bytes)
    if base and sub32:
        out["efficiency_8_32"] = round(sub32 / base, 3)
    if sub32 and sub64:
        out["drop_32_64"] = round(1 - sub64 / sub32, 3)
    return out


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    found, done = active.check_start(NAME, host, facts, str(ctx.params.get("launcher") or "srun"),
                                     "multinode-nccl-aborted")
    if done:
        return found
    figs = facts.get("figures") or []
    runs = {r["id"]: r for r in facts.get("runs") or [] if host in r["nodes"]}
    for gid, run in runs.items():
        if gid in ("base", "sub32", "sub64"):
            continue
        mine = [f for f in figs if (f.get("detail") or {}).get("run") == gid]
        others = [n for n in run["nodes"] if n != host]
        what = f"between {host} and {', '.join(others)}" if gid != "set" else "across the set"
        for f in run_findings(NAME, host, [host], run["run"],
                              [f for f in mine if f["metric"] in ("busbw", "wrong")], what):
            found.append(f)
        counters = next((f for f in mine if f["metric"] == "counters_rose"), None)
        if counters and counters["verdict"] == "fail":
            rose = counters["detail"]["counters"]
            found.append(finding("counters-rose", [host],
                                 f"counters rose on {host} during the run {what}: " + ", ".join(
                                     f"{c} +{d}" for c, d in sorted(rose.items())), NAME,
                                 run=gid, rose=rose))
        elif counters and counters["verdict"] == "not-run":
            found.append(not_measured(NAME, host, f"IB counters around {gid}",
                                             "no counters could be read on the node"))
    return found


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    figs = [f for facts in facts_by_host.values() for f in facts.get("figures") or []
            if f["metric"] in ("efficiency_8_32", "drop_32_64")]
    failed = {f["metric"]: f for f in figs if f["verdict"] == "fail"}
    if not failed:
        return []
    return [finding("scaling-below-target", sorted(facts_by_host),
                    "the set scales below target: " + ", ".join(
                        f"{m} {f['value']:g} (target {f['op']} {f['threshold']:g}, "
                        f"{f['source']})" for m, f in sorted(failed.items()))
                    + "; suspect placement or the spine, not one node", NAME,
                    scaling={m: f["value"] for m, f in failed.items()})]


def _shared(reader: str) -> str:
    return f"# read once, from here, for every host (by {reader})\n"


PROBE = Probe(NAME, command, guard_parse(NAME, parse), check, check_fleet, timeout_s=3600.0,
              runs_on="client", shared_output=_shared, active=True, figures=figures,
              limit_s=limit_s)
