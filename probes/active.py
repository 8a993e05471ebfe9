"""What every active probe shares: the idle guard at the top of its script, the marks the
runner prints when it refuses to start a test, and the figures and findings that say what a
test measured against which criterion.

An active probe loads the node (dcgmi diag, gpu_burn, all_reduce_perf, ib_write_bw). It must
never land on a node that is running someone's training, so its script starts with a guard
that runs in the same shell, right before the load (no gap for a job to start in between):

- **GPU processes**: ``nvidia-smi -q -d PIDS`` lists the processes on every GPU; any of type
  C (compute, also C+G and M+C) means the GPUs are in use. Graphics-only processes (Xorg, type
  G) are not training and do not count.
- **Slurm**: where the node has ``scontrol``, its state must say no job can land on it during
  the test: DRAIN, RESERVED or MAINT among its flags, DOWN, or IDLE inside an ACTIVE
  reservation (Slurm 22.05 shows a reserved node as plain IDLE), and no job running
  (ALLOCATED, MIXED, COMPLETING). An IDLE node outside any reservation could receive a job
  mid-test. A node Slurm does not know is not a Slurm node; a controller that cannot be read
  is a refusal.

When the guard finds the node busy the script prints ``=== diag:refused busy REASON`` and
exits before the test (``state-unknown REASON`` when it cannot tell: the GPUs' processes or
the Slurm state could not be read, which is not "busy"); the operator's override
(``DIAG_IDLE_OVERRIDE=1``) runs it anyway and the facts say so. A host without ``setsid``
and ``timeout -k`` (which the transport bounds every command with) prints
``=== diag:refused no-time-limit ...`` and runs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from probes.base import Context, Section, finding, script, split_sections
from probes.criteria import Criteria
from probes.criteria import merged as merged  # re-exported: the acceptance probes use it
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

REFUSED = re.compile(r"^=== diag:refused (\S+) ?(.*)$", re.MULTILINE)
_PID_TYPE = re.compile(r"^\s*Type\s*:\s*(\S+)\s*$")
_PID_ID = re.compile(r"^\s*Process ID\s*:\s*(\d+)\s*$")
_PID_NAME = re.compile(r"^\s*Name\s*:\s*(.+?)\s*$")
_SLURM_STATE = re.compile(r"(?:^|\s)State=(\S+)")

# The guard, in the script's own shell. $node is the node's name for Slurm (diag's name for the
# host, else its short hostname); DIAG_IDLE_OVERRIDE=1 is the operator's override.
_GPU_PIDS = ("diag_pids=$(timeout 20 nvidia-smi -q -d PIDS 2>&1); diag_pids_rc=$?; "
             "printf '%s\\n' \"$diag_pids\"; (exit $diag_pids_rc)")
_SLURM_NODE = ("diag_sl=$(timeout 10 scontrol show node \"$node\" -o 2>&1); diag_sl_rc=$?; "
               "printf '%s\\n' \"$diag_sl\"; (exit $diag_sl_rc)")
# The transport bounds every command with setsid and timeout -k where the host has them
# (fleet.remoteproc) and runs it unbounded elsewhere: a load test is never started unbounded.
_BOUNDED = ("if ! command -v setsid >/dev/null 2>&1 || ! timeout -k 1 1 true 2>/dev/null; then "
            "echo '=== diag:refused no-time-limit setsid or timeout -k is missing: the test "
            "could not be bounded'; exit 0; fi\n")
_DECIDE = r"""diag_busy=""
diag_why=busy
diag_first() { printf '%s' "$1" | head -n 1 | cut -c1-120; }
# An IDLE node inside an ACTIVE reservation (Slurm 22.05 still shows State=IDLE there).
diag_in_resv() {
  for nl in $(timeout 10 scontrol show reservation -o 2>/dev/null | grep 'State=ACTIVE' \
              | sed -n 's/.*[[:space:]]Nodes=\([^[:space:]]*\).*/\1/p'); do
    scontrol show hostnames "$nl" 2>/dev/null | grep -qx "$node" && return 0
  done
  return 1
}
diag_c='^[[:space:]]*Type[[:space:]]*:[[:space:]]*[A-Z+]*C[A-Z+]*[[:space:]]*$'
if [ -n "${diag_pids_rc+x}" ]; then
  if [ "$diag_pids_rc" = 0 ]; then
    n=$(printf '%s\n' "$diag_pids" | grep -Ec "$diag_c")
    [ "$n" -gt 0 ] && diag_busy="$n compute process(es) on the GPUs"
  else
    diag_busy="cannot list the GPUs' processes: $(diag_first "$diag_pids")"; diag_why=state-unknown
  fi
fi
if [ -z "$diag_busy" ] && [ -n "${diag_sl_rc+x}" ]; then
  if [ "$diag_sl_rc" = 0 ]; then
    st=$(printf '%s\n' "$diag_sl" | sed -n 's/.*[[:space:]]State=\([^[:space:]]*\).*/\1/p' \
         | head -n 1)
    case "${st%%+*}" in
      ALLOCATED*|MIXED*|COMPLETING*) diag_busy="jobs are running on it in Slurm (State=$st)" ;;
      DOWN*) ;;
      *) case "+$st+" in
           *+DRAIN*|*+RESERVED+*|*+MAINT+*) ;;
           *) diag_in_resv || diag_busy="Slurm can schedule a job on it during the test \
(State=$st, in no active reservation): drain or reserve it first" ;;
         esac ;;
    esac
  else
    case "$diag_sl" in
      *"not found"*|*"Invalid node name"*) ;;
      *) diag_busy="cannot read the node's Slurm state: $(diag_first "$diag_sl")"
         diag_why=state-unknown ;;
    esac
  fi
fi
echo '=== diag:section idle'
echo "node $node"
echo "verdict ${diag_busy:-idle}"
echo "override ${DIAG_IDLE_OVERRIDE:-0}"
echo '=== diag:rc idle 0'
if [ -n "$diag_busy" ] && [ "${DIAG_IDLE_OVERRIDE:-0}" != 1 ]; then
  echo "=== diag:refused $diag_why $diag_busy"; exit 0
fi
"""


def active_script(sections: Sequence[tuple[str, str]],
                  requires: Mapping[str, str] | None = None) -> str:
    """The guard, then *sections* as ``base.script`` builds them (the test only runs when the
    guard let it through)."""
    guard = script([("idle-gpu", _GPU_PIDS), ("idle-slurm", _SLURM_NODE)],
                   {"idle-gpu": "nvidia-smi", "idle-slurm": "scontrol"})
    guard = guard.replace("export LC_ALL=C\n", "export LC_ALL=C\n"
                          "node=${DIAG_NODE:-$(hostname -s 2>/dev/null || hostname)}\n"
                          + _BOUNDED, 1)
    body = script(sections, requires).replace("export LC_ALL=C\n", "", 1)
    return guard + _DECIDE + body


def gpu_processes(text: str) -> list[dict[str, Any]]:
    """The processes of an ``nvidia-smi -q -d PIDS`` output: pid, type, name (in order)."""
    procs: list[dict[str, Any]] = []
    for line in text.splitlines():
        if m := _PID_ID.match(line):
            procs.append({"pid": int(m.group(1)), "type": None, "name": None})
        elif procs and (m := _PID_TYPE.match(line)):
            procs[-1]["type"] = m.group(1)
        elif procs and procs[-1]["name"] is None and (m := _PID_NAME.match(line)):
            procs[-1]["name"] = m.group(1)
    return procs


def parse_guard(text: str) -> dict[str, Any]:
    """The guard's facts, common to every active probe: whether the test ran, and why not."""
    refused = None
    if m := REFUSED.search(text):
        refused = f"{m.group(1)}: {m.group(2).strip()}".rstrip(": ")
    facts: dict[str, Any] = {"refused": refused, "idle": None, "override": False,
                             "gpu_processes": [], "slurm_state": None}
    if refused and refused.startswith("no-time-limit"):
        return facts
    sections = split_sections(text)
    idle = sections.get("idle")
    if idle is not None:
        fields = dict(line.split(" ", 1) for line in idle.text.splitlines() if " " in line)
        facts["idle"] = fields.get("verdict")
        facts["override"] = fields.get("override") == "1"
    pids = sections.get("idle-gpu")
    if pids is not None and not pids.missing:
        facts["gpu_processes"] = [p for p in gpu_processes(pids.text)
                                  if p["type"] and "C" in p["type"]][:32]
    slurm = sections.get("idle-slurm")
    if slurm is not None and not slurm.missing and slurm.rc == 0 and (
            m := _SLURM_STATE.search(slurm.text)):
        facts["slurm_state"] = m.group(1)
    return facts


# --- criteria, figures and the findings every active probe raises -------------------------------

def criteria(ctx: Context) -> Criteria:
    """The defaults with the site's ``--criteria`` overrides (given to every acceptance probe
    as the ``criteria`` param)."""
    return merged(ctx.params.get("criteria"))


def gpu_model(host: str, ctx: Context, reported: str | None, crit: Criteria) -> str | None:
    """The node's model key: the operator's (inventory ``gpu_model`` or the probe's param)
    first, then the GPU name the node reported."""
    declared = ctx.params.get("gpu_model") or (ctx.attrs.get(host) or {}).get("gpu_model")
    if declared:
        return crit.model_of(str(declared)) or str(declared)
    return crit.model_of(reported)


def figure(level: int, test: str, metric: str, value: Any, *, unit: str = "",
           op: str | None = None, threshold: Any = None, source: str = "",
           gpu: int | None = None, verdict: str | None = None, **detail: Any) -> dict[str, Any]:
    """One measured value and how it was judged: pass / fail against *threshold* with *op*
    (">=", "<=", "=="), "recorded" when no criterion applies, "not-run" when nothing ran."""
    if verdict is None:
        if value is None:
            verdict = "not-run"
        elif op is None or threshold is None:
            verdict = "recorded"
        else:
            ok = {">=": value >= threshold, "<=": value <= threshold,
                  "==": value == threshold}[op]
            verdict = "pass" if ok else "fail"
    return {"level": level, "test": test, "gpu": gpu, "metric": metric, "value": value,
            "unit": unit, "op": op, "threshold": threshold, "verdict": verdict,
            "source": source, **({"detail": detail} if detail else {})}


def guard_findings(name: str, host: str, facts: Mapping[str, Any]) -> list[Finding]:
    """A refused test (busy node, no time limit) and an override, said plainly."""
    refused = facts.get("refused")
    if refused:
        return [finding("active-test-refused", [host],
                        f"{name} did not run on {host}: {refused}", name, reason=refused,
                        gpu_processes=facts.get("gpu_processes") or [],
                        slurm_state=facts.get("slurm_state"))]
    if facts.get("override") and facts.get("idle") not in (None, "idle"):
        return [finding("active-test-override", [host],
                        f"{name} ran on {host} although {facts['idle']} (operator override)",
                        name, reason=facts["idle"])]
    return []


def not_judged(name: str, host: str, what: str, which: Any, key: str) -> Finding:
    """No criterion for this model or fabric: the figure is kept, the node is not passed."""
    return finding("acceptance-not-judged", [host],
                   f"{what} on {host} was measured but not judged: no criterion for "
                   f"{which or 'an unknown model'} ({name}.{key}); give one in --criteria FILE",
                   name, what=what, model=which, key=f"{name}.{key}")


# --- the GPUs a test ran on ---------------------------------------------------------------------

# Every GPU test also lists the node's GPUs: the model its criteria are looked up by, and the
# GPU count the per-GPU figures are checked against. CSV with its header, read by column name.
GPUS_SECTION = ("gpus", "timeout 20 nvidia-smi --query-gpu=index,name --format=csv")


def parse_gpus(text: str | None) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=...,name,... --format=csv`` as [{index, name}] in order; the
    columns are found by the header, so any query that includes ``name`` reads."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return []
    header = [c.strip().split(" [")[0] for c in lines[0].split(",")]
    if "name" not in header:
        return []
    at_name, at_index = header.index("name"), header.index("index") if "index" in header else None
    gpus = []
    for i, line in enumerate(lines[1:]):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(header):
            continue
        index = cells[at_index] if at_index is not None else str(i)
        gpus.append({"index": int(index) if index.isdigit() else i, "name": cells[at_name]})
    return gpus


def first_line(text: str | None, limit: int = 200) -> str:
    return next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")[:limit]


def tool_missing(name: str, host: str, tool: str, code: str) -> Finding:
    """The test's tool is not on the node: nothing measured, never a pass (the test's own
    "did not complete" code, so the node stays out)."""
    return finding(code, [host], f"{name} did not run on {host}: {tool} is not installed "
                   "(not on PATH)", name, why=f"{tool} missing")


# --- the prologue every active probe's parse and check share -----------------------------------

def tool_section(text: str, name: str, **defaults: Any) -> tuple[dict[str, Any], Section | None]:
    """The guard's facts, the GPUs the script listed, and the section of the test's tool;
    the section is None when the test was refused or its tool is missing (the facts say
    which), so a probe parses only what a test really printed."""
    facts: dict[str, Any] = {**parse_guard(text), "gpus": [], "missing": False, **defaults}
    if facts["refused"]:
        return facts, None
    sections = split_sections(text)
    facts["gpus"] = parse_gpus(sections["gpus"].text if "gpus" in sections else None)
    section = sections.get(name)
    if section is None or section.missing:
        facts["missing"] = True
        return facts, None
    return facts, section


def parse_tool(facts: dict[str, Any], section: Section, kind: str) -> dict[str, Any] | None:
    """The tool's output by its parser, or None with ``run_error`` set to the first line the
    tool printed (a tool that ran but printed no report: its own error message)."""
    try:
        return parse_kind(kind, section.text)
    except ParseError:
        facts["run_error"] = first_line(section.text) or f"exit status {section.rc}"
        return None


def check_start(name: str, host: str, facts: Mapping[str, Any], tool: str,
                code: str) -> tuple[list[Finding], bool]:
    """The findings every active check starts with (refusal, override, tool missing) and
    whether the check stops there: a test that did not run is judged by nothing else."""
    found = guard_findings(name, host, facts)
    if facts.get("refused"):
        return found, True
    if facts.get("missing"):
        return [*found, tool_missing(name, host, tool, code)], True
    return found, False
