"""dcgm-diag (acceptance L1, active): NVIDIA's own GPU diagnostics, ``dcgmi diag -r N -j``.

DCGM's run levels trade time for depth (docs: -r 1 seconds, -r 2 about two minutes, -r 3 about
15 minutes of stress, memory, PCIe and NVLink tests, -r 4 extended); acceptance runs -r 3, and
-r 4 for a first acceptance (``first: true``). Every test row is a figure per GPU; any Fail, or
an error DCGM raises before its tests (row remappings pending, a GPU it cannot use), fails the
node and names the test and the GPU; a test DCGM failed on an error of no GPU fails the node and
names the test alone, with DCGM's words and error code. A Warn is reported, not passed over; a run
that did not start or finish, or left a GPU untested, is incomplete (not measured).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from probes import active
from probes.base import Context, Probe, finding, guard_parse
from probes.model import Finding
from probes.parsers._dcgmi import gpus_in_text

NAME = "dcgm-diag"
LEVEL = 1
# Host-side limit per run level: DCGM's documented durations with room for 8 GPUs.
_LIMIT_S = {1: 300.0, 2: 900.0, 3: 3600.0, 4: 10800.0}
_VERDICT = {"Pass": "pass", "Fail": "fail", "Warn": "warn", "Skip": "skipped"}
# cudaGetErrorString(cudaErrorDevicesUnavailable) / CUDA_ERROR_DEVICE_UNAVAILABLE, which DCGM
# quotes when it cannot create a context on a GPU: CUDA Runtime API, cudaErrorDevicesUnavailable
# "all CUDA devices are busy or unavailable at the current time ... due to use of
# cudaComputeModeProhibited, cudaComputeModeExclusiveProcess, or when long running CUDA kernels
# have filled up the GPU" (NVIDIA/go-dcgm#52, NVIDIA/DCGM#224 show it in dcgmi diag output).
_BUSY = "busy or unavailable"
# What DCGM says to do about an error of each severity (the ``error_severity`` of a -j warning):
# dcgmlib/dcgm_errors.h dcgmErrorSeverity_t, in DCGM's words; the first listed is the most
# pressing. dcgmlib/src/dcgm_errors.c gives each DCGM_FR_* code its severity (faulty memory and
# volatile DBEs: isolate; pending row remap: reset; persistence mode: config; thermal: monitor).
_ACTIONS = {
    2: "isolate (DCGM: cannot perform workload, the GPU should be isolated)",
    6: "reset (DCGM: drain and reset the GPU)",
    4: "triage (DCGM: this error should be triaged)",
    5: "config (DCGM: this error can be configured; a setup fix, not the GPU)",
    1: "monitor (DCGM: can perform workload, but needs to be monitored)",
    3: "unknown (DCGM: the error code is not recognized)",
}


def run_level(params: Mapping[str, Any]) -> int:
    crit = active.merged(params.get("criteria"))
    key = "first_acceptance_level" if params.get("first") else "run_level"
    try:
        level = int(params.get("level") or crit.get(NAME, key).value)
    except (TypeError, ValueError):
        level = int(crit.get(NAME, "run_level").value)
    return level if level in _LIMIT_S else 3


def limit_s(params: Mapping[str, Any]) -> float:
    return _LIMIT_S[run_level(params)]


def command(params: Mapping[str, Any]) -> str:
    level = run_level(params)
    return active.active_script([active.GPUS_SECTION, ("dcgmi", f"dcgmi diag -r {level} -j")],
                                {"gpus": "nvidia-smi", "dcgmi": "dcgmi"})


def parse(text: str) -> dict[str, Any]:
    facts, section = active.tool_section(text, "dcgmi", level=None, tests=[], failed_tests=[],
                                         errors=[], run_error=None)
    result = section and active.parse_tool(facts, section, "dcgmi-diag")
    if not result:
        if section and section.text.lstrip().startswith("{"):
            facts["run_error"] = _json_trouble(section.text, section.rc)
        elif section and (said := _error_lines(section.text)):
            facts["run_error"] = said
        return facts
    facts.update(tests=result["tests"], failed_tests=result["failed_tests"],
                 errors=result["errors"], dcgm_version=result["dcgm_version"],
                 run_error=result.get("run_error"))
    return facts


def _json_trouble(text: str, rc: int | None) -> str:
    """Why a -j output that opens a JSON document is no report. dcgmi prints the document once,
    at the end (Diag::HelperDisplayAsJson): one that does not decode is a run stopped before it
    finished (a time limit, a kill); one that decodes holds no test (3.x drops a system error
    from -j output, Diag::RunDiagOnce prints it only in the table form)."""
    try:
        json.loads(text)
    except ValueError:
        return f"stopped before it finished: its JSON document is cut off (exit status {rc})"
    return f"printed a JSON document with no test result (exit status {rc})"


def _error_lines(text: str) -> str:
    """Every "Error: ..." line dcgmi printed instead of a report, joined: the first says it could
    not run ("Unable to complete diagnostic ... Return: (-30)"), the next ones why (the system
    errors Diag::RunDiagOnce appends: "Cannot load plugins ...", NVIDIA/DCGM#254)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("Error:")]
    return " | ".join(lines)[:600]


def figures(host: str, facts: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    level = run_level(ctx.params)
    source = active.criteria(ctx).get(NAME, "max_failed_tests").source
    out = []
    for error in facts.get("errors") or []:
        out.append(active.figure(LEVEL, NAME, "deployment", error, verdict="fail",
                                 source=source, run_level=level))
    for test in facts.get("tests") or []:
        gpus = test.get("gpus") or {}
        for gpu, status in (gpus.items() if gpus else [(None, test["status"])]):
            out.append(active.figure(
                LEVEL, NAME, test["name"], status, op="==", threshold="Pass",
                verdict=_VERDICT.get(status, "recorded"), source=source,
                gpu=int(gpu) if gpu is not None else None, run_level=level))
        if _unattributed(test):
            # the test's own Fail / Warn that no GPU carries (DCGM 4.x: a global "Warning", an
            # internal error of the test, an error of a CPU; 2.x/3.x: one error nvvs copied to
            # every GPU). It names no GPU. dcgmi's exit status fails the run
            # (Diag::GetFailureResult counts an error of no entity with a code), but what that
            # says of the node is DCGM's severity of the error (dcgm_errors.h): "isolate" or
            # "reset" (the node cannot run work: an NVSwitch, a PCIe fabric error) fails the
            # node; "triage" (DCGM_FR_INTERNAL: the diagnostic's own error), "config" (a setup
            # fix), "monitor", or no code at all (the table form prints none) measured nothing
            # of the hardware: incomplete, with DCGM's words and action
            status = test["status"]
            verdict = _VERDICT.get(status, "recorded")
            if status == "Fail" and not _hardware_error(test):
                verdict = "not-run"
            out.append(active.figure(
                LEVEL, NAME, test["name"], status, op="==", threshold="Pass",
                verdict=verdict, source=source, run_level=level, unattributed=True))
    return out


# dcgmErrorSeverity_t values under which DCGM says the node cannot be trusted with work
# (dcgmlib/dcgm_errors.h: DCGM_ERROR_ISOLATE 2, DCGM_ERROR_RESET 6)
_HARDWARE_SEVERITIES = frozenset({2, 6})


def _hardware_error(test: Mapping[str, Any]) -> bool:
    """Whether an error of no GPU behind the test's Fail is one DCGM says to isolate or reset."""
    return any(c.get("gpu") is None and c.get("severity") in _HARDWARE_SEVERITIES
               for c in test.get("codes") or [])


def _unattributed(test: Mapping[str, Any]) -> bool:
    """A test whose result is worse than every GPU's (per-GPU rows all Pass under "Fail")."""
    gpus = test.get("gpus") or {}
    rank = {"Fail": 2, "Warn": 1}
    return bool(gpus) and rank.get(test["status"], 0) > max(rank.get(s, 0) for s in gpus.values())


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    found, done = active.check_start(NAME, host, facts, "dcgmi", "dcgm-diag-incomplete")
    if done:
        return found
    level = run_level(ctx.params)
    figs = facts.get("figures") or []
    tests = facts.get("tests") or []
    failed = [f for f in figs if f["verdict"] == "fail"]
    busy = [f for f in failed if _busy(f, tests)]
    failed = [f for f in failed if f not in busy]
    if failed:
        named = sorted({_where(f) for f in failed})
        failing = {f["metric"] for f in failed}
        messages = [m for t in tests if t["status"] == "Fail" and t["name"] in failing
                    for m in t["messages"]][:10]
        # DCGM's own words ("Found 126 faulty memory elements on GPU 5"): what an RMA asks for
        said = f"; DCGM: {' | '.join(messages)}"[:600] if messages else ""
        actions = _actions(tests, failed)
        todo = f"; action: {', '.join(actions)}" if actions else ""
        codes = _error_codes(tests, failing)
        coded = f"; DCGM error code {', '.join(map(str, codes))}" if codes else ""
        found.append(finding(
            "dcgm-diag-failed", [host],
            f"dcgmi diag -r {level} failed on {host}: {', '.join(named)}{todo}{coded}{said}",
            NAME, failed=named, messages=messages, actions=actions, codes=codes,
            gpus=sorted({f["gpu"] for f in failed if f["gpu"] is not None})))
    why, evidence = _incomplete(facts, tests, level, busy, bool(failed))
    if why:
        found.append(finding("dcgm-diag-incomplete", [host],
                             f"dcgmi diag -r {level} on {host}: {'; '.join(why)}", NAME,
                             **evidence))
    warned = sorted({_where(f) for f in figs if f["verdict"] == "warn"})
    if warned:
        found.append(finding("dcgm-diag-warning", [host],
                             f"dcgmi diag -r {level} warned on {host}: {', '.join(warned)}",
                             NAME, warned=warned))
    return found


def _incomplete(facts: Mapping[str, Any], tests: list[dict[str, Any]], level: int,
                busy: list[dict[str, Any]], failed: bool) -> tuple[list[str], dict[str, Any]]:
    """Why the run measured less than it must (each a reason in words) and the evidence."""
    why: list[str] = []
    evidence: dict[str, Any] = {}
    if facts.get("run_error"):
        # dcgmi could not run or finish the diagnostic (its runtime_error, or no report at all):
        # nothing measured, which is neither a pass nor a GPU's failure
        why.append(f"did not run: {facts['run_error']}")
        evidence["error"] = facts["run_error"]
    unattributed = [f for f in facts.get("figures") or []
                    if f["verdict"] == "not-run" and (f.get("detail") or {}).get("unattributed")]
    if unattributed:
        names = sorted({f["metric"] for f in unattributed})
        said = " | ".join(m for t in tests if t["name"] in names for m in t["messages"])[:600]
        acted = _actions(tests, [{"metric": n, "gpu": None} for n in names])
        why.append(f"{', '.join(names)} failed on an error of no GPU that DCGM does not say to "
                   "isolate or reset for (its own error, a setup to fix, or no code), so it "
                   "measured no GPU" + (f"; action: {', '.join(acted)}" if acted else "")
                   + (f"; DCGM: {said}" if said else ""))
        evidence.update(unattributed=names, actions=acted, codes=_error_codes(tests, names))
    if busy:
        where = sorted({_where(f) for f in busy})
        why.append(f"could not use the GPU in {', '.join(where)}: CUDA said {_BUSY!r} (another "
                   "process holds it, or its compute mode admits no new context): not a GPU "
                   "fault; free the GPU and run it again")
        evidence["busy"] = where
    if why or failed:
        return why, evidence
    if not tests:
        why.append("reported no test")
    elif not _measured(tests, level):
        # every test beyond the Deployment checks was skipped (a GPU the plugins do not support,
        # NVIDIA/DCGM#55 and #139; a test disabled): DCGM measured nothing, no pass
        why.append("ran no GPU test: every test was skipped")
        evidence["skipped"] = [t["name"] for t in tests]
    elif unmeasured := _unmeasured_gpus(tests, level):
        # the other GPUs were tested, these were skipped by every test ("Skip - GPU: 3",
        # "GPU3: Skip" / "Not Run"): the node has not passed what they were not put through
        why.append(f"did not test {', '.join(f'GPU {g}' for g in unmeasured)}: every test "
                   "skipped it")
        evidence["skipped_gpus"] = unmeasured
    elif absent := _absent_gpus(facts, tests, level):
        # nvidia-smi lists the GPU, no DCGM result names it (a GPU DCGM left out of its group:
        # unsupported, inaccessible, detached): the node has not passed what was not tested
        why.append(f"reported no result for {', '.join(f'GPU {g}' for g in absent)}, which "
                   "nvidia-smi lists")
        evidence["untested_gpus"] = absent
    return why, evidence


def _absent_gpus(facts: Mapping[str, Any], tests: list[dict[str, Any]], level: int) -> list[int]:
    """GPUs nvidia-smi listed that no per-GPU result names, when results name GPUs by index."""
    listed = {g["index"] for g in facts.get("gpus") or [] if isinstance(g.get("index"), int)}
    counted = [t for t in tests if level == 1 or t.get("category") != "Deployment"]
    if not listed or any(not t.get("gpus") and t["status"] != "Skip" for t in counted):
        return []  # "Pass - All": a result for every GPU DCGM ran on, which it does not list
    named = {int(g) for t in tests for g in t.get("gpus") or {} if g.isdigit()}
    if not named or not named <= listed:
        return []  # ids that are not nvidia-smi's indices: nothing to compare
    return sorted(listed - named)


def _busy(fig: Mapping[str, Any], tests: list[dict[str, Any]]) -> bool:
    """A failed figure whose every DCGM message about its GPU is CUDA's "busy or unavailable"."""
    said = [m for t in tests if t["name"] == fig["metric"] for m in t["messages"]]
    if fig["gpu"] is not None:
        said = [m for m in said if fig["gpu"] in gpus_in_text(m)]
    return bool(said) and all(_BUSY in m for m in said)


def _error_codes(tests: list[dict[str, Any]], names: Collection[str]) -> list[int]:
    """DCGM's error codes (DCGM_FR_*) behind the failed tests *names* (JSON only)."""
    return sorted({c["code"] for t in tests if t["status"] == "Fail" and t["name"] in names
                   for c in t.get("codes") or [] if c.get("code") is not None})


def _actions(tests: list[dict[str, Any]], failed: list[dict[str, Any]]) -> list[str]:
    """DCGM's action for the errors behind the failed figures, most pressing first (JSON only:
    tables print no codes)."""
    on = {(f["metric"], None if f["gpu"] is None else str(f["gpu"])) for f in failed}
    severities = {c["severity"] for t in tests if t["status"] == "Fail"
                  for c in t.get("codes") or []
                  if (t["name"], c["gpu"]) in on or c["gpu"] is None}
    return [text for severity, text in _ACTIONS.items() if severity in severities]


def _unmeasured_gpus(tests: list[dict[str, Any]], level: int) -> list[int]:
    """GPUs every GPU test named and skipped, when a test ended with a result on others."""
    counted = [t for t in tests if level == 1 or t.get("category") != "Deployment"]
    if any(not t.get("gpus") and t["status"] != "Skip" for t in counted):
        return []  # "Pass - All": a result for every GPU
    named = {g for t in counted for g in t.get("gpus") or {}}
    measured = {g for t in counted for g, s in (t.get("gpus") or {}).items() if s != "Skip"}
    return sorted(int(g) for g in named - measured if g.isdigit()) if measured else []


def _measured(tests: list[dict[str, Any]], level: int) -> bool:
    """Whether any test ended with a result (Pass, Warn, Fail). Above -r 1 the Deployment
    checks (software, Denylist, Persistence Mode ...) do not count: they read the setup, they
    load no GPU (DCGM docs, run levels: -r 1 is the deployment/software checks only)."""
    return any(t["status"] != "Skip" and (level == 1 or t.get("category") != "Deployment")
               for t in tests)


def _where(fig: Mapping[str, Any]) -> str:
    if fig["metric"] == "deployment":
        return f"deployment ({fig['value']})"
    if (fig.get("detail") or {}).get("unattributed"):
        return f"{fig['metric']} (the test, no GPU named)"
    return str(fig["metric"]) + (f" (GPU {fig['gpu']})" if fig["gpu"] is not None else "")


PROBE = Probe(NAME, command, guard_parse(NAME, parse), check, timeout_s=3600.0, active=True,
              figures=figures, limit_s=limit_s)
