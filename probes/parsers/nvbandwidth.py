"""``nvbandwidth`` (NVIDIA/nvbandwidth): copy-engine and SM bandwidth / latency matrices.

Each test prints "Running <name>." then one matrix per measured direction: a title ("memcpy CE
CPU(row) -> GPU(column) bandwidth (GB/s)"; bidirectional device-to-device tests since v0.6 print
"Read1" / "Read2" / "Total" (or "Write1" / "Write2" / "Total") matrices; the latency tests of
v0.5+ title theirs "... (ns)"), a row of column labels, one row per source with ``N/A`` on the
diagonal, and ``SUM <key> <value>``. Releases before v0.5 print the same matrices under a
shorter preamble; v0.7+ adds ``COEFFICIENT_OF_VARIATION`` lines, which are ignored, as are the
NOTE paragraph and whatever another tool printed after the run (``perf stat``). With
``--perfFormatter`` the sum is printed as ``&&&& PERF <key> <value> +GB/s|-ns`` instead of SUM;
those go to ``perf_gb_s`` / ``perf_ns``, not to the SUM keys of the contract.

``-j`` (v0.5+) prints one JSON document instead (json_output.cpp): each testcase holds its
description, "bandwidth_matrix" rows as strings and "sum". A bidirectional device-to-device test
appends its three matrices' rows to one "bandwidth_matrix" and keeps only the last description
and sum, so its rows are split in three (labelled from the test name) and its sum is the total's.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._common import fail, strip_prefix, text_lines, to_float, unquote

WHAT = "nvbandwidth"

_VERSION = re.compile(r"^\s*nvbandwidth Version:\s*(\S+)")
_DRIVER = re.compile(r"^\s*Driver Version:\s*(\S+)")
_RUNNING = re.compile(r"^\s*Running (\w+)\.\s*$")
_TITLE = re.compile(r"^\s*\S.*\((GB/s|ns)\)\s*$")
_LABEL = re.compile(r"\b(Read1|Read2|Write1|Write2|Total) bandwidth\b")
_SUM = re.compile(r"^\s*SUM (\S+) (\S+)\s*$")
_PERF = re.compile(r"^\s*&&&& PERF (\S+) (\S+) ([+-])(GB/s|ns)\s*$")
# What a test prints when it fails instead of measuring: "ERROR: ...", "Error: ...", a data
# check "Invalid value when checking the pattern at ...", "ASSERT in expression ...".
_TEST_ERROR = re.compile(r"\b(?:ERROR|Error|ASSERT|Invalid value)\b")
_VALUE = re.compile(r"^(?:N/A|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)$")


class _Matrix:
    """A matrix being read: its title, column labels once seen, rows so far."""

    def __init__(self, title: str) -> None:
        self.unit = "ns" if title.rstrip().endswith("(ns)") else "GB/s"
        m = _LABEL.search(title)
        self.label = m.group(1) if m else None
        self.columns: list[str] | None = None
        self.cells: dict[str, dict[str, float | None]] = {}

    def feed(self, line: str) -> bool:
        """Take one line of the matrix; False once the line is not part of it."""
        tokens = line.split()
        if not tokens:
            return not self.cells and self.columns is None
        if self.columns is None:
            self.columns = tokens
            return True
        values = tokens[1:]
        if not values or not all(_VALUE.match(v) for v in values):
            return False
        self.cells[tokens[0]] = {
            # a row shorter than the label row (a cut paste) keeps the cells it has
            column: to_float(value) for column, value in zip(self.columns, values, strict=False)
        }
        return True

    def result(self) -> dict[str, Any]:
        return {"label": self.label, "cells": self.cells}


def _has_matrix(tests: list[dict[str, Any]]) -> bool:
    return any(test["matrices"] for test in tests)


def _unit_of(name: str) -> str:
    """A test's unit before its matrix title was seen: the latency tests are in ns."""
    return "ns" if "latency" in name else "GB/s"


def _json_matrices(name: str, description: str, rows: list[Any]) -> list[dict[str, Any]]:
    """The matrices of one ``-j`` testcase (three for a bidirectional device-to-device test)."""
    grid = [[to_float(str(v)) if _VALUE.match(str(v)) else None for v in row]
            for row in rows if isinstance(row, list)]
    labels: list[str | None] = [None]
    if "Total bandwidth" in description and grid and len(grid) % 3 == 0:
        labels = ["Write1", "Write2", "Total"] if "write" in name else ["Read1", "Read2", "Total"]
    size = len(grid) // len(labels)
    matrices = []
    for index, label in enumerate(labels):
        part = grid[index * size : (index + 1) * size]
        cells = {str(r): {str(c): value for c, value in enumerate(row)}
                 for r, row in enumerate(part)}
        matrices.append({"label": label, "cells": cells})
    return matrices


def _parse_json(document: dict[str, Any]) -> dict[str, Any]:
    """The ``-j`` document, mapped onto the same keys as the text."""
    root = document["nvbandwidth"]
    tests: list[dict[str, Any]] = []
    sums: dict[str, dict[str, float]] = {"GB/s": {}, "ns": {}}
    cases = root.get("testcases")
    for case in cases if isinstance(cases, list) else []:
        if not isinstance(case, dict) or not isinstance(case.get("name"), str):
            continue
        description = case.get("bandwidth_description")
        description = description if isinstance(description, str) else ""
        unit = "ns" if description.rstrip().endswith("(ns)") else _unit_of(case["name"])
        rows = case.get("bandwidth_matrix")
        matrices = _json_matrices(case["name"], description, rows) if isinstance(rows, list) else []
        error = case.get("error")
        tests.append({"name": case["name"], "unit": unit if matrices else None,
                      "matrices": matrices, "status": case.get("status"),
                      "errors": [error] if isinstance(error, str) and error else []})
        total = case.get("sum")
        if isinstance(total, (int, float)) and not isinstance(total, bool):
            sums[unit][case["name"]] = float(total)
    version, driver = root.get("version"), root.get("Driver Version")
    return {
        "version": version if isinstance(version, str) else None,
        "driver_version": driver if isinstance(driver, str) else None,
        "tests": tests,
        "sums_gb_s": sums["GB/s"],
        "sums_ns": sums["ns"],
        "perf_gb_s": {},
        "perf_ns": {},
    }


def _json_document(text: str) -> dict[str, Any] | None:
    """The ``-j`` document when ``text`` is one, else None (then it is read as text)."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        document, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except ValueError as exc:
        fail(WHAT, f"JSON document does not decode ({exc})")
    if not isinstance(document, dict) or not isinstance(document.get("nvbandwidth"), dict):
        fail(WHAT, "JSON document without an \"nvbandwidth\" object")
    return document


def parse(text: str) -> dict[str, Any]:
    """Versions, every test block with its matrices, and the SUM lines split by unit."""
    document = _json_document(text)
    if document is not None:
        return _parse_json(document)
    version: str | None = None
    driver: str | None = None
    tests: list[dict[str, Any]] = []
    sums: dict[str, dict[str, float]] = {"GB/s": {}, "ns": {}}
    perf: dict[str, dict[str, float]] = {"GB/s": {}, "ns": {}}
    test: dict[str, Any] | None = None
    matrix: _Matrix | None = None
    for raw in text_lines(text):
        line = unquote(strip_prefix(raw))
        if matrix is not None:
            if matrix.feed(line):
                continue
            assert test is not None
            test["matrices"].append(matrix.result())
            matrix = None
        if version is None and (m := _VERSION.match(line)):
            version = m.group(1)
            continue
        if driver is None and (m := _DRIVER.match(line)):
            driver = m.group(1)
            continue
        if m := _RUNNING.match(line):
            test = {"name": m.group(1), "unit": None, "matrices": [], "errors": []}
            tests.append(test)
            continue
        if test is None:
            continue
        if _TITLE.match(line):
            matrix = _Matrix(line)
            test["unit"] = test["unit"] or matrix.unit
            continue
        if m := _SUM.match(line):
            value = to_float(m.group(2))
            if value is not None:
                sums[test["unit"] or _unit_of(test["name"])][m.group(1)] = value
            continue
        if m := _PERF.match(line):
            value = to_float(m.group(2))
            if value is not None:
                perf[m.group(4)][m.group(1)] = value
            continue
        if _TEST_ERROR.search(line):
            test["errors"].append(line.strip())
    if matrix is not None and test is not None:
        test["matrices"].append(matrix.result())
    if not tests or not (version or sums["GB/s"] or sums["ns"] or _has_matrix(tests)):
        if version is not None:
            fail(WHAT, "no \"Running <test>.\" block (the run printed only its header)")
        fail(WHAT, "no \"Running <test>.\" block and no \"nvbandwidth Version:\" line found")
    return {
        "version": version,
        "driver_version": driver,
        "tests": tests,
        "sums_gb_s": sums["GB/s"],
        "sums_ns": sums["ns"],
        "perf_gb_s": perf["GB/s"],
        "perf_ns": perf["ns"],
    }
