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


def new_test(name: str, category: str | None, status: str) -> dict[str, Any]:
    """One entry of ``tests`` in the contract's shape."""
    return {"name": name, "category": category, "status": status, "gpus": {}, "messages": []}


def result(
    fmt: str,
    dcgm_version: str | None,
    driver_version: str | None,
    device_ids: list[str],
    tests: list[dict[str, Any]],
    errors: list[str],
    extra_gpus: Iterable[int] = (),
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
    }
