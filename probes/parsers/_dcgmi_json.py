"""The ``-j`` JSON of ``dcgmi diag``, in the shapes DCGM 2.x, 3.x and 4.x print.

Keys as NVIDIA spells them (nvvs/include/NvvsJsonStrings.h and dcgmi/Diag.cpp of each release):
the root object is "DCGM GPU Diagnostic" up to 3.x and "DCGM Diagnostic" from 4.0; a result names
its GPU with ``gpu_ids`` (2.x, a string, "0,1,2" for the software tests), ``gpu_id`` (3.x) or
``entity_group`` / ``entity_id`` (4.x, where CPUs are entities too); ``warnings`` is a string in
2.x and a list of ``{"warning": ...}`` objects later (3.x's software tests spell the inner key
``warnings``). Versions sit at the top level in 3.x ("version", "Driver Version Detected") and
under "metadata" in 4.x; a run that could not start prints only ``runtime_error``. ``-i N`` with
several iterations wraps the documents in ``{"iterations": [...]}``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from . import _dcgmi
from ._common import fail

WHAT = "dcgmi diag"
_ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
# DCGM_FE_GPU in dcgm_fields.h: the entity group id of GPUs in 4.x results.
_GPU_GROUP_ID = 1
_OBJECT_START = re.compile(r"^[ \t]*\{", re.MULTILINE)
# Lines opening with "{" tried as the document's start; bounds the work on long foreign logs.
_MAX_ATTEMPTS = 20


def find_document(text: str) -> dict[str, Any] | None:
    """The JSON object dcgmi printed, after any banner lines; None when there is none.

    Text that starts with "{" but does not decode, or decodes to something else, is refused
    outright: a cut-off ``-j`` run is not a table either.
    """
    decoder = json.JSONDecoder()
    starts_as_json = text.lstrip().startswith("{")
    for attempt, m in enumerate(_OBJECT_START.finditer(text)):
        if attempt == _MAX_ATTEMPTS:
            break
        try:
            document, _ = decoder.raw_decode(text, m.end() - 1)
        except ValueError as exc:
            if starts_as_json and not text[: m.start()].strip():
                fail(WHAT, f"JSON document does not decode ({exc})")
            continue
        if isinstance(document, dict) and _is_dcgm(document):
            return document
    if starts_as_json:
        fail(WHAT, "JSON document without \"DCGM Diagnostic\" / \"test_categories\" keys")
    return None


def _is_dcgm(document: dict[str, Any]) -> bool:
    if any(isinstance(document.get(root), dict) for root in _ROOTS):
        return True
    if isinstance(document.get("test_categories"), list) or isinstance(document.get("tests"), list):
        return True
    iterations = document.get("iterations")
    return isinstance(iterations, list) and bool(iterations) and all(
        isinstance(i, dict) and _is_dcgm(i) for i in iterations
    )


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _warnings(value: Any) -> list[str]:
    """Messages of a ``warnings`` field in any of its shapes."""
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    messages: list[str] = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                item = item.get("warning", item.get("warnings"))
            text = _text(item)
            if text:
                messages.append(text)
    return messages


def _codes(value: Any, gpu: str | None) -> list[dict[str, Any]]:
    """DCGM's error code (DCGM_FR_*) and severity (dcgmErrorSeverity_t: 1 monitor, 2 isolate,
    4 triage, 5 config, 6 reset) of each warning object (3.x and later; 2.x has plain text)."""
    out: list[dict[str, Any]] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict) and ("error_id" in item or "error_severity" in item):
            code, severity = item.get("error_id"), item.get("error_severity")
            out.append({"gpu": gpu,
                        "code": code if type(code) is int else None,
                        "severity": severity if type(severity) is int else None})
    return out


def _result_gpus(entry: dict[str, Any]) -> list[str]:
    """GPU ids a result entry is about (none for a whole-system software result)."""
    if "entity_id" in entry:
        group, group_id = entry.get("entity_group"), entry.get("entity_group_id")
        if group not in (None, "GPU") or group_id not in (None, _GPU_GROUP_ID):
            return []
        return [str(entry["entity_id"])] if isinstance(entry["entity_id"], int) else []
    for key in ("gpu_id", "gpu_ids"):
        value = entry.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and 0 <= value < 4096:
            return [str(value)]
        if isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip().isdigit()]
    return []


def _test(entry: dict[str, Any], category: str | None) -> dict[str, Any] | None:
    name = _text(entry.get("name"))
    if name is None:
        return None
    gpus: dict[str, str] = {}
    statuses: list[str] = []
    messages: list[str] = []
    erring: set[str] = set()  # GPUs with an error of their own
    codes: list[dict[str, Any]] = []
    said: dict[str, list[str]] = {}  # each GPU's own messages, in order
    entity_shape = "test_summary" in entry  # 4.x: a Warn prints "Fail" (_dcgmi.settle_entities)
    results = entry.get("results")
    for res in results if isinstance(results, list) else []:
        if not isinstance(res, dict):
            continue
        entity_shape = entity_shape or "entity_id" in res
        own = _warnings(res.get("warnings"))
        named = _result_gpus(res)
        if category == "Deployment" and isinstance(res.get("gpu_id"), int):
            # 3.3's Deployment result prints the gpu_id of an error detail nothing fills in
            # (dcgmi Diag.cpp HelperJsonAddBasicTests; DcgmDiagManager::FillTestResult): always
            # 0. Its GPUs are the ones its messages name, or none (then the node's)
            named = sorted({str(g) for m in own for g in _dcgmi.gpus_in_text(m)})
        status = _dcgmi.status_word(res.get("status"))
        if status is not None:
            statuses.append(status)
            for gpu in named:
                gpus[gpu] = _dcgmi.worst([gpus.get(gpu, status), status]) or status
                if own:
                    erring.add(gpu)
                    said.setdefault(gpu, []).extend(own)
        messages.extend(own)
        codes.extend(_codes(res.get("warnings"), named[0] if len(named) == 1 else None))
    any_errors, global_errors = bool(messages), 0
    summary = entry.get("test_summary")
    if isinstance(summary, dict):
        # The summary repeats every result's warnings (4.x, includeAllErrors): add only the rest,
        # which are the errors of no entity (global).
        seen = Counter(messages)
        summary_warnings = summary.get("warnings")
        summary_codes = _codes(summary_warnings, None)
        summary_messages = _warnings(summary_warnings)
        # a code per message only when DCGM gave each one (then they pair up by position)
        paired = len(summary_codes) == len(summary_messages)
        for i, message in enumerate(summary_messages):
            any_errors = True
            if seen[message]:
                seen[message] -= 1
            else:
                messages.append(message)
                global_errors += 1
                if paired:
                    codes.append(summary_codes[i])
        summary_status = _dcgmi.status_word(summary.get("status"))
        if summary_status is not None:
            statuses = [summary_status]
    test = _dcgmi.new_test(name, category, _dcgmi.worst(statuses) or "Skip")
    test["gpus"] = gpus
    test["messages"] = messages
    test["codes"] = codes
    if entity_shape:
        _dcgmi.settle_entities(test, erring, global_errors, any_errors, shows_warn=False)
    else:
        _dcgmi.one_error_of_every_gpu(test, said)
    return test


def _one(document: dict[str, Any], tests: list[dict[str, Any]], run_errors: list[str]) -> None:
    """Tests and run errors of one (non-iterated) document, appended in output order."""
    root = next((document[r] for r in _ROOTS if isinstance(document.get(r), dict)), document)
    categories = root.get("test_categories")
    if isinstance(categories, list):
        for category in categories:
            if not isinstance(category, dict):
                continue
            name = _text(category.get("category"))
            entries = category.get("tests")
            for entry in entries if isinstance(entries, list) else []:
                test = _test(entry, name) if isinstance(entry, dict) else None
                if test is not None:
                    tests.append(test)
    elif isinstance(root.get("tests"), list):
        for entry in root["tests"]:
            test = _test(entry, None) if isinstance(entry, dict) else None
            if test is not None:
                tests.append(test)
    # dcgmi's HelperDisplayFailureMessage: the diagnostic did not run or did not finish (DCGM
    # paused, a diag already running, a time-out, NVVS failing to start, every GPU detached):
    # nothing was measured, which is no test's failure (dcgmi/Diag.cpp RunDiagOnce).
    for holder in (root, document):
        error = _text(holder.get("runtime_error"))
        if error and error not in run_errors:
            run_errors.append(error)


def _first(candidates: list[tuple[dict[str, Any], str]]) -> str | None:
    for holder, key in candidates:
        value = holder.get(key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            text = str(value).strip()
            if text:
                return text
    return None


def _versions(document: dict[str, Any]) -> tuple[str | None, str | None]:
    holders: list[dict[str, Any]] = [document]
    if isinstance(document.get("metadata"), dict):
        holders.insert(0, document["metadata"])
    holders += [document[r] for r in _ROOTS if isinstance(document.get(r), dict)]
    version = _first([(h, "version") for h in holders])
    driver = _first(
        [(h, k) for h in holders for k in ("Driver Version Detected", "driver_version_detected",
                                           "driver_version")]
    )
    return version, driver


def _device_ids(document: dict[str, Any]) -> list[str]:
    groups = document.get("entity_groups")
    if isinstance(groups, list):
        ids: list[str] = []
        for group in groups:
            if not isinstance(group, dict):
                continue
            if group.get("entity_group", "GPU") != "GPU" or group.get(
                "entity_group_id", _GPU_GROUP_ID
            ) != _GPU_GROUP_ID:
                continue
            entities = group.get("entities")
            for entity in entities if isinstance(entities, list) else []:
                device = entity.get("device_id") if isinstance(entity, dict) else None
                if isinstance(device, str) and device.strip():
                    ids.append(device.strip())
        return ids
    listed = document.get("GPU Device IDs")
    if isinstance(listed, list):
        return [str(d).strip() for d in listed if isinstance(d, (str, int)) and str(d).strip()]
    return []


def read(document: dict[str, Any]) -> dict[str, Any]:
    """The contract's facts from a decoded dcgmi document (one run or ``iterations``)."""
    runs = document.get("iterations")
    documents = [d for d in runs if isinstance(d, dict)] if isinstance(runs, list) else [document]
    tests: list[dict[str, Any]] = []
    run_errors: list[str] = []
    version = driver = None
    device_ids: list[str] = []
    for run in documents:
        _one(run, tests, run_errors)
        run_version, run_driver = _versions(run)
        version, driver = version or run_version, driver or run_driver
        device_ids = device_ids or _device_ids(run)
    _dcgmi.deployment_warns(tests, version)
    if isinstance(runs, list) and not run_errors:
        # The iterations wrapper's "warning" is errorString() of why the series stopped: a failed
        # test already says so; without one, the series stopped for a reason of its own.
        stopped = _text(document.get("warning"))
        if stopped and not any(test["status"] == "Fail" for test in tests):
            run_errors.append(stopped)
    return _dcgmi.result("json", version, driver, device_ids, tests, [],
                         run_error="; ".join(run_errors) or None)
