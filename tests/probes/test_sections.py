"""section_reader: one lookup of a sectioned script's output, with each probe's policy for
a missing tool, a failed command and an empty output; run on a real script's real output."""

from __future__ import annotations

import subprocess

import pytest

from probes.base import Section, failure_text, script, section_reader, split_sections


@pytest.fixture(scope="module")
def sections() -> dict[str, Section]:
    text = script([("ok", "echo hello"), ("fails", "echo 'boom: no answer'; (exit 3)"),
                   ("empty", "true"), ("gone", "echo never")],
                  requires={"gone": "diag-no-such-tool"})
    out = subprocess.run(["sh", "-c", text], capture_output=True, text=True, check=True).stdout
    return split_sections(out)


def test_plain_reader_reads_failed_sections_and_lists_missing_tools(sections) -> None:
    missing: list[str] = []
    read = section_reader(sections, missing)
    assert read("ok") == "hello\n"
    assert read("fails") == "boom: no answer\n"  # the text of a failed command is still read
    assert read("empty") == ""
    assert read("gone") is None and read("absent") is None
    assert missing == ["gone"]  # an absent section is not a missing tool by default


def test_need_output_drops_failed_and_empty_sections(sections) -> None:
    missing: list[str] = []
    read = section_reader(sections, missing, absent_is_missing=True, need_output=True)
    assert read("ok") == "hello\n"
    assert read("fails") is None and read("empty") is None
    assert read("gone") is None and read("absent") is None
    assert missing == ["gone", "absent"]


def test_errors_say_why_a_command_failed(sections) -> None:
    errors: dict[str, str] = {}
    read = section_reader(sections, errors=errors)
    assert read("fails") is None and read("ok") == "hello\n"
    assert errors == {"fails": "boom: no answer"}
    custom: dict[str, str] = {}
    section_reader(sections, errors=custom, describe=lambda text, rc: f"rc {rc}")("fails")
    assert custom == {"fails": "rc 3"}


def test_failure_text_falls_back_to_the_exit_status() -> None:
    assert failure_text("\n  \n", 124) == "exit status 124"
    assert failure_text("\n first line \nsecond", 1) == "first line"
    assert failure_text("x" * 300, 1) == "x" * 200
