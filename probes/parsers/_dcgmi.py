"""What the two forms of ``dcgmi diag`` output share: status words, GPU ids in messages, the result.

See dcgmi_diag.py for the forms themselves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# Worst first: a row split per GPU takes the worst of its parts (docs/parse-contract.md).
SEVERITY = {"Fail": 3, "Warn": 2, "Pass": 1, "Skip": 0}
_STATUS_WORDS = {
    "pass": "Pass",
    "passed": "Pass",
    "fail": "Fail",
    "failed": "Fail",
    "warn": "Warn",
    "warning": "Warn",
    "skip": "Skip",
    "skipped": "Skip",
    # DCGM 4.x prints "Not Run" for an entity a test did not cover: not a result, so Skip.
    "not run": "Skip",
}
# "GPU 0 Thermal violations ...", "for GPU 3." -- not the PCI address "GPU 00000000:3B:00.0".
_GPU_IN_TEXT = re.compile(r"\bGPU ?(\d{1,3})\b(?![:.]\w)")


def status_word(word: object) -> str | None:
    """DCGM's result word normalised to Pass / Fail / Warn / Skip; None when it is not one."""
    if not isinstance(word, str):
        return None
    return _STATUS_WORDS.get(" ".join(word.split()).lower())


def worst(statuses: Iterable[str]) -> str | None:
    """The most severe status of ``statuses`` (Fail > Warn > Pass > Skip), None when empty."""
    ranked = sorted(statuses, key=lambda s: SEVERITY.get(s, -1))
    return ranked[-1] if ranked else None


def gpus_in_text(text: str) -> set[int]:
    """GPU indices a message names ("GPU 0", "GPU3")."""
    return {int(m.group(1)) for m in _GPU_IN_TEXT.finditer(text)}


def settle_entities(test: dict[str, Any], own_errors: set[str], global_errors: int,
                    any_errors: bool, *, shows_warn: bool) -> None:
    """Undo DCGM 4.x printing an entity's Warn as "Fail"; accuse no GPU without its own error.

    dcgmi/Diag.cpp (4.0 to 4.6) prints entity rows and every JSON ``status`` (results and
    ``test_summary``) through HelperDisplayDiagResult without DDR_DISPLAY_WARN: a Warn reads
    "Fail"; only the table's test row (``shows_warn``) prints "Warn". A test is Fail as soon as it
    has one error (nvvs ResultHelpers.cpp GetOverallDiagResult) and dcgmi's exit status counts
    only errors (Diag::GetFailureResult). So a GPU shown "Fail" is a Warn when the test row says
    Warn, when a JSON test has no error at all (then the test is a Warn too), or when every
    error of the test names another GPU (no error of its own, no global one).

    ``global_errors`` counts the test's errors of no GPU: of no entity (DCGM_FE_NONE, printed as
    the test's own "Warning" row or only in the JSON ``test_summary``) or of another entity (a
    CPU). A GPU's "Fail" without an error of its own in such a test is no result of that GPU,
    whatever the error's category: the plugin set every GPU's result to FAIL with it (nvvs
    PluginTest::SetResult after an error of GpuIdTag::Unknown, e.g. DiagnosticPlugin's
    DCGM_FR_INTERNAL on an exception, memtest's DCGM_FR_EMPTY_GPU_LIST), or it is a Warn printed
    as "Fail". It reads "Skip" (that GPU not measured by itself); the test's own Fail stays, a
    failure of the node that names no GPU (dcgmi exits with DCGM_ST_NVVS_ERROR for an error of
    no entity with a code, Diag::GetFailureResult).
    """
    gpus = test["gpus"]
    if (shows_warn and test["status"] == "Warn") or (not shows_warn and not any_errors):
        demote = set(gpus)
    elif global_errors or not any_errors:
        demote = set()
    else:
        demote = set(gpus) - own_errors
    for gpu in demote:
        if gpus[gpu] == "Fail":
            gpus[gpu] = "Warn"
    if global_errors:
        for gpu, status in gpus.items():
            if status == "Fail" and gpu not in own_errors:
                gpus[gpu] = "Skip"
    if not shows_warn and not any_errors and test["status"] == "Fail":
        test["status"] = "Warn"


# nvvs JsonOutput::Result (2.x "GPU {id}", 3.x "GPU {id} "): the prefix put on every message of
# a GPU's result, its own errors and the errors of no GPU alike.
_NVVS_PREFIX = re.compile(r"^GPU ?(\d{1,3}) ?")


def one_error_of_every_gpu(test: dict[str, Any], said: dict[str, list[str]]) -> None:
    """Read back a 2.x/3.x error of no GPU that nvvs copied onto every GPU.

    nvvs of 2.x and 3.x has no result of no GPU: JsonOutput::Result gives an error of
    DCGM_DIAG_ALL_GPUS (-1: a plugin that threw, "DCGM error during plugin setup", an internal
    error) to every GPU of the run, prefixed "GPU <id> ", and fails each. When every GPU of the
    test failed with the same messages once that prefix is gone, and they name no GPU, they are
    one error of no GPU: the test's Fail stays (a failure of the node), no GPU is accused by it
    (each reads "Skip": not measured by itself), and the message is kept once, without prefix.
    """
    gpus = test["gpus"]
    if len(gpus) < 2 or any(s != "Fail" for s in gpus.values()) or set(said) != set(gpus):
        return
    bare = {gpu: [_NVVS_PREFIX.sub("", m, count=1) if _prefix_of(m) == gpu else m
                  for m in said[gpu]] for gpu in gpus}
    first = next(iter(bare.values()))
    if any(b != first for b in bare.values()) or any(gpus_in_text(m) for m in first):
        return
    test["messages"] = list(first)
    for gpu in gpus:
        gpus[gpu] = "Skip"
    if test.get("codes"):
        test["codes"] = [{**c, "gpu": None} for c in test["codes"][: len(first)]]


def _prefix_of(message: str) -> str | None:
    m = _NVVS_PREFIX.match(message)
    return m.group(1) if m else None


# DCGM 2.x/3.x Deployment checks that can only end in Warn (nvvs/plugin_src/software/Software.cpp
# v2.4.7-v3.3.9: checkForGraphicsProcesses and checkForBadEnvVaribles set NVVS_RESULT_WARN and
# nothing else; checkPersistenceMode sets WARN from 3.2.0, FAIL before). dcgmi of those releases
# prints every result other than Pass / Skip as "Fail" (Diag.cpp HelperDisplayDiagResult, table
# and -j) while its exit status counts only a real FAIL (Diag::GetFailureResult).
_WARN_ONLY = {"Graphics Processes": (0,), "Environment Variables": (0,),
              "Environmental Variables": (0,), "Persistence Mode": (3, 2)}


def deployment_warns(tests: list[dict[str, Any]], dcgm_version: str | None) -> None:
    """Read the "Fail" of a 2.x/3.x Deployment check that can only warn as the Warn it is."""
    version = tuple(int(p) for p in re.findall(r"\d+", dcgm_version or "")[:2])
    for test in tests:
        since = _WARN_ONLY.get(test["name"])
        if since is None or test["category"] not in ("Deployment", None):
            continue
        if since > (0,) and (not version or version < since):
            continue  # 2.x tables print no version: before 3.2 persistence mode was a FAIL
        if test["status"] == "Fail":
            test["status"] = "Warn"
        for gpu, status in test["gpus"].items():
            if status == "Fail":
                test["gpus"][gpu] = "Warn"


def new_test(name: str, category: str | None, status: str) -> dict[str, Any]:
    """One entry of ``tests`` in the contract's shape."""
    return {"name": name, "category": category, "status": status, "gpus": {}, "messages": [],
            "codes": []}


def result(
    fmt: str,
    dcgm_version: str | None,
    driver_version: str | None,
    device_ids: list[str],
    tests: list[dict[str, Any]],
    errors: list[str],
    extra_gpus: Iterable[int] = (),
    run_error: str | None = None,
) -> dict[str, Any]:
    """Assemble the contract's keys; ``failed_tests`` and ``gpu_ids`` are derived here once."""
    gpu_ids: set[int] = set(extra_gpus)
    for test in tests:
        gpu_ids.update(int(gpu) for gpu in test["gpus"] if gpu.isdigit())
        for message in test["messages"]:
            gpu_ids.update(gpus_in_text(message))
    for error in errors:
        gpu_ids.update(gpus_in_text(error))
    return {
        "format": fmt,
        # Neither form prints the run level (-r N); the probe that ran it records N itself.
        "level": None,
        "dcgm_version": dcgm_version,
        "driver_version": driver_version,
        "device_ids": device_ids,
        "tests": tests,
        "failed_tests": [test["name"] for test in tests if test["status"] == "Fail"],
        "gpu_ids": sorted(gpu_ids),
        "errors": errors,
        # dcgmi could not run or finish the diagnostic (JSON ``runtime_error``): nothing measured
        "run_error": run_error,
    }
