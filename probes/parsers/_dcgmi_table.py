"""The text table of ``dcgmi diag`` (DCGM 1.x to 4.x), read row by row.

Every row is ``| <name, 25 wide> | <info, 46 wide> |`` (dcgmi/Diag.cpp, DIAG_DATA). A row with a
name is a test, a metadata line, or the first line of a Warning / Error / Info message; a row
without a name continues whatever came before it: another per-GPU status of the test ("Fail -
GPU: 0" in 2.x/3.x, "GPU0: Pass" in 4.x) or the next 45-character piece of the message (DCGM
splits messages every 45 characters, mid-word, and pads the cell to 46). Pieces are joined exactly:
a full piece keeps its 45 characters (a space at its end is the message's, not padding), the last
one loses its padding; nothing is inserted between pieces.
"""

from __future__ import annotations

import re
from typing import Any

from . import _dcgmi
from ._common import strip_prefix, text_lines, unquote

_ROW = re.compile(r"^\s*\|(?P<name>[^|]*)\|(?P<info>.*)\|\s*$")
_SECTION = re.compile(r"^\s*[|+]-+\s+(?P<category>[A-Za-z][A-Za-z ]*?)\s+-+[+|]-*[+|]\s*$")
_BORDER = re.compile(r"^\s*\+[-=+]+\+\s*$")
# dcgmi's width for one message piece (DATA_INFO_TAG_LEN) and its info cell (" " + 46 + " ").
_PIECE = 45
_CELL = 48
_STATUS = r"(Pass|Fail|Warn|Skip|Not Run)"
_ALL = re.compile(rf"^{_STATUS}(?:\s*-\s*All)?$", re.IGNORECASE)
_SPLIT = re.compile(rf"^{_STATUS}\s*-\s*GPUs?:\s*(.*)$", re.IGNORECASE)
_ENTITY = re.compile(rf"^([A-Za-z_]+?)\s?(\d+):\s*{_STATUS}$", re.IGNORECASE)
_CODE = re.compile(r"^Code: \(\d+\)$")
_MESSAGE_KINDS = ("Warning", "Error", "Info")
_METADATA = {
    "DCGM Version": "dcgm_version",
    "Driver Version Detected": "driver_version",
    "GPU Device IDs Detected": "device_ids",
}
# What dcgmi prints instead of a table when it cannot run (dcgmi/Diag.cpp, "Error: ...").
_DCGMI_ERROR = re.compile(r"^\s*Error: .*(?:[Dd]iagnostic|DCGM|host engine|GPU)")


def dcgmi_error_line(text: str) -> str | None:
    """The first "Error: ..." line dcgmi prints when it runs no diagnostic, if any."""
    for raw in text_lines(text):
        if _DCGMI_ERROR.match(raw):
            return raw.strip()
    return None


def _ids(listing: str) -> list[str]:
    """GPU ids of "1, 2, 3" or "0,1,2"; an id cut with "..." (cell too narrow) is dropped."""
    return [p.strip() for p in listing.split(",") if p.strip().isdigit()]


class _Reader:
    """State of one pass over the table: the section, the open test and the open message."""

    def __init__(self) -> None:
        self.category: str | None = None
        self.in_metadata = False
        self.metadata: dict[str, str] = {}
        self.tests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.extra_gpus: set[int] = set()
        self.test: dict[str, Any] | None = None
        # 4.x, per test with "GPUn: ..." rows: GPUs with a "Warning: GPUn" row, global warnings
        self.entity_errors: dict[int, dict[str, Any]] = {}
        self.pieces: list[tuple[str, str]] | None = None  # (full piece, piece if last)
        self.target: list[str] | None = None  # where the open message goes; None drops it
        self.recognised = 0

    def close_message(self) -> None:
        if self.pieces and self.target is not None:
            text = "".join(exact for exact, _ in self.pieces[:-1]) + self.pieces[-1][1]
            if text.strip():
                self.target.append(text.strip())
        self.pieces = None
        self.target = None

    def section(self, category: str) -> None:
        self.close_message()
        self.category = category
        self.in_metadata = category == "Metadata"
        self.test = None
        self.recognised += 1

    def row(self, name: str, cell: str) -> None:
        info = cell.strip()
        # The cell is " " + content + padding: drop that one separator space, never more (a
        # piece may start with the message's own space), and the padding on the right.
        content = cell[1:] if cell.startswith(" ") else cell.lstrip()
        exact = content[:_PIECE] if len(cell) == _CELL else content.rstrip()
        piece = (exact, content.rstrip())
        if not name:
            self.unnamed(info, piece)
            return
        self.close_message()
        if name == "Diagnostic" and info == "Result":
            self.recognised += 1  # the table's own header row
            return
        if name in _METADATA:
            self.metadata[_METADATA[name]] = info
            self.recognised += 1
            return
        if self.in_metadata:
            return
        kind, _, entity = name.partition(":")
        if kind in _MESSAGE_KINDS:
            # not counted as recognised: "| Warning | ... |" rows alone are any two-column table
            m = re.match(r"\s*GPU\s?(\d+)$", entity)
            if m:
                self.extra_gpus.add(int(m.group(1)))
            if kind == "Warning" and self.test is not None:
                errs = self.errs_of(self.test)
                if m:
                    errs["own"].add(m.group(1))
                elif not entity.strip():
                    errs["global"] += 1
            if kind == "Info":
                self.target = None  # Info rows are not messages; their pieces are dropped
            elif self.test is not None:
                self.target = self.test["messages"]
            else:
                self.target = self.errors if kind == "Error" else None
            self.pieces = [piece]
            return
        self.test = self.status_row(name, info)

    def errs_of(self, test: dict[str, Any]) -> dict[str, Any]:
        return self.entity_errors.setdefault(id(test), {"own": set(), "global": 0,
                                                        "entities": False})

    def status_row(self, name: str, info: str) -> dict[str, Any] | None:
        """A named row: a test with its status, or None when the cell is no status."""
        m = _ALL.match(info)
        if m:
            test = _dcgmi.new_test(name, self.category, _dcgmi.status_word(m.group(1)) or "Skip")
        else:
            m = _SPLIT.match(info)
            if not m:
                return None
            status = _dcgmi.status_word(m.group(1)) or "Skip"
            test = _dcgmi.new_test(name, self.category, status)
            test["gpus"].update(dict.fromkeys(_ids(m.group(2)), status))
        self.tests.append(test)
        self.recognised += 1
        return test

    def unnamed(self, info: str, piece: tuple[str, str]) -> None:
        entity = _ENTITY.match(info)
        code = _CODE.match(info)  # 3.x "Warn - All" Diagnostic: its return code, after warnings
        if self.pieces is not None and not entity and not code:
            self.pieces.append(piece)
            return
        self.close_message()
        if self.test is None or code:
            return
        if entity:
            # 4.x: the test row printed the test's own result; entity rows only fill ``gpus``.
            if entity.group(1).upper() == "GPU":
                status = _dcgmi.status_word(entity.group(3)) or "Skip"
                self.test["gpus"][entity.group(2)] = status
                self.errs_of(self.test)["entities"] = True
            return
        m = _SPLIT.match(info)
        if m:
            status = _dcgmi.status_word(m.group(1)) or "Skip"
            self.test["gpus"].update(dict.fromkeys(_ids(m.group(2)), status))
            self.test["status"] = _dcgmi.worst([self.test["status"], status])


def read(text: str) -> dict[str, Any] | None:
    """The table's facts, or None when ``text`` holds no dcgmi diag table row at all."""
    reader = _Reader()
    for raw in text_lines(text):
        line = unquote(strip_prefix(raw))
        m = _SECTION.match(line)
        if m:
            reader.section(m.group("category"))
            continue
        if _BORDER.match(line):
            reader.close_message()
            reader.test = None
            continue
        m = _ROW.match(line)
        if m:
            reader.row(m.group("name").strip(), m.group("info"))
            continue
        if line.strip():
            reader.close_message()
    reader.close_message()
    if not reader.recognised:
        return None
    for test in reader.tests:
        errs = reader.entity_errors.get(id(test))
        if errs and errs["entities"]:  # 4.x: a Warn of a GPU prints "GPUn: Fail"
            _dcgmi.settle_entities(test, errs["own"], errs["global"],
                                   bool(errs["own"] or errs["global"]), shows_warn=True)
    metadata = reader.metadata
    _dcgmi.deployment_warns(reader.tests, metadata.get("dcgm_version"))
    return _dcgmi.result(
        "table",
        metadata.get("dcgm_version") or None,
        metadata.get("driver_version") or None,
        _device_ids(metadata.get("device_ids", "")),
        reader.tests,
        reader.errors,
        reader.extra_gpus,
    )


def _device_ids(listing: str) -> list[str]:
    """Device ids are hex ("20b0", "2330"): any comma-separated token except a cut one."""
    return [p.strip() for p in listing.split(",") if p.strip() and "..." not in p]
